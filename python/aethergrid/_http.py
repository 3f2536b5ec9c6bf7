"""The SDK's one door to the head: HTTP requests with auth and error mapping.

Every request opens its own connection (http.client), so a Transport may be shared by
threads. Over TLS all connections to one head share one ssl.SSLContext, and each new one
offers the TLS session of the last, so that the head resumes it instead of a full
handshake. Connection-level failures become AGConnectionError naming the address;
a head certificate that does not verify becomes AGValidationError; HTTP error statuses
become the matching AGError subclass carrying the head's message. An upgrade request (a
WebSocket) goes through the same heads, TLS and error mapping, and hands its socket over.

A Transport may know several heads of one cluster (a group sharing one store: one leads,
the others stand by and answer 503 {"standby": true, "leader": "HOST:PORT"}). Requests go
to the current head; when it cannot be reached or stands by, to the others (the leader a
standby named first), each once per try; the head that answers as leader becomes the
current one.
"""
import http.client
import io
import json
import time
import socket
import ssl
import urllib.parse

from .exceptions import (AGAuthError, AGConflictError, AGConnectionError, AGError, AGNotFoundError,
                         AGPermissionError, AGValidationError)

DEFAULT_PORT = 6379
# The most head addresses one client takes (the CLI's limit too).
MAX_HEADS = 8
# Body chunk size for streamed uploads; also the granularity of upload progress.
UPLOAD_CHUNK_BYTES = 1 << 20
USER_AGENT = "aethergrid-python/0.1.0"
# Bounds on what an answer to an upgrade request is read to: its head, and the body of a
# refusal.
MAX_RESPONSE_HEAD_BYTES = 64 << 10
MAX_REFUSAL_BODY_BYTES = 1 << 20

# How long a client that has reached the head keeps retrying while it restarts, or while
# its heads change leader (a takeover).
RECONNECT_WINDOW_S = 30.0

# Errors after which the request may not have reached the head, or its answer was lost.
# A TLS connection closed by the head mid-handshake or mid-answer (e.g. as it restarts)
# is a reset too.
_RESET_ERRORS = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError,
                 http.client.RemoteDisconnected, http.client.IncompleteRead,
                 ssl.SSLEOFError, ssl.SSLZeroReturnError)


class AddressError(AGValidationError, ValueError):
    """A head address, or list of them, that cannot be understood: an AGValidationError
    that is a ValueError too."""


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


class Upgraded(Response):
    """A head's 101 answer to Transport.upgrade: `sock`, the connection now speaking the
    new protocol (the caller closes it), and `leftover`, the bytes of that protocol that
    came with the answer."""

    def __init__(self, headers, sock, leftover):
        super().__init__(101, headers, b"")
        self.sock = sock
        self.leftover = leftover


def _read_response_head(sock):
    """(status, headers, bytes after the head) of the HTTP answer on `sock`, read no
    further than the blank line ending its head plus what came with it (an upgraded
    connection's first bytes are the new protocol's)."""
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > MAX_RESPONSE_HEAD_BYTES:
            raise http.client.LineTooLong("the head's answer has a head over {} bytes".format(
                MAX_RESPONSE_HEAD_BYTES))
        chunk = sock.recv(65536)
        if not chunk:
            raise http.client.RemoteDisconnected("the head closed the connection without an answer")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    status_line, _, header_lines = head.partition(b"\r\n")
    parts = status_line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        raise http.client.BadStatusLine(status_line.decode("latin-1"))
    headers = http.client.parse_headers(io.BytesIO(header_lines + b"\r\n\r\n"))
    return int(parts[1]), headers, rest


def _read_body(sock, headers, received):
    """The body of an answer that is not an upgrade: Content-Length bytes (`received`
    holds its start), or what comes until the head closes the connection; at most
    MAX_REFUSAL_BODY_BYTES of it (a refusal's JSON is short)."""
    length = headers.get("Content-Length")
    wanted = int(length) if length and length.strip().isdigit() else None
    limit = MAX_REFUSAL_BODY_BYTES if wanted is None else min(wanted, MAX_REFUSAL_BODY_BYTES)
    body = bytearray(received)
    while len(body) < limit:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return bytes(body[:limit])


def parse_address(address):
    """(scheme, host, port, display) from "HOST:PORT", "HOST" or "http(s)://HOST:PORT[/]".

    scheme is "http" or "https" as written, or None when the address has none; the port
    defaults to DEFAULT_PORT whatever the scheme (the head serves TLS and plain HTTP on
    the same port). display is "HOST:PORT" ("[V6]:PORT"), the key the user config pins
    CAs under. Raises AddressError (an AGValidationError and ValueError) for anything else.
    """
    if not isinstance(address, str) or not address.strip():
        raise AddressError("the head address must be a non-empty string like "
                           "'127.0.0.1:6379', got {!r}".format(address))
    text = address.strip()
    written_scheme = text.split("://", 1)[0].lower() if "://" in text else None
    if written_scheme is None:
        text = "http://" + text
    parsed = urllib.parse.urlsplit(text)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise AddressError("cannot understand the head address {!r}: use HOST:PORT or "
                           "http://HOST:PORT".format(address))
    if parsed.path not in ("", "/") or parsed.query:
        raise AddressError("the head address {!r} must not have a path: use HOST:PORT "
                           "or http://HOST:PORT".format(address))
    try:
        port = parsed.port or DEFAULT_PORT
    except ValueError:
        raise AddressError("the head address {!r} has a bad port".format(address)) from None
    host = parsed.hostname
    display = "{}:{}".format("[" + host + "]" if ":" in host else host, port)
    return written_scheme, host, port, display


def parse_addresses(text):
    """[(scheme, host, port, display)] of each address in `text`: one head address as
    parse_address takes it, or several separated by commas ("h1:6379,h2:6379"), at most
    MAX_HEADS and each once.

    Raises AddressError (an AGValidationError and ValueError) naming what is wrong: an
    empty entry, an address it cannot understand, one named twice, too many.
    """
    if not isinstance(text, str) or not text.strip():
        raise AddressError("the head address must be a non-empty string like '127.0.0.1:6379' "
                           "(or several: 'h1:6379,h2:6379'), got {!r}".format(text))
    pieces = text.split(",")
    if len(pieces) > MAX_HEADS:
        raise AddressError("the head addresses {!r} name {} heads; give at most {}".format(
            text, len(pieces), MAX_HEADS))
    heads = []
    seen = set()
    for i, piece in enumerate(pieces):
        if not piece.strip():
            raise AddressError("the head addresses {!r} have an empty entry (number {}); expected "
                               "HOST:PORT[,HOST:PORT...]".format(text, i + 1))
        head = parse_address(piece)
        if head[3] in seen:
            raise AddressError("the head addresses {!r} name {} twice".format(text, head[3]))
        seen.add(head[3])
        heads.append(head)
    return heads


def _display_of(address):
    """HOST:PORT of `address` as a head names it, or None when it is none."""
    if not isinstance(address, str) or not address:
        return None
    try:
        return parse_address(address)[3]
    except AGValidationError:
        return None


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
    """An HTTP connection over TLS to `head` (Head.secure: its context, offering its last
    TLS session for resumption). `tls_socket` is the TLS socket once connected; it stays
    readable while the answer is read."""

    def __init__(self, head, timeout):
        super().__init__(head.host, head.port, timeout=timeout)
        self._head = head
        self.tls_socket = None

    def connect(self):
        super().connect()
        self.sock = self._head.secure(self.sock)
        self.tls_socket = self.sock


class Head:
    """One head a Transport may send to: `address` (HOST:PORT), `host`, `port`, and how
    to speak to it: over TLS with `ssl_context` when one is given (every connection
    verifies the head against it), else plain HTTP. `ca_description` says in words where
    the context's CA came from, for errors."""

    def __init__(self, address, ssl_context=None, ca_description=""):
        _, self.host, self.port, self.address = parse_address(address)
        self.ssl_context = ssl_context
        self.scheme = "https" if ssl_context is not None else "http"
        self.ca_description = ca_description
        # The TLS session the last connection to this head got; the next one offers it.
        # Replaced by one assignment, so threads sharing the Transport need no lock for it.
        self.tls_session = None

    def connect(self, timeout):
        """An http.client connection to this head, not yet connected."""
        if self.ssl_context is None:
            return http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        return _TlsConnection(self, timeout)

    def secure(self, sock):
        """`sock` wrapped in TLS verified against this head's context (the handshake done),
        offering the last connection's TLS session for resumption."""
        return self.ssl_context.wrap_socket(sock, server_hostname=self.host, session=self.tls_session)

    def open_socket(self, timeout):
        """A socket connected to this head, over TLS when it is spoken to so. Raises
        _NotSent when the connection (or the TLS handshake) fails, except a certificate
        that does not verify (ssl.SSLCertVerificationError)."""
        try:
            sock = socket.create_connection((self.host, self.port), timeout=timeout)
        except OSError as e:
            raise _NotSent(e) from None
        if self.ssl_context is None:
            return sock
        try:
            return self.secure(sock)
        except ssl.SSLCertVerificationError:
            sock.close()
            raise
        except OSError as e:
            sock.close()
            raise _NotSent(e) from None

    def __repr__(self):
        return "Head({!r})".format(self.address)


class _NotSent(Exception):
    """The connection to a head failed before any of the request was sent (`error`):
    no head acted on it, so another may get it."""

    def __init__(self, error):
        super().__init__(str(error))
        self.error = error


class _Failure:
    """Why one head did not take a request: `error` (a connection-level exception), or
    `response`, a standby's answer naming `leader` ("" while none leads)."""

    def __init__(self, head, error=None, response=None, leader=None):
        self.head = head
        self.error = error
        self.response = response
        self.leader = leader

    @property
    def reset(self):
        return isinstance(self.error, _RESET_ERRORS)

    @property
    def transient(self):
        """True when trying again soon may succeed: the head refused or dropped the
        connection (it restarts), or it stands by (a takeover may be under way)."""
        return self.response is not None or isinstance(self.error, (ConnectionRefusedError,) + _RESET_ERRORS)


def _standby_leader(method, response):
    """The leader a standby's 503 names ("" while none leads), or None when `response`
    is not a standby's. A HEAD answer has no body to tell: its 503 counts as a standby's
    that names no leader."""
    if response.status != 503:
        return None
    if method == "HEAD":
        return ""
    try:
        data = json.loads(response.body.decode("utf-8"))
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("standby") is not True:
        return None
    leader = data.get("leader")
    return leader if isinstance(leader, str) else ""


class Transport:
    """Talks HTTP to the heads of one cluster. `address` is one head's address (TLS with
    `ssl_context` when one is given, `ca_description` saying where its CA came from), or
    a list of Heads (each with its own). Requests go to the current head (the first at
    first); when it cannot be reached or stands by, to the others, and the one that
    answers as leader becomes current. `timeout` (seconds) bounds every socket operation
    of a request; long polls add their own wait to it."""

    def __init__(self, address, token, timeout, ssl_context=None, ca_description=""):
        if isinstance(address, str):
            heads = [Head(address, ssl_context, ca_description)]
        else:
            heads = list(address)
        if not heads:
            raise AddressError("a Transport needs at least one head")
        self.heads = tuple(heads)
        self.token = token
        self.timeout = timeout
        self.reached = False  # set once any request got an answer from any head
        # The head requests go to first; replaced by one assignment (thread-safe enough:
        # a request that read the old one only tries it first).
        self._current = self.heads[0]

    @property
    def address(self):
        """The current head's address as HOST:PORT."""
        return self._current.address

    @property
    def addresses(self):
        """Every head's address as HOST:PORT, in the order given."""
        return tuple(head.address for head in self.heads)

    @property
    def scheme(self):
        """The current head's scheme: "https" or "http"."""
        return self._current.scheme

    def request(self, method, path, query=None, body=None, data=None, content_type=None,
                body_file=None, body_size=None, progress=None, retry=None, extra_timeout=0.0,
                ok_statuses=None):
        """Sends one request and returns its Response.

        body: JSON-serialisable value; data: bytes; body_file + body_size: a seekable file
        streamed in UPLOAD_CHUNK_BYTES chunks, calling progress(bytes_sent_so_far).
        retry: send once more after a connection reset (default: only GET and HEAD; pass
        True for POSTs that are idempotent, e.g. a submit carrying a submission_id).
        ok_statuses: statuses returned as is instead of raised (e.g. {404} for HEAD).
        Raises AGConnectionError (naming every head tried when there are several), or the
        AGError subclass of the HTTP status.
        """
        if query:
            path = path + "?" + urllib.parse.urlencode(query)
        headers = self._headers()
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
        # A retryable call is sent again after a reset. Once this client has reached a
        # head, it also rides out a head restart or a takeover: while every head refuses,
        # stands by or cannot reach the store (503), the call is retried with backoff for
        # up to RECONNECT_WINDOW_S (a submit is safe to repeat: it carries its
        # submission_id, the same in every try). A head never reached fails at once.
        deadline = time.monotonic() + RECONNECT_WINDOW_S
        delay = 0.05
        tries = 0
        while True:
            tries += 1
            response, failures = self._try_heads(
                method, lambda head: self._send_once(head, method, path, headers, data, body_file,
                                                     progress, timeout), retry)
            if response is not None:
                if not (retry and response.status == 503 and time.monotonic() < deadline):
                    break
            elif not (retry and (any(f.reset for f in failures) and tries < 2 or
                                 self.reached and time.monotonic() < deadline and
                                 any(f.transient for f in failures))):
                raise self._failure_error(method, path, failures) from None
            if tries > 1:
                time.sleep(max(0.0, min(delay, deadline - time.monotonic())))
                delay = min(delay * 2, 1.0)
        if ok_statuses and response.status in ok_statuses:
            return response
        raise_for_status(response, "{} {}".format(method, path.split("?", 1)[0]))
        return response

    def _headers(self):
        """The headers every request carries: who sends it, and the user's token."""
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        return headers

    def upgrade(self, path, query, headers, timeout=None):
        """Asks the current head (following a standby to the leader, as request() does) to
        switch the connection of GET `path`?`query` to another protocol, sending
        `headers` (e.g. Upgrade and its keys) besides the usual ones. `query` is a list of
        (name, value) pairs, a name repeated as often as it comes. `timeout` (seconds,
        default the Transport's) bounds each socket operation until the head answers.

        Returns an Upgraded response (status 101) that owns the connected socket.
        A refusal raises as request() does: the AGError subclass of its HTTP status,
        AGConnectionError when no head answered. Never sent twice: once the request may
        have reached a head, its failure is raised (a command must not run twice).
        """
        target = path + "?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote)
        all_headers = dict(self._headers(), **headers)
        timeout = self.timeout if timeout is None else timeout
        response, failures = self._try_heads(
            "GET", lambda head: self._upgrade_once(head, target, all_headers, timeout), retry=False)
        if response is None:
            raise self._failure_error("GET", target, failures, timeout) from None
        if response.status != 101:
            raise_for_status(response, "GET " + path)
            raise AGError("GET {} was answered HTTP {} instead of switching protocols".format(
                path, response.status), response.status)
        return response

    def _upgrade_once(self, head, target, headers, timeout):
        sock = head.open_socket(timeout)
        upgraded = False
        try:
            lines = ["GET {} HTTP/1.1".format(target), "Host: {}".format(head.address)]
            lines += ["{}: {}".format(name, value) for name, value in headers.items()]
            sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            status, response_headers, rest = _read_response_head(sock)
            self._keep_tls_session(head, sock)
            if status != 101:
                return Response(status, response_headers, _read_body(sock, response_headers, rest))
            upgraded = True
            return Upgraded(response_headers, sock, rest)
        finally:
            if not upgraded:
                sock.close()

    def _try_heads(self, method, send, retry):
        """Sends the request (send(head) -> Response) to the current head, then, while a
        head cannot be reached or stands by, to the other heads: the leader a standby
        named first, each once.

        Returns (response, failures): the answer of a head that does not stand by (it
        becomes the current head), or None; and why each head before it failed. A
        request that is not `retry` goes to no other head once it may have reached one
        (an error after it was sent).
        """
        failures = []
        tried = set()
        head = self._current
        while head is not None:
            tried.add(head.address)
            try:
                response = send(head)
            except ssl.SSLCertVerificationError as e:
                raise self._verification_error(head, e) from None
            except _NotSent as e:
                failures.append(_Failure(head, error=e.error))
            except (OSError, http.client.HTTPException) as e:
                failures.append(_Failure(head, error=e))
                if not retry:
                    return None, failures
            else:
                self.reached = True
                leader = _standby_leader(method, response)
                if leader is None:
                    self._current = head
                    return response, failures
                failures.append(_Failure(head, response=response, leader=leader))
            head = self._next_head(tried, failures[-1].leader)
        return None, failures

    def _next_head(self, tried, leader):
        """The head to try next: `leader` (as a standby named it) when it is one of this
        client's and not yet tried, else the first not tried; None when all were."""
        named = _display_of(leader)
        untried = [head for head in self.heads if head.address not in tried]
        for head in untried:
            if head.address == named:
                return head
        return untried[0] if untried else None

    def _send_once(self, head, method, path, headers, data, body_file, progress, timeout):
        conn = head.connect(timeout)
        try:
            try:
                conn.connect()
            except ssl.SSLCertVerificationError:
                raise
            except (OSError, http.client.HTTPException) as e:
                raise _NotSent(e) from None
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
                    return self._read(head, conn, method)
                except (OSError, http.client.HTTPException):
                    pass
                raise
            return self._read(head, conn, method)
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

    def _read(self, head, conn, method):
        resp = conn.getresponse()
        self._keep_tls_session(head, getattr(conn, "tls_socket", None))
        body = b"" if method == "HEAD" else resp.read()
        return Response(resp.status, resp.headers, body)

    @staticmethod
    def _keep_tls_session(head, tls_socket):
        # Taken once the answer's head is read: by then a TLS 1.3 head has sent its
        # session ticket, and the socket is still open.
        if not isinstance(tls_socket, ssl.SSLSocket):
            return
        try:
            session = tls_socket.session
        except (OSError, ValueError, AttributeError):
            return
        if session is not None:
            head.tls_session = session

    @staticmethod
    def _verification_error(head, error):
        detail = getattr(error, "verify_message", None) or getattr(error, "reason", None) or str(error)
        reason = "certificate verify failed: {}".format(detail)
        return AGValidationError(
            "the certificate of the head at {} does not verify against the cluster CA ({}): {}. "
            "Another head answered, someone is in between, or the CA is not this head's: pin "
            "the head's CA with ca_fingerprint='sha256:...' (`ag start-head` prints it)".format(
                head.address, head.ca_description or "given", reason))

    def _failure_error(self, method, path, failures, timeout=None):
        """The AGConnectionError for a request no head took: with one head, why it
        failed; with several, the heads tried and why each failed, the last last.
        `timeout`: the seconds each socket operation had (default the Transport's)."""
        request = "[{} {}]".format(method, path.split("?", 1)[0])
        reasons = [(f.head.address, self._reason(f, timeout)) for f in failures]
        last_address, last_reason = reasons[-1]
        if len(self.heads) == 1:
            if failures[-1].response is not None:
                message = "cannot reach the leading AetherGrid head: {} {}".format(last_reason, request)
            else:
                message = "cannot reach the AetherGrid head at {}: {} {}".format(
                    last_address, last_reason, request)
            address = last_address
        else:
            tried = [address for address, _ in reasons]
            message = "cannot reach the leading AetherGrid head; tried {}: {} {}".format(
                ", ".join(tried), "; ".join("{}: {}".format(a, r) for a, r in reasons), request)
            address = ",".join(tried)
        error = AGConnectionError(message, address=address, reason=last_reason)
        if failures[-1].response is not None:
            error.status = failures[-1].response.status
        return error

    def _reason(self, failure, timeout=None):
        """Why one head failed, in words."""
        if failure.response is not None:
            text = error_message(failure.response) if failure.response.body else ""
            return text or "HTTP {}: the head stands by or cannot serve requests now".format(
                failure.response.status)
        error = failure.error
        if isinstance(error, socket.timeout):
            return "no answer within {:g} s".format(self.timeout if timeout is None else timeout)
        if isinstance(error, socket.gaierror):
            return "cannot resolve host {!r} ({})".format(failure.head.host, error.strerror or error)
        if isinstance(error, ConnectionRefusedError):
            return "connection refused (is the head running? start one with `ag start-head`)"
        if isinstance(error, _RESET_ERRORS):
            return "the connection was closed before the head answered ({})".format(
                type(error).__name__)
        if isinstance(error, ssl.SSLError):
            return "the TLS handshake failed ({}); a head started with --insecure speaks only " \
                   "plain HTTP: pass insecure=True".format(error.reason or error)
        return str(error) or type(error).__name__
