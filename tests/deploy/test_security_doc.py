"""docs/security.md stays true: its SQL parses with ClickHouse's parser, its YAML
parses and holds what it claims (the agreed tokens file, a TLS exporter with a bearer
header), its table functions match the gate's, and the README links it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from ingest.store.clickhouse import ClickHouseStore
from ingest.store.querygate import ALLOWED_TABLE_FUNCTIONS

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs/security.md").read_text()


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC, re.S)


def _statements(block: str) -> list[str]:
    body = "\n".join(line for line in block.splitlines() if not line.lstrip().startswith("--"))
    return [s.strip() for s in body.split(";") if s.strip()]


@pytest.mark.clickhouse
def test_every_sql_statement_parses(store: ClickHouseStore) -> None:
    statements = [s for block in _blocks("sql") for s in _statements(block)]
    assert len(statements) >= 4
    for sql in statements:
        store.query("SELECT formatQuery({sql:String})", {"sql": sql})  # raises on a bad one


def test_yaml_examples_hold_the_agreed_shapes() -> None:
    documents: list[Any] = [yaml.safe_load(block) for block in _blocks("yaml")]
    tokens = next(d for d in documents if "tokens" in d)
    (entry,) = tokens["tokens"]
    assert set(entry) == {"name", "tenant", "token_sha256", "agents", "spans_per_second"}
    exporter = next(d for d in documents if "exporters" in d)["exporters"]["otlp/holonograph"]
    assert {"ca_file", "cert_file", "key_file", "min_version"} <= set(exporter["tls"])
    assert "insecure" not in exporter["tls"]
    assert exporter["headers"]["authorization"].startswith("Bearer ${env:")


def test_documents_every_security_setting_and_the_gate() -> None:
    for flag in ("--tls-cert-file", "--tls-key-file", "--tls-client-ca-file"):
        env = "HOLONOGRAPH_" + flag[2:].upper().replace("-", "_")
        assert f"`{flag}`" in DOC and f"`{env}`" in DOC
    for flag, env in (
        ("--tls-min-version", "HOLONOGRAPH_TLS_MIN_VERSION"),
        ("--auth-tokens-file", "HOLONOGRAPH_AUTH_TOKENS_FILE"),
        ("--tenant T", None),
    ):
        assert f"`{flag}`" in DOC
        assert env is None or f"`{env}`" in DOC
    for name in ALLOWED_TABLE_FUNCTIONS - {"numbers_mt", "zeros_mt", "generateSeries"}:
        assert f"`{name}`" in DOC, name
    assert "](docs/security.md)" in (ROOT / "README.md").read_text()
