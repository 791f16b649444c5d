"""Which files are trusted, as OpenSSH decides for its keys: the owner must be this
user (or root, for a file root provisioned), nobody else may write it, and a private
key of this user's is for this user alone. Stats are made up here so that every
case runs as root and as anyone else; the real files are in
tests/holonograph/cli/test_file_permissions.py."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ingest.filecheck import UnsafeFile, check_owned_dir, read_trusted, refusal

ME, ROOT, OTHER = 1000, 0, 1001


def fake(mode: int, uid: int, kind: int = stat.S_IFREG) -> os.stat_result:
    return os.stat_result((kind | mode, 1, 1, 1, uid, uid, 10, 0, 0, 0))


@pytest.mark.parametrize(
    ("euid", "mode", "uid", "secret", "refused"),
    [
        (ME, 0o600, ME, False, None),
        (ME, 0o644, ME, False, None),  # a tokens file of digests may be read
        (ME, 0o664, ME, False, "writable by group or others"),
        (ME, 0o646, ME, False, "writable by group or others"),
        (ME, 0o600, OTHER, False, "owned by uid 1001, not by this user or root"),
        (ME, 0o644, ROOT, False, None),  # root provisioned it (/etc)
        (ME, 0o600, ME, True, None),
        (ME, 0o400, ME, True, None),
        (ME, 0o640, ME, True, "readable by group or others"),  # OpenSSH: UNPROTECTED KEY
        (ME, 0o604, ME, True, "readable by group or others"),
        (ME, 0o640, ROOT, True, None),  # root:ssl-cert 0640, as Debian ships keys
        (ME, 0o660, ROOT, True, "writable by group or others"),
        (ME, 0o600, OTHER, True, "owned by uid 1001"),
        (ROOT, 0o600, ROOT, True, None),
        (ROOT, 0o644, ROOT, True, "readable by group or others"),
        (ROOT, 0o600, ME, False, "owned by uid 1000, not by this user (uid 0)"),
    ],
)
def test_refusal_follows_openssh(
    monkeypatch: pytest.MonkeyPatch,
    euid: int,
    mode: int,
    uid: int,
    secret: bool,
    refused: str | None,
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: euid)
    reason = refusal(fake(mode, uid), secret=secret)
    assert (reason is None) == (refused is None), reason
    assert refused is None or (reason is not None and refused in reason)


@pytest.mark.parametrize(
    ("euid", "mode", "uid", "refused"),
    [
        (ME, 0o600, ME, None),
        (ME, 0o640, ME, "readable by group or others"),
        (ME, 0o600, ROOT, "owned by uid 0, not by this user (uid 1000)"),  # no root exception
    ],
)
def test_private_files_are_this_users_alone(
    monkeypatch: pytest.MonkeyPatch, euid: int, mode: int, uid: int, refused: str | None
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: euid)
    reason = refusal(fake(mode, uid), private=True)
    assert reason == refused or (refused is not None and reason is not None and refused in reason)


def test_a_file_is_checked_on_the_descriptor_it_is_read_from(tmp_path: Path) -> None:
    path = tmp_path / "tokens.yaml"
    path.write_text("tokens: []\n")
    path.chmod(0o600)
    assert read_trusted(path, "tokens file") == b"tokens: []\n"
    path.chmod(0o666)
    with pytest.raises(UnsafeFile) as refused:
        read_trusted(path, "tokens file")
    assert refused.value.filename == str(path)
    assert refused.value.strerror == (
        f"refusing the tokens file: writable by group or others (mode 0666); chmod go-w {path}"
    )


def test_a_shared_or_foreign_directory_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    with pytest.raises(UnsafeFile, match="writable by group or others \\(mode 1777\\)"):
        check_owned_dir(shared, "data directory")
    shared.chmod(0o755)
    check_owned_dir(shared, "data directory")  # readable by others: tightened by its user
    if os.geteuid() == 0:  # only root can give a directory away
        os.chown(shared, OTHER, -1)
        with pytest.raises(UnsafeFile, match="owned by uid 1001, not by this user"):
            check_owned_dir(shared, "data directory")
