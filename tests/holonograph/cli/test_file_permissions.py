"""Files another user could have written are refused, as real processes: `serve`
with such a tokens file, TLS key or data directory exits 2 with one line saying
which file and why (before any socket opens); `query` refuses an admin endpoint file
that is not the caller's alone (before: another user could plant one in a directory
made in advance and receive the CLI's SQL) and sends it nothing.

CI runs as root, and root may read anything: files are given to another uid with
`os.chown` (which root may do) so the ownership rules are exercised; as another
user those cases are skipped."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest.service.admin_file import ADMIN_FILE
from tests.holonograph.cli.test_serve import holonograph
from tests.holonograph.cli.test_serve_edge import run_to_exit
from tests.ingest.certs import CertificateAuthority
from tests.security_cases import Listener

pytestmark = [pytest.mark.e2e]

OTHER_UID = 54321
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file away")


def _one_line_refusal(stderr: str, *parts: str) -> None:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: "), stderr
    for part in parts:
        assert part in lines[0], stderr
    assert "Traceback" not in stderr


def _tokens(tmp_path: Path, mode: int) -> Path:
    path = tmp_path / "tokens.yaml"
    path.write_text(
        "tokens:\n  - tenant: acme\n    token_sha256: " + "ab" * 32 + "\n    agents: '*'\n"
    )
    path.chmod(mode)
    return path


@pytest.mark.parametrize("mode", [0o666, 0o620])
def test_serve_refuses_a_tokens_file_others_may_write(tmp_path: Path, mode: int) -> None:
    tokens = _tokens(tmp_path, mode)
    done = run_to_exit("--auth-tokens-file", str(tokens), data_dir=tmp_path / "data")
    assert done.returncode == 2, done.stderr
    _one_line_refusal(
        done.stderr,
        "refusing the tokens file: writable by group or others",
        f"chmod go-w {tokens}",
    )
    assert not (tmp_path / "data" / ADMIN_FILE).exists()


@needs_root
def test_serve_refuses_a_tokens_file_another_user_owns(tmp_path: Path) -> None:
    tokens = _tokens(tmp_path, 0o600)
    os.chown(tokens, OTHER_UID, -1)
    done = run_to_exit("--auth-tokens-file", str(tokens), data_dir=tmp_path / "data")
    assert done.returncode == 2, done.stderr
    _one_line_refusal(done.stderr, f"owned by uid {OTHER_UID}, not by this user")


def _pki(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "server.pem", tmp_path / "server.key"
    CertificateAuthority().issue("receiver").write(cert, key)
    return cert, key


@pytest.mark.parametrize(
    ("target", "mode", "problem"),
    [
        ("key", 0o644, "refusing the TLS private key: readable by group or others"),
        ("key", 0o660, "refusing the TLS private key: writable by group or others"),
        ("cert", 0o666, "refusing the TLS certificate file: writable by group or others"),
    ],
)
def test_serve_refuses_tls_files_others_may_read_or_write(
    tmp_path: Path, target: str, mode: int, problem: str
) -> None:
    cert, key = _pki(tmp_path)
    (key if target == "key" else cert).chmod(mode)
    done = run_to_exit(
        "--tls-cert-file", str(cert), "--tls-key-file", str(key), data_dir=tmp_path / "data"
    )
    assert done.returncode == 2, done.stderr
    _one_line_refusal(done.stderr, "invalid configuration", problem)


@needs_root
def test_serve_refuses_a_key_another_user_owns(tmp_path: Path) -> None:
    cert, key = _pki(tmp_path)
    os.chown(key, OTHER_UID, -1)
    done = run_to_exit(
        "--tls-cert-file", str(cert), "--tls-key-file", str(key), data_dir=tmp_path / "data"
    )
    assert done.returncode == 2, done.stderr
    _one_line_refusal(done.stderr, "refusing the TLS private key", f"owned by uid {OTHER_UID}")


@pytest.mark.parametrize("owner", ["others-may-write", "another-user"])
def test_serve_and_query_refuse_a_data_directory_another_user_could_fill(
    tmp_path: Path, owner: str
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    if owner == "another-user":
        if os.geteuid() != 0:
            pytest.skip("only root can give a directory away")
        os.chown(data_dir, OTHER_UID, -1)
        expected = f"owned by uid {OTHER_UID}, not by this user"
    else:
        data_dir.chmod(0o777)
        expected = "writable by group or others (mode 0777)"
    served = run_to_exit(data_dir=data_dir)
    queried = holonograph("query", "--data-dir", str(data_dir), "--write", "SELECT 1")
    for done in (served, queried):
        assert done.returncode == 2, done.stderr
        _one_line_refusal(done.stderr, "refusing the data directory", expected)
    assert list(data_dir.iterdir()) == []  # nothing was created in it


@pytest.fixture
def listener() -> Iterator[Listener]:
    planted = Listener()
    yield planted
    planted.close()


def _plant(data_dir: Path, listener: Listener, mode: int = 0o600) -> Path:
    path = data_dir / ADMIN_FILE
    path.write_text(
        json.dumps(
            {
                "url": f"http://127.0.0.1:{listener.port}",
                "pid": os.getpid(),  # alive, as the planter's own process would be
                "read_token": "planted-read",
                "write_token": "planted-write",
            }
        )
    )
    path.chmod(mode)
    return path


@pytest.mark.parametrize(
    "plant",
    ["directory-of-another-user", "file-of-another-user", "file-others-may-read", "symlink"],
)
def test_query_refuses_an_admin_file_that_is_not_the_callers_alone(
    tmp_path: Path, listener: Listener, plant: str
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o700)
    expected = {
        "directory-of-another-user": "refusing the data directory of the admin file: owned by",
        "file-of-another-user": "refusing the admin endpoint file: owned by",
        "file-others-may-read": "refusing the admin endpoint file: readable by group or others",
        "symlink": "refusing the admin endpoint file: a symbolic link",
    }[plant]
    if plant == "symlink":
        elsewhere = _plant(tmp_path, listener)
        (data_dir / ADMIN_FILE).symlink_to(elsewhere)
    else:
        path = _plant(data_dir, listener, 0o644 if plant == "file-others-may-read" else 0o600)
        if plant != "file-others-may-read":
            if os.geteuid() != 0:
                pytest.skip("only root can give a file away")
            os.chown(path if plant == "file-of-another-user" else data_dir, OTHER_UID, -1)
    done = holonograph("query", "--data-dir", str(data_dir), "SELECT 'my secret question'")
    assert done.returncode == 2, done.stderr
    _one_line_refusal(done.stderr, expected)
    assert listener.connections == 0


def test_query_uses_only_a_loopback_admin_endpoint(tmp_path: Path, listener: Listener) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o700)
    path = _plant(data_dir, listener)
    info = json.loads(path.read_text())
    path.write_text(json.dumps({**info, "url": "http://192.0.2.1:8123"}))
    done = holonograph("query", "--data-dir", str(data_dir), "SELECT 1")
    assert done.returncode == 2, done.stderr
    _one_line_refusal(done.stderr, "its endpoint is not loopback")
