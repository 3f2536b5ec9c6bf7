"""How the SDK reaches a head: TLS verified against the cluster CA, or plain HTTP.

A head serves TLS with a certificate signed by its cluster CA (<head data dir>/tls/
ca.crt); it answers plain HTTP only to peers on its own machine. The choice is the `ag`
CLI's (src/cli/session.cc, head_ca_for), made by choose_ca_source as a value:

  insecure=True                              -> plain HTTP
  ca_file=PATH                               -> TLS, verified against that PEM
  ca_fingerprint="sha256:..."                -> TLS, against the CA the head serves at
                                                /api/tls/ca if its fingerprint is this one
  the session's head is this head (ca_file)  -> TLS, against the session's CA
  the user config pins a CA for HOST:PORT    -> TLS, against that CA
  the head is on loopback                    -> plain HTTP
  otherwise                                  -> AGValidationError saying how to pin the CA

load_ca_pem then does the file reads and the fingerprint fetch the choice asks for.
A CA fingerprint is "sha256:" + the lowercase hex SHA-256 of the CA certificate's DER,
as `ag start-head` prints it.
"""
import hashlib
import http.client
import ipaddress
import re
import socket
import ssl

from .exceptions import AGConnectionError, AGValidationError

# Where the head serves its cluster CA's certificate (PEM), with no credential.
CA_PATH = "/api/tls/ca"
# The most bytes of a CA certificate the SDK accepts from a head.
MAX_CA_BYTES = 64 * 1024

_FINGERPRINT_RE = re.compile(r"^sha256:[0-9a-f]{64}$")

# Where a choice came from; CaSource.kind is one of these.
INSECURE = "insecure"      # insecure=True: plain HTTP even to another machine
LOOPBACK = "loopback"      # no CA known and the head is on this machine: plain HTTP
CA_FILE = "ca_file"        # ca_file= given
FINGERPRINT = "fingerprint"  # ca_fingerprint= given: fetch the CA and check it
SESSION = "session"        # this machine's session started this head
CONFIG = "config"          # the user config ($AG_CONFIG) pins a CA for this head


class CaSource:
    """The decision of choose_ca_source: `kind` (one of the constants above) and
    `detail` (the CA file's path for CA_FILE, SESSION and CONFIG; the normalised
    fingerprint for FINGERPRINT; "" otherwise). `tls` says whether TLS is used."""

    def __init__(self, kind, detail=""):
        self.kind = kind
        self.detail = detail

    @property
    def tls(self):
        return self.kind not in (INSECURE, LOOPBACK)

    def describe(self):
        """Where the CA came from, in words, for error messages."""
        return {
            CA_FILE: "ca_file {}".format(self.detail),
            FINGERPRINT: "fetched from the head and matching ca_fingerprint {}".format(self.detail),
            SESSION: "this machine's session, {}".format(self.detail),
            CONFIG: "pinned by `ag config`, {}".format(self.detail),
        }.get(self.kind, "none")

    def __eq__(self, other):
        return isinstance(other, CaSource) and (self.kind, self.detail) == (other.kind, other.detail)

    def __repr__(self):
        return "CaSource({!r}, {!r})".format(self.kind, self.detail)


def is_loopback_host(host):
    """True for "localhost", "::1" and IPv4 127.0.0.0/8: the hosts the head answers
    plain HTTP for (the CLI's test)."""
    if host in ("localhost", "::1"):
        return True
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return False
    return addr.version == 4 and addr.is_loopback


def normalize_fingerprint(text):
    """"sha256:" + 64 lowercase hex digits, from `text` in any case.

    Raises AGValidationError (in the CLI's words) for anything else.
    """
    if isinstance(text, str) and text.startswith("sha256:"):
        normalised = "sha256:" + text[len("sha256:"):].lower()
        if _FINGERPRINT_RE.match(normalised):
            return normalised
    raise AGValidationError(
        "ca_fingerprint {!r} is not a CA fingerprint; expected sha256: and 64 hex digits, as "
        "`ag start-head` prints it".format(text))


def fingerprint_of(pem):
    """The fingerprint of the first certificate in the PEM text `pem`.

    Raises AGValidationError when `pem` holds no certificate.
    """
    try:
        der = ssl.PEM_cert_to_DER_cert(_first_certificate(pem))
    except ValueError:
        raise AGValidationError("not a PEM certificate") from None
    return "sha256:" + hashlib.sha256(der).hexdigest()


def _first_certificate(pem):
    begin = pem.find("-----BEGIN CERTIFICATE-----")
    end_marker = "-----END CERTIFICATE-----"
    end = pem.find(end_marker, begin + 1)
    if begin < 0 or end < 0:
        raise ValueError("no certificate")
    return pem[begin:end + len(end_marker)] + "\n"


def choose_ca_source(display, host, ca_file=None, ca_fingerprint=None, insecure=False,
                     session_head="", session_ca_file="", pinned_ca_files=None):
    """Decides how to reach the head at `display` ("HOST:PORT", the CLI's form; `host`
    its host) from the Client's arguments, the head this machine's session started
    (`session_head`, as HOST:PORT, and its `session_ca_file`) and the CAs the user config
    pins ({"HOST:PORT": path}). Reads nothing.

    Returns a CaSource. Raises AGValidationError when the arguments contradict each
    other, ca_fingerprint is malformed, or the head is on another machine and no CA is
    known for it (the CLI's message, naming ca_fingerprint= as well).
    """
    given = [name for name, value in (("ca_file", ca_file), ("ca_fingerprint", ca_fingerprint))
             if value]
    if insecure and given:
        raise AGValidationError("give insecure=True or {}=, not both".format(given[0]))
    if len(given) == 2:
        raise AGValidationError("give ca_file= or ca_fingerprint=, not both")
    if insecure:
        return CaSource(INSECURE)
    if ca_file:
        return CaSource(CA_FILE, ca_file)
    if ca_fingerprint:
        return CaSource(FINGERPRINT, normalize_fingerprint(ca_fingerprint))
    # A head on this machine's loopback is reached in plain HTTP: nothing leaves the
    # machine, and a new connection costs no handshake. Its session's CA serves a head
    # started here on another address.
    if session_ca_file and session_head == display and not is_loopback_host(host):
        return CaSource(SESSION, session_ca_file)
    pinned = (pinned_ca_files or {}).get(display)
    if pinned:
        return CaSource(CONFIG, pinned)
    if is_loopback_host(host):
        return CaSource(LOOPBACK)
    raise AGValidationError(
        "the head at {0} is on another machine and its cluster CA is not pinned here: run "
        "`ag config --address {0} --ca-fingerprint sha256:...` (`ag start-head` prints the "
        "fingerprint) or pass Client(..., ca_fingerprint='sha256:...'), or pass insecure=True "
        "to send your token in clear text".format(display))


def load_ca_pem(source, host, port, display, timeout):
    """The CA PEM `source` asks for: read from its file, or fetched from the head and
    checked against the fingerprint. None when the source is plain HTTP.

    Raises AGValidationError (a CA file that cannot be read or holds no certificate; a
    head whose CA has another fingerprint, naming both) or AGConnectionError (the head
    cannot be reached to fetch its CA, or does not speak TLS).
    """
    if not source.tls:
        return None
    if source.kind == FINGERPRINT:
        return fetch_pinned_ca(host, port, display, source.detail, timeout)
    what = {CA_FILE: "ca_file", SESSION: "the session's cluster CA",
            CONFIG: "the cluster CA pinned by `ag config`"}[source.kind]
    try:
        with open(source.detail, encoding="ascii", errors="replace") as f:
            pem = f.read(MAX_CA_BYTES + 1)
    except OSError as e:
        raise AGValidationError("cannot read {} {}: {}".format(
            what, source.detail, e.strerror or e)) from None
    try:
        fingerprint_of(pem)
    except AGValidationError:
        raise AGValidationError("{} {} holds no PEM certificate".format(what, source.detail)) from None
    return pem


def fetch_pinned_ca(host, port, display, fingerprint, timeout):
    """The CA PEM the head serves at /api/tls/ca, when its fingerprint is `fingerprint`.

    The fetch goes over TLS that verifies nothing and carries no token: what it brings is
    trusted only because its fingerprint matches the one the user gave.
    Raises AGValidationError (another fingerprint: a different head, or someone in
    between; no CA to give) or AGConnectionError (unreachable, or no TLS there).
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
    try:
        conn.request("GET", CA_PATH, headers={"Accept": "application/x-pem-file"})
        resp = conn.getresponse()
        body = resp.read(MAX_CA_BYTES + 1)
        status = resp.status
    except ssl.SSLError as e:
        raise AGConnectionError(
            "cannot fetch the cluster CA of the head at {}: the TLS handshake failed ({}); a head "
            "started with --insecure has no CA: pass insecure=True".format(display, e.reason or e),
            address=display, reason=str(e)) from None
    except (OSError, http.client.HTTPException) as e:
        reason = "no answer within {:g} s".format(timeout) if isinstance(e, socket.timeout) else (
            str(e) or type(e).__name__)
        raise AGConnectionError("cannot fetch the cluster CA of the head at {}: {}".format(
            display, reason), address=display, reason=reason) from None
    finally:
        conn.close()
    pem = body.decode("ascii", "replace")
    if status != 200:
        raise AGValidationError("the head at {} has no cluster CA to give (HTTP {}): {}".format(
            display, status, pem.strip()[:200]), status)
    try:
        got = fingerprint_of(pem)
    except AGValidationError:
        raise AGValidationError("the head at {} sent no certificate at {}".format(
            display, CA_PATH)) from None
    if got != fingerprint:
        raise AGValidationError(
            "the head at {} has cluster CA {}, not the pinned {} (ca_fingerprint): refusing to "
            "talk to it (a different head, or someone in between)".format(display, got, fingerprint))
    return pem


def client_context(ca_pem, source):
    """The TLS context a Client uses with every request: verifies that the head's
    certificate chains to the cluster CA `ca_pem` and names the host.

    Raises AGValidationError when `ca_pem` (from `source`, a CaSource) cannot be loaded.
    """
    try:
        return ssl.create_default_context(cadata=ca_pem)
    except (ssl.SSLError, ValueError) as e:
        raise AGValidationError("the cluster CA ({}) cannot be used: {}".format(
            source.describe(), getattr(e, "reason", None) or e)) from None
