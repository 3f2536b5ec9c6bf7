"""Packs a working_dir into a deterministic tar and names it by its sha256.

The same folder content always gives the same bytes, so the head's content-addressed
store sees an unchanged folder as already uploaded; `ag submit --working-dir` writes the
very same bytes (src/cli/package_builder.cc), so the two share uploads:
- entries sorted by path (bytes), folders included, no entry for the root itself;
- mtime 0, uid/gid 0, empty user/group names;
- modes normalised: 0o755 for folders and executable files, 0o644 for other files;
- symlinks stored as symlinks (the head and workers refuse ones pointing outside);
- not compressed: on a cluster's network, compressing and unpacking a large folder
  costs more time than the bytes it saves.

Skipped: `.git` and `__pycache__` anywhere, what the folder's .gitignore files ignore
(each applies to its own subtree) and the gitignore-style `excludes` patterns (relative
to the root). An entry is left out when either the .gitignore files or the excludes
ignore it; a `!` in a .gitignore cannot re-include what `excludes` leaves out. Fifos,
sockets and devices are skipped.
"""
import hashlib
import heapq
import os
import stat
import tarfile
import tempfile

from . import _gitignore, _tar
from .exceptions import AGValidationError

ALWAYS_SKIPPED = frozenset([".git", "__pycache__"])
# Packages up to this size stay in memory while they are packed and uploaded (the
# head's default limit is 500 MiB); larger ones go through a temporary file. Writing
# the package to disk only to read it back for the upload costs the most when the
# disk is busy with the cluster's own writes.
_SPOOL_BYTES = 512 << 20
BIGGEST_FILES_KEPT = 5


class Package:
    """A packed working_dir: `sha256` (hex), `size` (bytes), `file_count`, `source`
    (the folder), `biggest_files` [(size, relpath), ...] largest first. Holds the bytes
    in a temporary file until close(); use it as a context manager."""

    def __init__(self, source, fileobj, sha256, size, file_count, biggest_files):
        self.source = source
        self.fileobj = fileobj
        self.sha256 = sha256
        self.size = size
        self.file_count = file_count
        self.biggest_files = biggest_files

    @property
    def uri(self):
        return "sha256:" + self.sha256

    def read_bytes(self):
        self.fileobj.seek(0)
        return self.fileobj.read()

    def names(self):
        """The entry names in the archive, in archive order (folders without "/")."""
        self.fileobj.seek(0)
        with tarfile.open(fileobj=self.fileobj, mode="r:") as tar:
            return [m.name for m in tar.getmembers()]

    def close(self):
        self.fileobj.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "Package({!r}, sha256={}, {} bytes, {} files)".format(
            self.source, self.sha256[:12], self.size, self.file_count)


class _HashingWriter:
    """A write-only file that hashes and counts what passes through to `target`."""

    def __init__(self, target):
        self.target = target
        self.hash = hashlib.sha256()
        self.size = 0

    def write(self, data):
        self.hash.update(data)
        self.size += len(data)
        self.target.write(data)
        return len(data)

    def flush(self):
        self.target.flush()


def check_working_dir(folder):
    """The absolute path of `folder`; AGValidationError when it is missing or not a
    folder."""
    if not isinstance(folder, (str, os.PathLike)):
        raise AGValidationError("runtime_env['working_dir'] must be a path to a local folder, got {}"
                                .format(type(folder).__name__), field="runtime_env.working_dir")
    path = os.path.abspath(os.fspath(folder))
    if not os.path.exists(path):
        raise AGValidationError("runtime_env['working_dir']: folder {!r} does not exist".format(path),
                                field="runtime_env.working_dir")
    if not os.path.isdir(path):
        raise AGValidationError("runtime_env['working_dir']: {!r} is not a folder".format(path),
                                field="runtime_env.working_dir")
    return path


def check_excludes(excludes):
    """`excludes` as a list of strings; AGValidationError otherwise."""
    if excludes is None:
        return []
    if isinstance(excludes, str) or not all(isinstance(e, str) for e in excludes):
        raise AGValidationError("runtime_env['excludes'] must be a list of gitignore-style "
                                "patterns (strings), got {!r}".format(excludes),
                                field="runtime_env.excludes")
    return list(excludes)


def collect_entries(root, excludes=None):
    """The entries to pack under folder `root`, sorted by path: a list of
    (relpath, kind, abspath) with kind "dir", "file" or "symlink"."""
    root = check_working_dir(root)
    exclude_list = [_gitignore.PatternList(check_excludes(excludes))]
    entries = []

    def walk(dir_abs, dir_rel, rules):
        gitignore = os.path.join(dir_abs, ".gitignore")
        if os.path.isfile(gitignore):
            try:
                rules = rules + [_gitignore.PatternList.from_file(gitignore, dir_rel)]
            except OSError as e:
                raise AGValidationError("cannot read {}: {}".format(gitignore, e.strerror)) from None
        try:
            with os.scandir(dir_abs) as it:
                children = list(it)
        except OSError as e:
            raise AGValidationError("cannot list folder {}: {}".format(dir_abs, e.strerror)) from None
        for child in children:
            if child.name in ALWAYS_SKIPPED:
                continue
            rel = dir_rel + "/" + child.name if dir_rel else child.name
            is_link = child.is_symlink()
            is_dir = not is_link and child.is_dir(follow_symlinks=False)
            if _gitignore.is_ignored(rules, rel, is_dir) or _gitignore.is_ignored(exclude_list, rel, is_dir):
                continue
            if is_link:
                entries.append((rel, "symlink", child.path))
            elif is_dir:
                entries.append((rel, "dir", child.path))
                walk(child.path, rel, rules)
            elif child.is_file(follow_symlinks=False):
                entries.append((rel, "file", child.path))

    walk(root, "", [])
    entries.sort(key=lambda e: os.fsencode(e[0]))
    return entries


def pack_working_dir(folder, excludes=None):
    """Packs `folder` (minus what is skipped) into a Package.

    Raises AGValidationError when the folder is missing, not a folder, unreadable, or a
    file shrinks while it is packed.
    """
    root = check_working_dir(folder)
    entries = collect_entries(root, excludes)
    spool = tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES, prefix="ag-package-")
    writer = _HashingWriter(spool)
    biggest = []
    file_count = 0
    try:
        tar = _tar.TarWriter(writer)
        for rel, kind, path in entries:
            if kind == "dir":
                tar.add_directory(rel)
            elif kind == "symlink":
                tar.add_symlink(rel, os.readlink(path))
            else:
                size = _add_file(tar, rel, path)
                file_count += 1
                if len(biggest) < BIGGEST_FILES_KEPT:
                    heapq.heappush(biggest, (size, rel))
                else:
                    heapq.heappushpop(biggest, (size, rel))
        tar.close()
    except BaseException:
        spool.close()
        raise
    spool.seek(0)
    return Package(root, spool, writer.hash.hexdigest(), writer.size, file_count,
                   sorted(biggest, reverse=True))


def _add_file(tar, rel, path):
    """Adds one regular file; returns its size."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise AGValidationError("{} stopped being a regular file while packing".format(path))
            tar.add_file(rel, f, st.st_size, executable=bool(st.st_mode & 0o111))
            return st.st_size
    except EOFError:
        raise AGValidationError("{} shrank while it was packed; pack again once it stops "
                                "changing".format(path)) from None
    except OSError as e:
        raise AGValidationError("cannot pack {}: {}".format(path, e.strerror or e)) from None


def human_bytes(n):
    """`n` bytes as a short human string: 512 B, 3.4 KiB, 12.0 MiB."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return "{} {}".format(int(value), unit) if unit == "B" else "{:.1f} {}".format(value, unit)
        value /= 1024
    return "{} B".format(n)
