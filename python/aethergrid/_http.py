"""The SDK's one door to the head: HTTP requests with auth and error mapping.

Every request opens its own connection (http.client), so a Transport may be shared by
threads. Over TLS all of a Transport's connections share one ssl.SSLContext, and each
new one offers the TLS session of the last, so that the head resumes it instead of a
full handshake. Connection-level failures become AGConnectionError naming the address;
a head certificate that does not verify becomes AGValidationError; HTTP error statuses
become the matching AGError subclass carrying the head's message.
"""
import http.client
import json
import time
import socket
import ssl
import urllib.parse

from .exceptions import (AGAuthError, AGConflictError, AGConnectionError, AGError, AGNotFoundError,
                         AGPermissionError, AGValidationError)

DEFAULT_PORT = 6379
# Body chunk size for streamed uploads; also the granularity of upload progress.
UPLOAD_CHUNK_BYTES = 1 << 20
USER_AGENT = "aethergrid-python/0.1.0"

# Errors after which the request may not have reached the head, or its answer was lost.
# How long a client that has reached the head keeps retrying while it restarts.
RECONNECT_WINDOW_S = 30.0

# A TLS connection closed by the head mid-handshake or mid-answer (e.g. as it restarts)
# is a reset too.
_RESET_ERRORS = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError,
                 http.client.RemoteDisconnected, http.client.IncompleteRead,
                 ssl.SSLEOFError, ssl.SSLZeroReturnError)


class Response:
    """One HTTP answer: `status`, `headers` (case-insensitive .get), `body` bytes."""

    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def header(self, name, default=None):
        value = self.headers.get(name)
        return default if value is None else value

    def json(self):
        if not self.body:
            return None
        try:
            return json.loads(self.body.decode("utf-8"))
        except ValueError:
            raise AGError("the head answered HTTP {} with a body that is not JSON: {!r}".format(
                self.status, self.body[:200]), status=self.status) from None


def parse_address(address):
    """(scheme, host, port, display) from "HOST:PORT", "HOST" or "http(s)://HOST:PORT[/]".

    scheme is "http" or "https" as written, or None when the address has none; the port
    defaults to DEFAULT_PORT whatever the scheme (the head serves TLS and plain HTTP on
    the same port). display is "HOST:PORT" ("[V6]:PORT"), the key the user config pins
    CAs under. Raises AGValidationError for anything else.
    """
    if not isinstance(address, str) or not address.strip():
        raise AGValidationError("the head address must be a non-empty string like "
                                "'127.0.0.1:6379', got {!r}".format(address))
    text = address.strip()
    written_scheme = text.split("://", 1)[0].lower() if "://" in text else None
    if written_scheme is None:
        text = "http://" + text
    parsed = urllib.parse.urlsplit(text)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise AGValidationError("cannot understand the head address {!r}: use HOST:PORT or "
                                "http://HOST:PORT".format(address))
    if parsed.path not in ("", "/") or parsed.query:
        raise AGValidationError("the head address {!r} must not have a path: use HOST:PORT "
                                "or http://HOST:PORT".format(address))
    try:
        port = parsed.port or DEFAULT_PORT
    except ValueError:
        raise AGValidationError("the head address {!r} has a bad port".format(address)) from None
    host = parsed.hostname
    display = "{}:{}".format("[" + host + "]" if ":" in host else host, port)
    return written_scheme, host, port, display


def error_message(response):
    """The head's error text from a JSON {"error": ...} body, else the body as text."""
    text = response.body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text or "HTTP {}".format(response.status)
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return data["error"]
    return text


def raise_for_status(response, what):
    """Raises the AGError subclass that matches an HTTP error status."""
    status = response.status
    if status < 400:
        return
    message = error_message(response)
    if status == 401:
        raise AGAuthError(
            "{} refused (HTTP 401): {}. Pass your user token with token_file=FILE or "
            "AG_TOKEN_FILE (or token= / AG_TOKEN); on the head's machine the session's "
            "token is used when none is given".format(what, message.rstrip(".")), status)
    if status == 403:
        raise AGPermissionError(message, status, request=what)
    if status in (400, 413, 422):
        raise AGValidationError(message, status)
    if status == 404:
        raise AGNotFoundError(message, status)
    if status == 409:
        raise AGConflictError(message, status)
    raise AGError("{} failed with HTTP {}: {}".format(what, status, message), status)


class _TlsConnection(http.client.HTTPConnection):
    """An HTTP connection over TLS with `context` that offers `tls_session` (a previous
    connection's session, or None) for resumption. `tls_socket` is the TLS socket once
    connected; it stays readable while the answer is read."""

    def __init__(self, host, port, timeout, context, tls_session):
        super().__init__(host, port, timeout=timeout)
        self._context = context
        self._tls_session = tls_session
        self.tls_socket = None

    def connect(self):
        super().connect()
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self.host,
                                              session=self._tls_session)
        self.tls_socket = self.sock


class Transport:
    """Talks HTTP to one head: over TLS with `ssl_context` when one is given (every
    connection verifies the head against it), else plain HTTP. `ca_description` says in
    words where the context's CA came from, for errors. `timeout` (seconds) bounds every
    socket operation of a request; long polls add their own wait to it."""

    def __init__(self, address, token, timeout, ssl_context=None, ca_description=""):
        _, self.host, self.port, self.address = parse_address(address)
        self.scheme = "https" if ssl_context is not None else "http"
        self.token = token
        self.timeout = timeout
        self.ssl_context = ssl_context
        self.ca_description = ca_description
        self.reached = False  # set once any request got an answer
        # The TLS session the last connection got; the next one offers it. Replaced by
        # one assignment, so threads sharing the Transport need no lock for it.
        self._tls_session = None

    def _connect(self, timeout):
        if self.ssl_context is None:
            return http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        return _TlsConnection(self.host, self.port, timeout, self.ssl_context, self._tls_session)

    def request(self, method, path, query=None, body=None, data=None, content_type=None,
                body_file=None, body_size=None, progress=None, retry=None, extra_timeout=0.0,
                ok_statuses=None):
        """Sends one request and returns its Response.

        body: JSON-serialisable value; data: bytes; body_file + body_size: a seekable file
        streamed in UPLOAD_CHUNK_BYTES chunks, calling progress(bytes_sent_so_far).
        retry: send once more after a connection reset (default: only GET and HEAD; pass
        True for POSTs that are idempotent, e.g. a submit carrying a submission_id).
        ok_statuses: statuses returned as is instead of raised (e.g. {404} for HEAD).
        Raises AGConnectionError, or the AGError subclass of the HTTP status.
        """
        if query:
            path = path + "?" + urllib.parse.urlencode(query)
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            content_type = content_type or "application/json"
        if content_type:
            headers["Content-Type"] = content_type
        if data is not None:
            headers["Content-Length"] = str(len(data))
        elif body_file is not None:
            headers["Content-Length"] = str(body_size)
        elif method in ("POST", "PUT"):
            headers["Content-Length"] = "0"
        if retry is None:
            retry = method in ("GET", "HEAD")
        timeout = self.timeout + extra_timeout
        # A retryable call is sent again after a reset. Once this client has reached the
        # head, it also rides out a head restart: refused connections are retried with
        # backoff for up to RECONNECT_WINDOW_S (a submit is safe to repeat: it carries
        # its submission_id). A head never reached fails at once.
        deadline = time.monotonic() + RECONNECT_WINDOW_S
        delay = 0.05
        tries = 0
        while True:
            tries += 1
            try:
                response = self._send_once(method, path, headers, data, body_file, progress, timeout)
                self.reached = True
                break
            except ssl.SSLCertVerificationError as e:
                raise self._verification_error(e) from None
            except (OSError, http.client.HTTPException) as e:
                reset = isinstance(e, _RESET_ERRORS)
                refused = isinstance(e, ConnectionRefusedError)
                again = retry and ((reset and tries < 2) or
                                   (self.reached and (reset or refused) and time.monotonic() < deadline))
                if not again:
                    raise self._connection_error(method, path, e) from None
                if tries > 1:
                    time.sleep(delay)
                    delay = min(delay * 2, 1.0)
        if ok_statuses and response.status in ok_statuses:
            return response
        raise_for_status(response, "{} {}".format(method, path.split("?", 1)[0]))
        return response

    def _send_once(self, method, path, headers, data, body_file, progress, timeout):
        conn = self._connect(timeout)
        try:
            conn.putrequest(method, path, skip_host=False, skip_accept_encoding=True)
            for name, value in headers.items():
                conn.putheader(name, value)
            conn.endheaders()
            try:
                if data is not None:
                    conn.send(data)
                elif body_file is not None:
                    self._stream(conn, body_file, progress)
            except (BrokenPipeError, ConnectionResetError):
                # The head may have answered early (e.g. 413 for a package over its
                # limit) and closed; its answer is worth more than the send error.
                try:
                    return self._read(conn, method)
                except (OSError, http.client.HTTPException):
                    pass
                raise
            return self._read(conn, method)
        finally:
            conn.close()

    @staticmethod
    def _stream(conn, body_file, progress):
        body_file.seek(0)
        sent = 0
        while True:
            chunk = body_file.read(UPLOAD_CHUNK_BYTES)
            if not chunk:
                break
            conn.send(chunk)
            sent += len(chunk)
            if progress:
                progress(sent)

    def _read(self, conn, method):
        resp = conn.getresponse()
        self._keep_tls_session(conn)
        body = b"" if method == "HEAD" else resp.read()
        return Response(resp.status, resp.headers, body)

    def _keep_tls_session(self, conn):
        # Taken once the answer's head is read: by then a TLS 1.3 head has sent its
        # session ticket, and the socket is still open.
        tls_socket = getattr(conn, "tls_socket", None)
        if tls_socket is None:
            return
        try:
            session = tls_socket.session
        except (OSError, ValueError, AttributeError):
            return
        if session is not None:
            self._tls_session = session

    def _verification_error(self, error):
        detail = getattr(error, "verify_message", None) or getattr(error, "reason", None) or str(error)
        reason = "certificate verify failed: {}".format(detail)
        return AGValidationError(
            "the certificate of the head at {} does not verify against the cluster CA ({}): {}. "
            "Another head answered, someone is in between, or the CA is not this head's: pin "
            "the head's CA with ca_fingerprint='sha256:...' (`ag start-head` prints it)".format(
                self.address, self.ca_description or "given", reason))

    def _connection_error(self, method, path, error):
        if isinstance(error, socket.timeout):
            reason = "no answer within {:g} s".format(self.timeout)
        elif isinstance(error, socket.gaierror):
            reason = "cannot resolve host {!r} ({})".format(self.host, error.strerror or error)
        elif isinstance(error, ConnectionRefusedError):
            reason = "connection refused (is the head running? start one with `ag start-head`)"
        elif isinstance(error, _RESET_ERRORS):
            reason = "the connection was closed before the head answered ({})".format(
                type(error).__name__)
        elif isinstance(error, ssl.SSLError):
            reason = "the TLS handshake failed ({}); a head started with --insecure speaks only " \
                     "plain HTTP: pass insecure=True".format(error.reason or error)
        else:
            reason = str(error) or type(error).__name__
        return AGConnectionError("cannot reach the AetherGrid head at {}: {} [{} {}]".format(
            self.address, reason, method, path.split("?", 1)[0]), address=self.address, reason=reason)
