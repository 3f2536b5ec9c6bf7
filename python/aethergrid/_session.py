"""Finds the head's address and the cluster token the way the `ag` CLI does.

Order: an explicit argument, then the environment (AG_ADDRESS / AG_TOKEN), then this
machine's session: $AG_SESSION_DIR (default /tmp/aethergrid-<uid>)/session.json, written
by `ag start-head`, holds {"address", "dashboard", "data_dir", "token_file"}.
"""
import json
import os


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


def read_token_file(path):
    """The token stored in `path`, stripped, or None when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            token = f.read().strip()
    except OSError:
        return None
    return token or None


def resolve_address(address):
    """`address`, else AG_ADDRESS, else the session's head address, else None."""
    if address:
        return address
    env = os.environ.get("AG_ADDRESS")
    if env:
        return env
    return read_session().get("address") or None


def resolve_token(token):
    """`token`, else AG_TOKEN, else the token file the session names, else None."""
    if token:
        return token
    env = os.environ.get("AG_TOKEN")
    if env:
        return env
    token_file = read_session().get("token_file")
    if token_file:
        return read_token_file(token_file)
    return None
