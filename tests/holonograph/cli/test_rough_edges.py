"""The first hour's rough edges: a second `serve` on a held data directory is one line
naming the running PID; `query --write "KILL QUERY ..."` prints what the statement
answered and exits 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from holonograph.cli import cli
from ingest.store.clickhouse import open_store
from schemas.migrations import apply_migrations
from tests.holonograph.cli.test_serve import ServeProcess, holonograph

pytestmark = pytest.mark.clickhouse


def test_a_second_serve_on_a_held_directory_names_the_running_pid(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    first = ServeProcess(data_dir)
    try:
        for command in ("serve", "sink"):
            extra = ["--grpc-port", "0", "--http-port", "0"]
            if command == "sink":  # refused before it would reach Kafka
                extra = ["--kafka", "127.0.0.1:9"]
            second = holonograph(command, "--data-dir", str(data_dir), *extra)
            assert second.returncode == 3, second.stderr
            lines = second.stderr.strip().splitlines()
            assert lines[0] == (
                f"error: {data_dir} is already in use by holonograph process"
                f" {first.process.pid} (admin {lines[0].rsplit('admin ', 1)[1]}"
            )
            assert lines[1].startswith(f"hint: stop it first (kill {first.process.pid})")
            assert len(lines) == 2 and "BAD_ARGUMENTS" not in second.stderr
            assert "Traceback" not in second.stderr
    finally:
        code, stderr = first.stop()
    assert code == 0, stderr


def test_kill_query_exits_0_with_what_it_answered(tmp_path: Path) -> None:
    store = open_store(f"chdb://{tmp_path / 'store'}")
    apply_migrations(store)
    store.close()
    for sql in ("KILL QUERY WHERE 1 SYNC", "KILL QUERY WHERE query_id = 'none-such'"):
        done = CliRunner().invoke(
            cli, ["query", "--write", sql, "--data-dir", str(tmp_path / "store"), "--json"]
        )
        assert done.exit_code == 0, done.output
        rows = json.loads(done.stdout)
        assert isinstance(rows, list)
    text = CliRunner().invoke(
        cli, ["query", "--write", "KILL QUERY WHERE 1 SYNC", "--data-dir", str(tmp_path / "store")]
    )
    assert text.exit_code == 0, text.output
    assert "column_1" in text.stdout and "finished" in text.stdout
