"""Turns a user's runtime_env into what the head accepts, shipping working_dir first.

- "working_dir": a local folder -> packed (see packaging.py), uploaded once to the
  head's package store (HEAD first; nothing is sent when the head has the hash), and
  replaced by "sha256:<hex>". A value already of that form is passed through.
- "excludes": used while packing, never sent.
- "python": "/path" is shorthand for {"executable": "/path"}.
- "mounts": a list of {"source", "target", "read_only"}; a "SOURCE:TARGET[:ro]" string
  is shorthand for one (as `ag submit --mount` takes it).
- "env_vars", "image" and any other key: passed through; the head validates them (it
  refuses unknown keys with the list it understands).
"""
import os
import sys
import time

from . import packaging
from ._http import error_message
from .exceptions import AGError, AGValidationError

# Uploads larger than this show a progress bar when stderr is a terminal.
PROGRESS_MIN_BYTES = 1 << 20
_PACKAGE_PREFIX = "sha256:"


def normalize(runtime_env):
    """A shallow copy of `runtime_env` with client-side shorthands expanded; its
    working_dir and excludes are left for prepare() to pack and upload."""
    if runtime_env is None:
        return None
    if not isinstance(runtime_env, dict):
        raise AGValidationError("runtime_env must be a dict, got {}".format(type(runtime_env).__name__),
                                field="runtime_env")
    env = dict(runtime_env)
    python = env.get("python")
    if isinstance(python, (str, os.PathLike)):
        env["python"] = {"executable": os.fspath(python)}
    mounts = env.get("mounts")
    if isinstance(mounts, (list, tuple)):
        env["mounts"] = [_mount(m, i) for i, m in enumerate(mounts)]
    return env


def _mount(mount, index):
    """One mount as the head takes it: a "SOURCE:TARGET[:ro|:rw]" string becomes
    {"source", "target", "read_only"}; anything else goes as it is."""
    if not isinstance(mount, str):
        return mount
    parts = mount.split(":")
    if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] not in ("ro", "rw")):
        raise AGValidationError(
            "runtime_env.mounts[{}]: {!r} is not SOURCE:TARGET or SOURCE:TARGET:ro".format(index, mount),
            field="runtime_env.mounts")
    return {"source": parts[0], "target": parts[1], "read_only": len(parts) == 3 and parts[2] == "ro"}


class PackageUploader:
    """Packs and uploads working_dirs for one Client call, packing each distinct
    (folder, excludes) once. Call prepare(runtime_env) for each job, then close()."""

    def __init__(self, transport, progress_stream=None):
        self.transport = transport
        self.progress_stream = progress_stream if progress_stream is not None else sys.stderr
        self._done = {}

    def prepare(self, runtime_env):
        """The runtime_env to send: normalised, working_dir uploaded and replaced by its
        "sha256:<hex>", excludes dropped. Raises AGValidationError (bad working_dir, or
        a package over the head's size limit) or the transport's errors."""
        env = normalize(runtime_env)
        if env is None:
            return None
        excludes = packaging.check_excludes(env.pop("excludes", None))
        working_dir = env.get("working_dir")
        if working_dir is None:
            return env
        if isinstance(working_dir, str) and working_dir.startswith(_PACKAGE_PREFIX):
            return env
        folder = packaging.check_working_dir(working_dir)
        key = (folder, tuple(excludes))
        if key not in self._done:
            with packaging.pack_working_dir(folder, excludes) as package:
                self._upload(package)
                self._done[key] = package.uri
        env["working_dir"] = self._done[key]
        return env

    def _upload(self, package):
        path = "/api/packages/" + package.sha256
        head = self.transport.request("HEAD", path, ok_statuses={404})
        if head.status == 200:
            return
        limit = self._head_limit()
        if limit is not None and package.size > limit:
            raise AGValidationError(_too_large_message(
                package, "the head accepts at most {} ({} bytes)".format(
                    packaging.human_bytes(limit), limit)), field="runtime_env.working_dir")
        bar = None
        if package.size > PROGRESS_MIN_BYTES and _is_tty(self.progress_stream):
            bar = _ProgressBar(self.progress_stream, package)
        try:
            response = self.transport.request(
                "PUT", path, body_file=package.fileobj, body_size=package.size,
                content_type="application/octet-stream", progress=bar.update if bar else None,
                retry=False, extra_timeout=60.0, ok_statuses={413})
        finally:
            if bar:
                bar.finish()
        if response.status == 413:
            raise AGValidationError(_too_large_message(package, error_message(response)),
                                    status=413, field="runtime_env.working_dir")

    def _head_limit(self):
        """The head's package size limit in bytes when it tells (GET /api/packages has
        "max_package_bytes"), so that an oversized folder is refused before it is sent;
        None otherwise (the PUT's 413 then says it)."""
        response = self.transport.request("GET", "/api/packages", ok_statuses={404, 405})
        if response.status != 200:
            return None
        try:
            limit = response.json().get("max_package_bytes")
        except (AttributeError, AGError):
            return None
        return limit if isinstance(limit, int) and limit > 0 else None


def _too_large_message(package, head_message):
    biggest = ", ".join("{} ({})".format(rel, packaging.human_bytes(size))
                        for size, rel in package.biggest_files)
    return ("runtime_env['working_dir'] {!r} packs to {} ({} bytes, {} files), over the head's "
            "package size limit ({}). Biggest files: {}. Leave out what the job does not need "
            "with a .gitignore or runtime_env['excludes'].".format(
                package.source, packaging.human_bytes(package.size), package.size,
                package.file_count, head_message, biggest or "none"))


def _is_tty(stream):
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class _ProgressBar:
    """A one-line upload progress bar, redrawn at most 10 times a second."""

    WIDTH = 30

    def __init__(self, stream, package):
        self.stream = stream
        self.total = package.size
        self.label = "Uploading {} ({})".format(os.path.basename(package.source) or package.source,
                                                package.sha256[:12])
        self.started = time.monotonic()
        self.last_draw = 0.0
        self.sent = 0

    def update(self, sent):
        self.sent = sent
        now = time.monotonic()
        if now - self.last_draw >= 0.1 or sent >= self.total:
            self.last_draw = now
            self._draw(now)

    def _draw(self, now):
        frac = min(1.0, self.sent / self.total) if self.total else 1.0
        filled = int(frac * self.WIDTH)
        rate = self.sent / max(now - self.started, 1e-6)
        self.stream.write("\r{} [{}{}] {:3d}% {}/{} {}/s".format(
            self.label, "#" * filled, "." * (self.WIDTH - filled), int(frac * 100),
            packaging.human_bytes(self.sent), packaging.human_bytes(self.total),
            packaging.human_bytes(rate)))
        self.stream.flush()

    def finish(self):
        self._draw(time.monotonic())
        self.stream.write("\n")
        self.stream.flush()
