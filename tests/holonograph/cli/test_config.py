"""`--config FILE`: flag defaults from YAML under the flags' names, the command line
winning; `validate --config` names every wrong key and value (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from holonograph.cli import cli
from ingest.store.clickhouse import open_store
from schemas.migrations import apply_migrations
from testkit import multiplex
from testkit.multiplex import MultiplexSpec

pytestmark = pytest.mark.clickhouse


def _store(path: Path) -> Path:
    store = open_store(f"chdb://{path}")
    try:
        apply_migrations(store)
        multiplex.seed(store, MultiplexSpec(calls=5, fallbacks=0, tenant_id="acme"), 1)
        multiplex.seed(store, MultiplexSpec(calls=5, fallbacks=0, tenant_id="globex"), 2)
    finally:
        store.close()
    return path


def test_a_config_file_sets_flag_defaults_and_the_command_line_wins(tmp_path: Path) -> None:
    data_dir = _store(tmp_path / "store")
    config = tmp_path / "holonograph.yaml"
    config.write_text(f"data-dir: {data_dir}\ntenant: globex\nstatus:\n  json: true\n")
    valid = CliRunner().invoke(cli, ["validate", "--config", str(config)])
    assert valid.exit_code == 0, valid.output
    assert valid.stdout == f"{config}: valid (2 shared setting(s), 1 command section(s))\n"
    done = CliRunner().invoke(cli, ["--config", str(config), "status"])
    assert done.exit_code == 0, done.output
    assert [t["tenantId"] for t in json.loads(done.stdout)["tenants"]] == ["globex"]
    overridden = CliRunner().invoke(cli, ["--config", str(config), "status", "--tenant", "acme"])
    assert [t["tenantId"] for t in json.loads(overridden.stdout)["tenants"]] == ["acme"]


def test_validate_names_every_wrong_key_and_value(tmp_path: Path) -> None:
    config = tmp_path / "holonograph.yaml"
    config.write_text(
        "data-dri: /tmp/x\nserve:\n  grpc-prot: 1\n  http-port: notaport\n"
        "variance:\n  decompose:\n    bucket: week\ndrfit:\n  surface: x\n"
    )
    done = CliRunner().invoke(cli, ["validate", "--config", str(config)])
    assert done.exit_code == 2
    lines = done.stderr.splitlines()
    assert (
        lines[0] == f"{config}: data-dri: no command has a flag --data-dri (did you mean data-dir?)"
    )
    assert (
        f"{config}: serve.grpc-prot: no flag --grpc-prot on `serve` (did you mean grpc-port?)"
        in lines
    )
    assert any("serve.http-port:" in line and "not a valid integer" in line for line in lines)
    assert any("variance.decompose.bucket:" in line and "'week'" in line for line in lines)
    assert f"{config}: drfit: no command `drfit` (did you mean drift?)" in lines
    refused = CliRunner().invoke(cli, ["--config", str(config), "status"])
    assert refused.exit_code == 2 and refused.stderr.startswith(f"error: config {config}: ")
    assert (
        CliRunner().invoke(cli, ["validate", "--config", str(tmp_path / "none.yaml")]).exit_code
        == 2
    )
