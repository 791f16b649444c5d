"""`holonograph serve` with the edge settings, as a real process: bad TLS or tokens
files are configuration errors (exit 2, before any socket opens), and a receiver
listening beyond loopback without tokens says so at start-up."""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ingest.certs import CertificateAuthority

pytestmark = [pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[3]


def serve(*args: str, data_dir: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "holonograph", "serve", "--data-dir", str(data_dir),
         "--grpc-port", "0", "--http-port", "0", *args],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def run_to_exit(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    process = serve(*args, data_dir=data_dir)
    stdout, stderr = process.communicate(timeout=120)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def started_lines(process: subprocess.Popen[str], count: int) -> list[str]:
    assert process.stdout is not None
    return [process.stdout.readline().rstrip("\n") for _ in range(count)]


def stop(process: subprocess.Popen[str]) -> tuple[int, str]:
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    return process.returncode, stderr


@pytest.mark.parametrize(
    ("files", "problem"),
    [
        ({"--tls-cert-file": "missing.pem", "--tls-key-file": "missing.key"}, "not a readable"),
        ({"--tls-cert-file": "junk.pem"}, "needs both tls_cert_file and tls_key_file"),
        ({"--tls-cert-file": "junk.pem", "--tls-key-file": "junk.pem"}, "TLS files"),
        ({"--auth-tokens-file": "tokens.yaml"}, "tokens.0.tenant: Field required"),
    ],
)
def test_bad_edge_files_are_configuration_errors(
    tmp_path: Path, files: dict[str, str], problem: str
) -> None:
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    (tmp_path / "junk.pem").chmod(0o600)  # a key file others may read is refused before
    (tmp_path / "tokens.yaml").write_text("tokens:\n  - token: x\n    agents: '*'\n")
    args = [part for flag, name in files.items() for part in (flag, str(tmp_path / name))]
    done = run_to_exit(*args, data_dir=tmp_path / "data")
    assert done.returncode == 2, done.stderr
    assert "error: invalid configuration" in done.stderr
    assert problem in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "data" / ".holonograph-admin.json").exists()


def test_no_tokens_beyond_loopback_warns_and_tls_with_tokens_does_not(tmp_path: Path) -> None:
    open_receiver = serve("--host", "0.0.0.0", data_dir=tmp_path / "open")
    lines = started_lines(open_receiver, 4)
    assert lines[0].startswith("OTLP/gRPC  listening on 0.0.0.0:")
    code, stderr = stop(open_receiver)
    assert code == 0
    assert "accept every client as tenant 'default'" in stderr

    ca = CertificateAuthority()
    ca.issue("receiver").write(tmp_path / "server.pem", tmp_path / "server.key")
    tokens = tmp_path / "tokens.yaml"
    digest = hashlib.sha256(b"secret-token").hexdigest()
    tokens.write_text(f'tokens:\n  - {{tenant: acme, token_sha256: "{digest}", agents: "*"}}\n')
    tokens.chmod(0o600)
    secured = serve(
        "--host", "0.0.0.0",
        "--tls-cert-file", str(tmp_path / "server.pem"),
        "--tls-key-file", str(tmp_path / "server.key"),
        "--auth-tokens-file", str(tokens),
        data_dir=tmp_path / "secured",
    )  # fmt: skip
    lines = started_lines(secured, 7)
    assert lines[1].startswith("OTLP/HTTP  listening on https://0.0.0.0:")
    assert lines[4] == "tls        TLS on both OTLP listeners, minimum 1.2"
    assert lines[5] == f"auth       bearer tokens ({tokens})"
    # The web UI on the same port and TLS, at an address a browser here can open.
    port = lines[1].removesuffix("/v1/traces").rsplit(":", 1)[1]
    assert lines[6] == f"web UI     https://127.0.0.1:{port}/ui/ (give it a read token)"
    code, stderr = stop(secured)
    assert code == 0
    assert "tenant 'default'" not in stderr
