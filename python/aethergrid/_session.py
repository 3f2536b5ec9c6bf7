"""Finds the head's address and the user's token the way the `ag` CLI does.

Address: an explicit argument, then AG_ADDRESS, then this machine's session, then the
user config's default head; any of them may name several heads of one cluster, separated
by commas ("h1:6379,h2:6379"), as `ag config --address` writes them. Token: the `token` argument, then the `token_file` argument,
then AG_TOKEN, then AG_TOKEN_FILE, then this machine's session. The session,
$AG_SESSION_DIR (default /tmp/aethergrid-<uid>)/session.json, is written by
`ag start-head` and holds {"address", "dashboard", "data_dir", "token_file", "ca_file"}.
The user config, $AG_CONFIG (default ~/.aethergrid/config.json), is written by
`ag config --address HOST:PORT --ca-fingerprint sha256:...` and holds {"address":
"HOST:PORT", "ca_files": {"HOST:PORT": "/path/ca.pem"}}.

A token file the user names (token_file= or AG_TOKEN_FILE) is read only when it is a
regular file of this user that no one else can read, as ssh does with keys: a token in a
file others can read is a token others hold.
"""
import json
import os
import stat

from .exceptions import AGValidationError


def session_dir():
    """The session folder of this user on this machine."""
    return os.environ.get("AG_SESSION_DIR") or "/tmp/aethergrid-{}".format(os.getuid())


def read_session():
    """The session's JSON as a dict, or {} when there is none (or it is unreadable)."""
    path = os.path.join(session_dir(), "session.json")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def user_config_path():
    """The user config file: $AG_CONFIG, else ~/.aethergrid/config.json."""
    path = os.environ.get("AG_CONFIG")
    if path:
        return path
    return os.path.join(os.environ.get("HOME") or "/", ".aethergrid", "config.json")


def read_user_config():
    """The user config as {"address": str, "ca_files": {"HOST:PORT": path}}; entries of
    the wrong type are left out, and a missing or unreadable file reads as empty, as the
    CLI reads it."""
    config = {"address": "", "ca_files": {}}
    try:
        with open(user_config_path(), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return config
    if not isinstance(data, dict):
        return config
    if isinstance(data.get("address"), str):
        config["address"] = data["address"]
    ca_files = data.get("ca_files")
    if isinstance(ca_files, dict):
        config["ca_files"] = {head: path for head, path in ca_files.items()
                              if isinstance(path, str) and path}
    return config


def read_token_file(path):
    """The token stored in `path`, stripped, or None when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            token = f.read().strip()
    except OSError:
        return None
    return token or None


def read_private_token_file(path):
    """The token in the file at `path`, which must be a regular file of this user that
    no other user can read (mode & 077 == 0).

    Raises AGValidationError saying what is wrong and how to fix it: the file cannot be
    read, is not a regular file, belongs to another uid, can be read by others
    ("run `chmod 600 PATH`"), or is empty. The wording is the `ag` CLI's.
    """
    # O_NONBLOCK: a FIFO planted at the path must not block the open; it is refused below
    # as not a regular file. The checks and the read use the same descriptor, so the file
    # cannot be swapped between them.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as e:
        raise AGValidationError("cannot read token file {}: {}".format(
            path, e.strerror or e)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise AGValidationError("token file {} is not a regular file".format(path))
        if st.st_uid != os.geteuid():
            raise AGValidationError("token file {} belongs to uid {}, not to this user; use a "
                                    "file of your own".format(path, st.st_uid))
        if st.st_mode & 0o077:
            raise AGValidationError(
                "token file {} can be read by other users (mode {:04o}); run `chmod 600 {}`".format(
                    path, stat.S_IMODE(st.st_mode), path))
        chunks = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError as e:
        raise AGValidationError("cannot read token file {}: {}".format(
            path, e.strerror or e)) from None
    finally:
        os.close(fd)
    token = b"".join(chunks).decode("utf-8", "replace").rstrip("\r\n ")
    if not token:
        raise AGValidationError("token file {} is empty".format(path))
    return token


def _from_file(source, path):
    """read_private_token_file, its message prefixed with where the path came from."""
    try:
        return read_private_token_file(path)
    except AGValidationError as e:
        raise AGValidationError("{}: {}".format(source, e.message)) from None


def resolve_address(address):
    """`address`, else AG_ADDRESS, else the session's head address, else the user
    config's default head, else None. The text is returned as is: one address, or
    several separated by commas (parsed by _http.parse_addresses)."""
    if address:
        return address
    env = os.environ.get("AG_ADDRESS")
    if env:
        return env
    session_address = read_session().get("address")
    if isinstance(session_address, str) and session_address:
        return session_address
    return read_user_config()["address"] or None


def resolve_token(token=None, token_file=None):
    """The user's token: `token`, else the private file `token_file` ("~" expanded),
    else AG_TOKEN, else the private file AG_TOKEN_FILE names, else the token file this
    machine's session names, else None.

    Raises AGValidationError when both `token` and `token_file` are given, or when a
    token file the caller named is refused (see read_private_token_file); the message
    says which source it was.
    """
    if token is not None and not isinstance(token, str):
        raise AGValidationError("token must be a string, got {}".format(type(token).__name__))
    if token_file is not None:
        try:
            token_file = os.fspath(token_file)
        except TypeError:
            raise AGValidationError("token_file must be a path, got {}".format(
                type(token_file).__name__)) from None
        if isinstance(token_file, bytes):
            token_file = os.fsdecode(token_file)
    if token and token_file:
        raise AGValidationError("give token= or token_file=, not both")
    if token:
        return token
    if token_file:
        return _from_file("token_file", os.path.expanduser(token_file))
    env = os.environ.get("AG_TOKEN")
    if env:
        return env
    env_file = os.environ.get("AG_TOKEN_FILE")
    if env_file:
        return _from_file("AG_TOKEN_FILE", env_file)
    # The session's token file is the one the head made itself under this user's private
    # session folder; it is read as is, as the CLI does.
    session_token_file = read_session().get("token_file")
    if session_token_file:
        return read_token_file(session_token_file)
    return None
