"""A minimal WebSocket client for tests that speak the worker protocol by hand, so that
they can send what no real worker would: malformed, forged or out-of-order messages.
Standard library only (RFC 6455 framing, client-side masking)."""
import base64
import json
import os
import socket
import struct


def upgrade(sock, lines):
    """Sends an upgrade request's header lines; returns (status, response header, bytes after it)."""
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            break
        head += chunk
    header, _, rest = head.partition(b"\r\n\r\n")
    return (int(header.split(b" ", 2)[1]) if header else 0), header, rest


class WsPeer:
    def __init__(self, host, port, path="/api/workers/connect", token=None, timeout=10):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [f"GET {path} HTTP/1.1", f"Host: {host}:{port}", "Upgrade: websocket",
                 "Connection: Upgrade", f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13"]
        if token is not None:
            lines.append(f"Authorization: Bearer {token}")
        self.status, _, self._buffer = upgrade(self.sock, lines)
        self.closed = False

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    # ---- sending --------------------------------------------------------------------
    def _send_frame(self, opcode, payload):
        header = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def send_text(self, text):
        self._send_frame(0x1, text.encode() if isinstance(text, str) else text)

    def send_json(self, obj):
        self.send_text(json.dumps(obj))

    def send_binary(self, data):
        self._send_frame(0x2, data)

    def send_log_frame(self, header, payload=b""):
        head = json.dumps(header).encode()
        self.send_binary(struct.pack("!I", len(head)) + head + payload)

    # ---- receiving ------------------------------------------------------------------
    def _read_exact(self, n):
        while len(self._buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("connection closed")
            self._buffer += chunk
        out, self._buffer = self._buffer[:n], self._buffer[n:]
        return out

    def recv(self):
        """The next text message as parsed JSON, or None once the head closed."""
        while True:
            try:
                b0, b1 = self._read_exact(2)
            except (EOFError, ConnectionError, socket.timeout):
                self.closed = True
                return None
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._read_exact(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read_exact(8))[0]
            payload = self._read_exact(n)
            if opcode == 0x8:
                self.closed = True
                return None
            if opcode == 0x1:
                return json.loads(payload)

    def recv_until(self, msg_type, limit=50):
        """Messages up to and including the first of `msg_type` (None when closed first)."""
        for _ in range(limit):
            msg = self.recv()
            if msg is None or msg.get("type") == msg_type:
                return msg
        return None


def register_message(node_id, address="127.0.0.9", cpu_millis=1000, memory_bytes=1 << 30):
    return {"type": "register", "node_id": node_id, "address": address, "hostname": "rogue",
            "resources": {"cpu_millis": cpu_millis, "memory_bytes": memory_bytes, "gpu_ids": []},
            "running": [], "exited": [], "busy_ports": []}


class LogStreamPeer:
    """A worker's log stream (api/log_stream.h) opened by hand: the upgrade, then
    records as the test builds them."""

    def __init__(self, host, port, token=None, path="/api/workers/logs", protocol="aethergrid-logs/1",
                 timeout=10):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        lines = [f"GET {path} HTTP/1.1", f"Host: {host}:{port}", f"Upgrade: {protocol}", "Connection: Upgrade"]
        if token is not None:
            lines.append(f"Authorization: Bearer {token}")
        self.status, header, self.body = upgrade(self.sock, lines)
        length = [int(line.split(b":", 1)[1]) for line in header.split(b"\r\n")
                  if line.lower().startswith(b"content-length:")]
        while length and len(self.body) < length[0]:
            chunk = self.sock.recv(4096)
            if not chunk:
                break
            self.body += chunk

    def error(self):
        return json.loads(self.body)["error"]

    def send_record(self, kind, meta=b"", payload=b"", payload_length=None):
        n = len(payload) if payload_length is None else payload_length
        self.sock.sendall(kind + struct.pack("!IQ", len(meta), n) + meta + payload)

    def send_output(self, job_id, attempt, task_index, offset, payload):
        meta = json.dumps({"job_id": job_id, "attempt": attempt, "task_index": task_index,
                           "offset": offset}).encode()
        self.send_record(b"L", meta, payload)

    def send_message(self, message):
        self.send_record(b"M", b"", json.dumps(message).encode())

    def closed_by_head(self, timeout=10):
        """Whether the head closes the stream within `timeout` s (it sends nothing else)."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
