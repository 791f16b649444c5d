"""The tokens file and the TLS key on reload: a version another user could have
written keeps the previous set and says why (before: a group-writable tokens file
loaded silently, and a local user added a working token); and no message about a
malformed tokens file quotes any part of a token (before: PyYAML's message showed the
line)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from ingest.edge.auth import Authenticator, TokensFileError, load_tokens
from ingest.edge.tls import ServerTls, TlsError, TlsFiles
from ingest.errors import Unauthenticated
from tests.holonograph.cli.test_serve_edge import run_to_exit
from tests.ingest.certs import CertificateAuthority
from tests.ingest.edge.test_auth import entry, tokens_yaml

SECRET = "tok-Zq8vX2mWn5Rb7Kp4Ls9D"  # plaintext, as a careless tokens file holds it


def _fragments(text: str, secret: str = SECRET, size: int = 6) -> list[str]:
    """Every piece of `secret` of `size` characters that appears in `text`."""
    return [
        secret[i : i + size] for i in range(len(secret) - size + 1) if secret[i : i + size] in text
    ]


def test_a_reload_another_user_could_have_written_keeps_the_previous_tokens(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "tokens.yaml"
    path.write_text(tokens_yaml(entry("acme", "tok-acme-original")))
    path.chmod(0o600)
    auth = Authenticator(path)
    # Someone who may write it adds their own token; the mode says anyone could.
    path.chmod(0o666)
    path.write_text(tokens_yaml(entry("acme", "tok-acme-original"), entry("evil", "tok-planted")))
    with caplog.at_level(logging.WARNING, logger="ingest.edge.auth"):
        assert auth.reload_if_changed() is False
        assert auth.reload_if_changed() is False  # said once per version of the file
    assert auth.authenticate("Bearer tok-acme-original").tenant_id == "acme"
    with pytest.raises(Unauthenticated):
        auth.authenticate("Bearer tok-planted")
    (line,) = [r.getMessage() for r in caplog.records if "tokens file" in r.getMessage()]
    assert "keeping the old tokens: refusing the tokens file: writable by group or others" in line
    # Made safe again (a chmod alone changes no content): the new set is taken.
    path.chmod(0o600)
    assert auth.reload_if_changed() is True
    assert auth.authenticate("Bearer tok-planted").tenant_id == "evil"


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file away")
def test_a_reload_of_a_tokens_file_given_to_another_user_keeps_the_previous_tokens(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tokens.yaml"
    path.write_text(tokens_yaml(entry("acme", "tok-acme-original")))
    path.chmod(0o600)
    auth = Authenticator(path)
    path.write_text(tokens_yaml(entry("evil", "tok-planted")))
    os.chown(path, 54321, -1)
    assert auth.reload_if_changed() is False
    assert auth.authenticate("Bearer tok-acme-original").tenant_id == "acme"


def test_a_reload_of_a_key_others_may_read_keeps_the_previous_certificate(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ca = CertificateAuthority()
    cert, key = tmp_path / "server.pem", tmp_path / "server.key"
    ca.issue("receiver").write(cert, key)
    tls = ServerTls(TlsFiles(cert, key))
    ca.issue("receiver").write(cert, key)
    key.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="ingest.edge.tls"):
        assert tls.reload_if_changed() is False
    assert tls.generation == 0
    assert "refusing the TLS private key: readable by group or others" in caplog.text
    key.chmod(0o600)
    assert tls.reload_if_changed() is True
    with pytest.raises(TlsError, match="refusing the TLS private key"):
        key.chmod(0o640)
        ServerTls(TlsFiles(cert, key))


MALFORMED = {
    "unclosed-quote": f'tokens:\n  - tenant: acme\n    token: "{SECRET}\n    agents: "*"\n',
    "bad-indent": f"tokens:\n  - tenant: acme\n    token: {SECRET}\n   agents: '*'\n",
    "tab": f"tokens:\n  - tenant: acme\n\ttoken: {SECRET}\n",
    "token-as-key": f"tokens:\n  - tenant: acme\n    {SECRET}: x\n    agents: '*'\n",
    "token-as-list": f"tokens:\n  - tenant: acme\n    token: [{SECRET}]\n    agents: '*'\n",
    "token-in-digest": f"tokens:\n  - tenant: acme\n    token_sha256: {SECRET}\n    agents: '*'\n",
    "token-in-agents": f"tokens:\n  - tenant: acme\n    token: x\n    agents: {SECRET}\n",
    "alias": f"tokens:\n  - tenant: acme\n    token: *{SECRET}\n    agents: '*'\n",
    "bare-token": f"{SECRET}\n",
    "flow-garbage": f"tokens: [{{tenant: acme, token: {SECRET}, agents: '*'}}\n",
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_no_message_about_a_malformed_tokens_file_quotes_a_token(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    path = tmp_path / "tokens.yaml"
    path.write_text(tokens_yaml(entry("acme", "tok-acme-original")))
    path.chmod(0o600)
    auth = Authenticator(path)
    path.write_text(MALFORMED[name])
    with pytest.raises(TokensFileError) as at_start:
        load_tokens(path)
    with caplog.at_level(logging.WARNING, logger="ingest.edge.auth"):
        assert auth.reload_if_changed() is False
    message = str(at_start.value)
    assert message.startswith(f"tokens file {path}"), message
    assert _fragments(message) == [], message
    assert _fragments(caplog.text) == [], caplog.text
    assert auth.authenticate("Bearer tok-acme-original").tenant_id == "acme"


def test_serve_with_a_malformed_tokens_file_quotes_no_token(tmp_path: Path) -> None:
    path = tmp_path / "tokens.yaml"
    path.write_text(MALFORMED["unclosed-quote"])
    path.chmod(0o600)
    done = run_to_exit("--auth-tokens-file", str(path), data_dir=tmp_path / "data")
    assert done.returncode == 2, done.stderr
    assert "is not YAML:" in done.stderr
    assert "at line" in done.stderr
    assert _fragments(done.stdout + done.stderr) == [], done.stderr
