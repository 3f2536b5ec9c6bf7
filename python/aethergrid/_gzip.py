"""A deterministic, parallel gzip writer tuned for working_dir packages.

The tar stream is cut into fixed-size chunks; each chunk is deflated on its own (raw
deflate, ending on a full flush, so the pieces concatenate into one valid deflate
stream, as pigz does) and the stream ends with an empty final block. Chunks whose
sample does not compress (media, checkpoints, random data) are stored instead: zlib at
level 1 spends ~20 ms per MiB on such data for nothing, storing costs ~2 ms.

The output depends only on the bytes written (fixed chunk size, a decision made from
the chunk itself, gzip header with no name and mtime 0), never on timing or on the
number of threads, so the same tar always gives the same .gz and the same hash.
"""
import collections
import os
import struct
import zlib
from concurrent.futures import ThreadPoolExecutor

CHUNK_BYTES = 1 << 20
SAMPLE_BYTES = 64 << 10
# A chunk whose sample shrinks to more than this fraction of its size is stored.
STORE_ABOVE_RATIO = 0.9
# gzip header: magic, CM=deflate, FLG=0 (no name), MTIME=0, XFL=0, OS=255 (unknown).
_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
# An empty final deflate block (fixed Huffman, end-of-block only).
_FINAL_BLOCK = b"\x03\x00"


def deflate_chunk(chunk, level):
    """Raw deflate of `chunk` ending on a full flush (byte-aligned, not final)."""
    if level > 0 and len(chunk) >= 4096:
        sample = chunk[:SAMPLE_BYTES]
        probe = zlib.compressobj(level, zlib.DEFLATED, -15)
        if len(probe.compress(sample) + probe.flush()) > STORE_ABOVE_RATIO * len(sample):
            level = 0
    compressor = zlib.compressobj(level, zlib.DEFLATED, -15)
    return compressor.compress(chunk) + compressor.flush(zlib.Z_FULL_FLUSH)


class GzipWriter:
    """File-like writer: write(bytes) ... close(). Writes the .gz to `out` (anything with
    write(bytes)). Compresses on up to `threads` threads (zlib releases the GIL)."""

    def __init__(self, out, level=1, threads=None):
        self.out = out
        self.level = level
        self.crc = 0
        self.size = 0
        self.buffer = bytearray()
        threads = threads or min(4, os.cpu_count() or 1)
        self.pool = ThreadPoolExecutor(threads) if threads > 1 else None
        self.max_pending = 2 * threads
        self.pending = collections.deque()
        self.out.write(_HEADER)

    def write(self, data):
        self.crc = zlib.crc32(data, self.crc)
        self.size += len(data)
        self.buffer += data
        if len(self.buffer) >= CHUNK_BYTES:
            view = memoryview(self.buffer)
            full = len(self.buffer) - len(self.buffer) % CHUNK_BYTES
            for start in range(0, full, CHUNK_BYTES):
                self._submit(bytes(view[start:start + CHUNK_BYTES]))
            view.release()
            del self.buffer[:full]
        return len(data)

    def _submit(self, chunk):
        if self.pool is None:
            self.out.write(deflate_chunk(chunk, self.level))
            return
        self.pending.append(self.pool.submit(deflate_chunk, chunk, self.level))
        while len(self.pending) > self.max_pending:
            self.out.write(self.pending.popleft().result())

    def close(self):
        """Compresses what is left and writes the gzip trailer."""
        if self.buffer:
            self._submit(bytes(self.buffer))
            self.buffer = bytearray()
        while self.pending:
            self.out.write(self.pending.popleft().result())
        if self.pool is not None:
            self.pool.shutdown()
        self.out.write(_FINAL_BLOCK)
        self.out.write(struct.pack("<II", self.crc & 0xFFFFFFFF, self.size & 0xFFFFFFFF))

    def abort(self):
        """Drops pending work after an error (close() must not be called then)."""
        for future in self.pending:
            future.cancel()
        self.pending.clear()
        if self.pool is not None:
            self.pool.shutdown()
