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
    # chDB's own connection names KILL's columns (clickhouse-connect's, behind `serve`'s
    # admin endpoint, gives bare rows: `query._named` below)
    assert "kill_status" in text.stdout and "finished" in text.stdout


def test_bare_rows_get_column_names_to_print_under() -> None:
    from holonograph.cli.query import _named
    from schemas.store import QueryResult

    named = _named(QueryResult((), [("finished", "q1", "default")]))
    assert named.column_names == ("column_1", "column_2", "column_3")
    assert named.rows == [("finished", "q1", "default")]


def test_serve_verbose_logs_each_request_and_summarises_ignored_spans(tmp_path: Path) -> None:
    from tests.ingest.helpers import grpc_export
    from tests.otel_emit import Evaluation, export_request, record_spans

    mine = export_request(record_spans([Evaluation("strm", 0)], other_spans=2))
    only_foreign = export_request(record_spans([], seed=8, other_spans=3))
    server = ServeProcess(tmp_path / "data", "-v")
    try:
        for payload in (mine, only_foreign):
            reply = grpc_export(server.grpc_endpoint, payload.SerializeToString())
            assert reply.code.name == "OK", reply.details
    finally:
        code, stderr = server.stop()
    assert code == 0, stderr
    lines = [line for line in stderr.splitlines() if "ingest.requests" in line]
    assert len(lines) == 2, stderr
    assert all(line.endswith(" ms") for line in lines)
    assert all("INFO ingest.requests: traces anonymous (tenant default): " in x for x in lines)
    assert "1 accepted, 0 rejected, 2 ignored in " in lines[0]
    assert "0 accepted, 0 rejected, 3 ignored in " in lines[1]
    # The first line at once, then at most one per interval; the rest when serve stops.
    summaries = [line for line in stderr.splitlines() if "span(s) ignored since" in line]
    assert [line.split(" INFO ")[1].split(" since")[0] for line in summaries] == [
        "ingest.service.rejections: 2 span(s) ignored",
        "ingest.service.rejections: 3 span(s) ignored",
    ]
    for summary in summaries:
        assert "not a holonograph or OpenTelemetry GenAI span" in summary
        assert "only holonograph.* and OpenTelemetry GenAI spans are stored" in summary
