"""A minimal tar writer whose output depends only on what it is given.

Python's tarfile writes slightly different headers across versions (3.8 fills devmajor
and devminor with "0000000", later versions leave them empty), which would give the
same folder different package hashes on different Pythons. This writer emits POSIX
ustar headers with fixed fields, plus a PAX extended header ("x") only when a value
does not fit ustar (path or link target over 100 bytes or not ASCII, size >= 8 GiB).
Non-ASCII names are marked "hdrcharset=BINARY": the bytes are the file system's as is,
and a reader (libarchive in a worker running under the C locale, for one) stores them
without trying to convert UTF-8 to its locale.
Entries are written in the order given; the caller sorts them.
"""
import os

BLOCK = 512
RECORD = 20 * BLOCK  # tar archives end on a 10 KiB record, as GNU tar and tarfile do
_COPY_BYTES = 1 << 20

REGULAR, DIRECTORY, SYMLINK = b"0", b"5", b"2"


def _octal(value, width):
    """`value` as zero-padded octal in a NUL-terminated field of `width` bytes."""
    return ("%0*o" % (width - 1, value)).encode("ascii") + b"\0"


def _field(data, width):
    return data[:width] + b"\0" * (width - len(data[:width]))


def _pax_record(key, value):
    """One "LEN key=value\\n" record; LEN counts the whole record, itself included."""
    body = b" " + key + b"=" + value + b"\n"
    length = len(body) + 1
    while len(str(length).encode()) + len(body) != length:
        length += 1
    return str(length).encode() + body


def _header(name, typeflag, mode, size, linkname=b""):
    header = b"".join([
        _field(name, 100),
        _octal(mode, 8),
        _octal(0, 8),           # uid
        _octal(0, 8),           # gid
        _octal(size, 12),
        _octal(0, 12),          # mtime
        b" " * 8,               # checksum, computed below
        typeflag,
        _field(linkname, 100),
        b"ustar\x0000",
        _field(b"", 32),        # uname
        _field(b"", 32),        # gname
        _field(b"", 8),         # devmajor
        _field(b"", 8),         # devminor
        _field(b"", 155),       # prefix
        _field(b"", 12),
    ])
    checksum = ("%06o" % sum(header)).encode("ascii") + b"\0 "
    return header[:148] + checksum + header[156:]


def _is_ascii(data):
    try:
        data.decode("ascii")
    except UnicodeDecodeError:
        return False
    return True


def _fits_ustar(data):
    return len(data) <= 100 and _is_ascii(data)


def _ustar_fallback(data):
    """What the ustar field holds: the value itself, or, when a PAX record carries it,
    its last 100 bytes made ASCII (readers without PAX support see that)."""
    if _fits_ustar(data):
        return data
    return data.decode("ascii", "replace").encode("ascii", "replace")[-100:]


class TarWriter:
    """Writes tar entries to `out` (anything with write(bytes)). Not thread-safe."""

    def __init__(self, out):
        self.out = out
        self.written = 0

    def _write(self, data):
        self.out.write(data)
        self.written += len(data)

    def _pad(self, size):
        if size % BLOCK:
            self._write(b"\0" * (BLOCK - size % BLOCK))

    def _entry_header(self, name, typeflag, mode, size, linkname=""):
        name_bytes = os.fsencode(name)
        link_bytes = os.fsencode(linkname)
        records = []
        binary = False
        for key, value in ((b"path", name_bytes), (b"linkpath", link_bytes)):
            if value and not _fits_ustar(value):
                binary = binary or not _is_ascii(value)
                records.append(_pax_record(key, value))
        if size >= 8 ** 11:
            records.append(_pax_record(b"size", str(size).encode()))
        if records:
            if binary:
                records.insert(0, _pax_record(b"hdrcharset", b"BINARY"))
            pax = b"".join(records)
            self._write(_header(b"././@PaxHeader", b"x", 0o644, len(pax)))
            self._write(pax)
            self._pad(len(pax))
        self._write(_header(_ustar_fallback(name_bytes), typeflag, mode,
                            size if size < 8 ** 11 else 0, _ustar_fallback(link_bytes)))

    def add_directory(self, name):
        self._entry_header(name.rstrip("/") + "/", DIRECTORY, 0o755, 0)

    def add_symlink(self, name, target):
        self._entry_header(name, SYMLINK, 0o777, 0, target)

    def add_file(self, name, fileobj, size, executable):
        """Writes `size` bytes read from `fileobj`; raises EOFError when it has fewer."""
        self._entry_header(name, REGULAR, 0o755 if executable else 0o644, size)
        left = size
        while left:
            chunk = fileobj.read(min(_COPY_BYTES, left))
            if not chunk:
                raise EOFError("file ended {} bytes early".format(left))
            self._write(chunk)
            left -= len(chunk)
        self._pad(size)

    def close(self):
        """Writes the end-of-archive blocks and pads to a full record."""
        self._write(b"\0" * (2 * BLOCK))
        if self.written % RECORD:
            self._write(b"\0" * (RECORD - self.written % RECORD))
