"""A minimal client's end of a WebSocket (RFC 6455), standard library only.

The opening handshake goes through the Transport (Transport.upgrade), so a WebSocket
reaches the same head, over the same TLS and with the same token and error mapping as
every REST request. After it, one thread drives the connection: WebSocket.pump() waits
until the socket can be read or written (a non-blocking socket under `selectors`, so
reading and writing never block each other), writes what is queued and returns the
messages that arrived whole.

What this end does, and why: every frame it sends is masked with a fresh random key (a
client must mask); frames from the head must not be (the RFC has the client fail a
masked one). Messages may come in fragments, with control frames between them; a ping is
answered with a pong carrying the same bytes; a close is answered with a close. No
extension is offered, so no frame has RSV bits set. A message is bounded by
MAX_MESSAGE_BYTES, so a broken peer cannot make this end buffer without limit.
"""
import base64
import hashlib
import os
import selectors
import ssl
import struct
import time

OP_CONTINUATION = 0x0
OP_TEXT = 0x1
OP_BINARY = 0x2
OP_CLOSE = 0x8
OP_PING = 0x9
OP_PONG = 0xA

# RFC 6455 section 1.3: the server proves it read the key by hashing it with this GUID.
_ACCEPT_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
# The largest message this end assembles (the head sends 64 KiB chunks).
MAX_MESSAGE_BYTES = 16 << 20
# How much one recv() asks for, and the most one send() offers.
RECV_BYTES = 256 << 10
SEND_BYTES = 256 << 10
# Close codes (RFC 6455 section 7.4.1).
CLOSE_NORMAL = 1000
CLOSE_PROTOCOL_ERROR = 1002
CLOSE_TOO_BIG = 1009

# What a non-blocking socket (plain or TLS) raises when it cannot go on now.
_WOULD_BLOCK = (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError)


class WebSocketError(Exception):
    """The head broke the protocol; the text says how, `code` is the close code this end
    answers it with (RFC 6455 section 7.4.1)."""

    def __init__(self, message, code=CLOSE_PROTOCOL_ERROR):
        super().__init__(message)
        self.code = code


def open_websocket(transport, path, query, timeout=None):
    """A WebSocket to GET `path`?`query` on the transport's current head (pairs, a name
    repeated as often as it comes). `timeout` bounds each socket operation of the
    handshake (default the Transport's).

    Raises what Transport.upgrade raises (the AGError subclass of a refusal,
    AGConnectionError), and WebSocketError when the head's 101 is not a WebSocket's.
    """
    key = base64.b64encode(os.urandom(16)).decode("ascii")
    response = transport.upgrade(path, query, {
        "Upgrade": "websocket",
        "Connection": "Upgrade",
        "Sec-WebSocket-Key": key,
        "Sec-WebSocket-Version": "13",
    }, timeout=timeout)
    try:
        expected = accept_value(key)
        got = (response.header("Sec-WebSocket-Accept") or "").strip()
        if got != expected:
            raise WebSocketError("the head switched protocols without a valid Sec-WebSocket-Accept "
                                 "(got {!r}, expected {!r})".format(got, expected))
        if "websocket" not in (response.header("Upgrade") or "").lower():
            raise WebSocketError("the head switched to {!r}, not to websocket".format(
                response.header("Upgrade")))
        return WebSocket(response.sock, response.leftover)
    except BaseException:
        response.sock.close()
        raise


def accept_value(key):
    """The Sec-WebSocket-Accept a server answers to Sec-WebSocket-Key `key`."""
    digest = hashlib.sha1(key.encode("ascii") + _ACCEPT_GUID).digest()
    return base64.b64encode(digest).decode("ascii")


def encode_frame(opcode, payload, mask_key=None):
    """One whole (FIN) client frame: masked with `mask_key` (4 bytes; fresh random ones
    by default), with the 7-, 16- or 64-bit payload length the size needs."""
    payload = bytes(payload)
    mask_key = os.urandom(4) if mask_key is None else mask_key
    size = len(payload)
    first = 0x80 | opcode
    if size < 126:
        header = struct.pack("!BB", first, 0x80 | size)
    elif size < 1 << 16:
        header = struct.pack("!BBH", first, 0x80 | 126, size)
    else:
        header = struct.pack("!BBQ", first, 0x80 | 127, size)
    return header + mask_key + mask(payload, mask_key)


def mask(payload, mask_key):
    """`payload` XORed with the 4-byte `mask_key` repeated (masking and unmasking alike),
    as one big-integer XOR: far faster in Python than byte by byte."""
    size = len(payload)
    if not size:
        return b""
    repeated = (mask_key * (size // 4 + 1))[:size]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(repeated, "big")).to_bytes(size, "big")


def decode_frame(buffer):
    """(fin, opcode, payload, frame size) of the first whole frame in `buffer` (from a
    server: unmasked), or None while it is not all there. Raises WebSocketError for RSV
    bits, a masked frame, a bad control frame or a payload over MAX_MESSAGE_BYTES."""
    if len(buffer) < 2:
        return None
    first, second = buffer[0], buffer[1]
    fin, opcode = bool(first & 0x80), first & 0x0F
    if first & 0x70:
        raise WebSocketError("the head sent a frame with reserved bits set (no extension was agreed)")
    if second & 0x80:
        raise WebSocketError("the head sent a masked frame (a server's frames are never masked)")
    size, at = second & 0x7F, 2
    if size == 126:
        if len(buffer) < 4:
            return None
        size, at = struct.unpack_from("!H", buffer, 2)[0], 4
    elif size == 127:
        if len(buffer) < 10:
            return None
        size, at = struct.unpack_from("!Q", buffer, 2)[0], 10
    if opcode >= OP_CLOSE and (size > 125 or not fin):
        raise WebSocketError("the head sent a control frame (opcode {}) that is fragmented or over "
                             "125 bytes".format(opcode))
    if size > MAX_MESSAGE_BYTES:
        raise WebSocketError("the head sent a frame of {} bytes; at most {} are taken".format(
            size, MAX_MESSAGE_BYTES), CLOSE_TOO_BIG)
    if len(buffer) < at + size:
        return None
    return fin, opcode, bytes(buffer[at:at + size]), at + size


class WebSocket:
    """The client's end of one WebSocket over a connected socket (plain or TLS) and the
    bytes that came with the handshake. Owned by one thread; close() when done.

    send_binary() queues a message; pump() moves bytes both ways and returns the
    messages that arrived whole, as (opcode, payload). `closed` turns true once the
    head has closed (a close frame, or the connection ended); `close_reason` says how.
    """

    def __init__(self, sock, leftover=b""):
        self._sock = sock
        self._sock.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._sock, selectors.EVENT_READ)
        self._inbox = bytearray(leftover)
        self._outbox = bytearray()
        # The bytes a send() was last offered and did not take: a TLS socket must be
        # offered the same bytes again.
        self._offered = None
        self._fragments = None  # (opcode, [payloads]) of a message still coming
        self._fragment_bytes = 0
        self._close_sent = False
        self._send_failed = False
        self._close_received = False
        self._eof = False  # the connection ended; what it brought is still parsed
        # A TLS read that must write first (a key update) waits for the socket to be writable.
        self._read_wants_write = False
        self.closed = False
        self.close_reason = None

    @property
    def queued_bytes(self):
        """Bytes queued to send and not yet written."""
        return len(self._outbox)

    @property
    def sending(self):
        """False once nothing more can be sent: a close was queued or a write failed."""
        return not (self._close_sent or self._send_failed)

    def send_binary(self, payload):
        """Queues `payload` as one binary message; pump() writes it."""
        self._queue(OP_BINARY, payload)

    def _queue(self, opcode, payload):
        if self._close_sent or self._send_failed:
            return
        self._outbox += encode_frame(opcode, payload)
        if opcode == OP_CLOSE:
            self._close_sent = True

    def pump(self, deadline=None):
        """Waits until the socket can be read or written, or until `deadline`
        (time.monotonic()) passes, then reads and writes what it can. Returns the
        messages that arrived whole, [(opcode, payload)], possibly none.
        Raises WebSocketError when the head broke the protocol, OSError when reading
        failed (a failed write only ends sending: what came before may still be read)."""
        # What is already here first (the handshake may have brought whole frames).
        messages = self._take_messages()
        if not messages and not self.closed:
            self._wait(deadline)
            self._transmit()
            self._receive()
            messages = self._take_messages()
        self._transmit()
        return messages

    def _wait(self, deadline):
        # A TLS socket may hold decrypted bytes the kernel no longer sees: no waiting then.
        if self._inbox_pending():
            return
        writing = self._outbox or self._read_wants_write
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if writing else 0)
        self._selector.modify(self._sock, events)
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        self._selector.select(timeout)

    def _inbox_pending(self):
        return isinstance(self._sock, ssl.SSLSocket) and self._sock.pending() > 0

    def _transmit(self):
        while self._outbox:
            if self._offered is None:
                self._offered = bytes(self._outbox[:SEND_BYTES])
            try:
                sent = self._sock.send(self._offered)
            except _WOULD_BLOCK:
                return
            except OSError:
                # The head is gone or stopped reading: what was queued cannot reach it, but
                # what it sent before (its status) may still be read.
                self._send_failed = True
                self._outbox.clear()
                return
            del self._outbox[:sent]
            self._offered = None

    def _receive(self):
        self._read_wants_write = False
        for _ in range(16):  # bounded, so that writing gets its turn while a lot comes in
            try:
                data = self._sock.recv(RECV_BYTES)
            except ssl.SSLWantWriteError:
                self._read_wants_write = True
                return
            except _WOULD_BLOCK:
                return
            if not data:
                self._eof = True
                return
            self._inbox += data

    def _take_messages(self):
        messages = []
        try:
            while not self._close_received:  # nothing counts after the head's close
                frame = decode_frame(self._inbox)
                if frame is None:
                    break
                fin, opcode, payload, size = frame
                del self._inbox[:size]
                message = self._on_frame(fin, opcode, payload)
                if message is not None:
                    messages.append(message)
        except WebSocketError as e:
            # Fail the connection (RFC 6455 section 7.1.7): say why in a close frame.
            self._queue(OP_CLOSE, struct.pack("!H", e.code))
            raise
        if self._eof:
            self._ended("the connection ended without a close frame")
        return messages

    def _on_frame(self, fin, opcode, payload):
        """The message a frame completes, or None; answers pings and closes."""
        if opcode == OP_PING:
            self._queue(OP_PONG, payload)
            return None
        if opcode == OP_PONG:
            return None
        if opcode == OP_CLOSE:
            code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
            # Echo the head's code (RFC 6455 section 5.5.1); 1005 "no code" is never sent.
            self._queue(OP_CLOSE, payload[:2] if code is not None else b"")
            self._close_received = True
            self._ended("the head closed the WebSocket (code {}{})".format(
                code, ": " + payload[2:].decode("utf-8", "replace") if len(payload) > 2 else ""))
            return None
        if opcode == OP_CONTINUATION:
            if self._fragments is None:
                raise WebSocketError("the head sent a continuation frame with no message begun")
        elif opcode in (OP_TEXT, OP_BINARY):
            if self._fragments is not None:
                raise WebSocketError("the head began a message inside another one")
            self._fragments = (opcode, [])
            self._fragment_bytes = 0
        else:
            raise WebSocketError("the head sent a frame with the unknown opcode {}".format(opcode))
        self._fragment_bytes += len(payload)
        if self._fragment_bytes > MAX_MESSAGE_BYTES:
            raise WebSocketError("the head sent a message over {} bytes".format(MAX_MESSAGE_BYTES),
                                 CLOSE_TOO_BIG)
        self._fragments[1].append(payload)
        if not fin:
            return None
        message_opcode, parts = self._fragments
        self._fragments = None
        return message_opcode, b"".join(parts)

    def _ended(self, reason):
        if not self.closed:
            self.closed = True
            self.close_reason = reason

    def close(self, code=CLOSE_NORMAL):
        """Sends a close frame (once, when the connection still takes it: best effort,
        without waiting) and closes the socket."""
        try:
            if not self._close_sent:
                self._queue(OP_CLOSE, struct.pack("!H", code))
            self._transmit()
        except OSError:
            pass
        finally:
            self._selector.close()
            try:
                self._sock.close()
            except OSError:
                pass
