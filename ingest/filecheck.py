"""Files that decide who may do what are refused unless only their owner could have
written them, as OpenSSH refuses its key and authorized_keys files.

- Any such file (the tokens file, TLS certificates and keys): owned by this user or by
  root (a file root provisioned, e.g. in /etc, and the service reads), and writable by
  neither group nor others.
- A secret (the TLS private key): as OpenSSH's private keys, no group or other access
  at all when owned by this user (one root provisioned is root's to share).
- A directory that is the service's own (the data directory) and what it publishes
  (`.holonograph-admin.json`): owned by this user, and for the published file and its
  directory, neither group nor others may even read.

Refusals are `UnsafeFile`, a `PermissionError` whose `filename` and `strerror` say which
file and why (the CLI prints them as one line, exit 2).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = [
    "UnsafeFile",
    "check_owned_dir",
    "check_private",
    "check_trusted",
    "read_trusted",
    "refusal",
]


class UnsafeFile(PermissionError):
    """A file or directory whose owner or mode would let another user change it."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(0, reason, str(path))  # errno 0: our decision, not the kernel's


def _owner(info: os.stat_result, *, root_ok: bool) -> str | None:
    me = os.geteuid()
    if info.st_uid == me or (root_ok and info.st_uid == 0):
        return None
    allowed = "this user" if me == 0 or not root_ok else "this user or root"
    return f"owned by uid {info.st_uid}, not by {allowed} (uid {me})"


def refusal(info: os.stat_result, *, secret: bool = False, private: bool = False) -> str | None:
    """Why a file with this stat may not be trusted, or None.

    `secret`: OpenSSH's rule for private keys; `private`: owner-only, no root exception
    (what this user's own processes write)."""
    mode = stat.S_IMODE(info.st_mode)
    owner = _owner(info, root_ok=not private)
    if owner:
        return owner
    if mode & 0o022:
        return f"writable by group or others (mode {mode:04o})"
    mine = info.st_uid == os.geteuid()
    if (private or (secret and mine)) and mode & 0o077:
        return f"readable by group or others (mode {mode:04o})"
    return None


def check_trusted(
    path: Path, what: str, *, secret: bool = False, info: os.stat_result | None = None
) -> None:
    """Raise `UnsafeFile` unless `path` (followed if a link; or its stat `info`) passes
    `refusal`."""
    reason = refusal(info or os.stat(path), secret=secret)
    if reason:
        fix = f"chmod {'600' if secret else 'go-w'} {path}"
        if reason.startswith("owned by"):
            fix = f"chown it to this user (or root), then {fix}"
        raise UnsafeFile(path, f"refusing the {what}: {reason}; {fix}")


def read_trusted(path: Path, what: str, *, secret: bool = False) -> bytes:
    """The bytes of `path`, checked on the very file read (no swap between the check
    and the read)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        check_trusted(path, what, secret=secret, info=os.fstat(fd))
        return handle.read()


def check_private(info: os.stat_result, path: Path, what: str) -> None:
    """Raise `UnsafeFile` unless `info` (of `path`) is this user's alone."""
    reason = refusal(info, private=True)
    if reason:
        raise UnsafeFile(path, f"refusing {what}: {reason}")


def check_owned_dir(path: Path, what: str) -> None:
    """Raise `UnsafeFile` unless the existing directory `path` is this user's and
    writable by no one else (another user could have planted files in it)."""
    info = os.stat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeFile(path, f"refusing the {what}: not a directory")
    reason = _owner(info, root_ok=False)
    mode = stat.S_IMODE(info.st_mode)
    if reason is None and mode & 0o022:
        reason = f"writable by group or others (mode {mode:04o})"
    if reason:
        hint = "chown it to this user" if reason.startswith("owned by") else f"chmod 700 {path}"
        raise UnsafeFile(
            path,
            f"refusing the {what}: {reason}; check what is in it, then {hint}"
            " (or use a new directory)",
        )
