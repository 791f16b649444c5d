"""`holonograph query` as a real process: on a chDB directory no process holds every
statement class is refused (exit 1) and leaves no trace; `--tenant` hides other
tenants' rows; while `serve` holds the store a refused statement changes nothing for
`query --write` and a saving analysis; the data directory is owner-only; no output
of a start-up against a store URL with a password shows the password."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import grpc
import pytest

from holonograph.cli.serve import announce
from ingest.service.admin import ADMIN_FILE
from ingest.service.config import ServeConfig
from ingest.service.receiver import Listeners
from ingest.store.clickhouse import ClickHouseStore
from tests.holonograph.cli.test_serve import ROOT, ServeProcess, holonograph
from tests.ingest.helpers import grpc_export
from tests.otel_emit import Evaluation, Sentinel, export_request, record_spans
from tests.security_cases import ATTACKS, PROBE, PROBE_ROWS, Host

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

# One attack of each class (the in-process paths run all of them): files read,
# written and overwritten, the network, other databases, processes, SYSTEM, KILL,
# DDL, DML, raising readonly from the query's SETTINGS, a second statement, SET.
OFFLINE = [
    "file-table-function",
    "file-scalar",
    "insert-into-function-file",
    "overwrite-file",
    "into-outfile",
    "url",
    "remote",
    "mysql",
    "executable",
    "system-stop-merges",
    "kill-query",
    "drop-table",
    "create-file-engine",
    "insert",
    "settings-readonly-0",
    "multi-statement-system",
    "set-readonly",
]
SECRET = "s3cretPassw0rd"


def _prepare_store(data_dir: Path) -> None:
    """A migrated store with the probe tables, made by another process and left free."""
    script = textwrap.dedent(
        f"""
        from ingest.store.clickhouse import open_store
        from schemas.migrations import apply_migrations
        from tests.security_cases import create_probe
        store = open_store("chdb://{data_dir}")
        apply_migrations(store)
        create_probe(store)
        store.close()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


_CLI = textwrap.dedent(
    """
    import json, sys
    from click.testing import CliRunner
    from holonograph.cli import cli
    results = []
    for argv in json.loads(sys.stdin.read()):
        result = CliRunner().invoke(cli, argv)
        crash = result.exception if not isinstance(result.exception, SystemExit) else None
        results.append({"code": result.exit_code, "stdout": result.stdout,
                        "stderr": result.stderr, "crash": repr(crash) if crash else None})
    print(json.dumps(results))
    """
)


def run_cli(*invocations: list[str]) -> list[dict[str, Any]]:
    """Several `holonograph` invocations, one after another in one other process (a
    process start per statement would dominate the test's time)."""
    done = subprocess.run(
        [sys.executable, "-c", _CLI],
        cwd=ROOT,
        input=json.dumps(list(invocations)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    results: list[dict[str, Any]] = json.loads(done.stdout.splitlines()[-1])
    assert [r["crash"] for r in results] == [None] * len(results), results
    return results


def _rows(data_dir: Path, sql: str, *extra: str) -> list[dict[str, Any]]:
    done = holonograph("query", "--data-dir", str(data_dir), "--json", *extra, sql)
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, Any]] = json.loads(done.stdout)
    return rows


def _store_state(data_dir: Path) -> list[dict[str, Any]]:
    return _rows(
        data_dir,
        "SELECT name, total_rows FROM system.tables WHERE database = 'holonograph'"
        " AND engine NOT LIKE '%View' ORDER BY name",
    )


@pytest.fixture(scope="module")
def offline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("offline") / "data"
    _prepare_store(data_dir)
    return data_dir


def test_offline_query_refuses_every_statement_class_without_trace(
    offline: Path, tmp_path: Path
) -> None:
    host = Host(tmp_path / "host")
    try:
        before = _store_state(offline)
        attacks = [a for a in ATTACKS if a.name in OFFLINE]
        results = run_cli(*(["query", "--data-dir", str(offline), host.sql(a)] for a in attacks))
        for attack, done in zip(attacks, results, strict=True):
            assert done["code"] == 1, (attack.name, done)
            assert "refused" in done["stderr"] or "READONLY" in done["stderr"], (attack.name, done)
            assert host.secret_text not in done["stdout"] + done["stderr"], attack.name
        assert not host.target.exists()
        assert host.victim.read_text() == host.victim_text
        assert host.listener.connections == 0
        assert _store_state(offline) == before
    finally:
        host.close()


def test_offline_query_tenant_sees_only_its_rows(offline: Path) -> None:
    sql = f"SELECT tenant_id, v FROM {PROBE} ORDER BY v"
    view = "SELECT count() AS n FROM holonograph.security_probe_view"
    query = ["query", "--data-dir", str(offline), "--json"]
    acme, globex, everyone, both = run_cli(
        [*query, "--tenant", "acme", sql],
        [*query, "--tenant", "globex", view],
        [*query, sql],
        [*query, "--tenant", "acme", "--write", sql],
    )
    assert json.loads(acme["stdout"]) == [
        {"tenant_id": t, "v": v} for t, v in PROBE_ROWS if t == "acme"
    ]
    assert json.loads(globex["stdout"]) == [{"n": 1}]
    assert len(json.loads(everyone["stdout"])) == len(PROBE_ROWS)
    assert both["code"] == 2
    assert "read-only" in both["stderr"]


def test_refusal_through_serve_changes_nothing_for_writes_and_saving_analyses(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    server = ServeProcess(data_dir)
    try:
        payload = export_request(
            record_spans([Evaluation("s", 0), Sentinel("s", 1, final=True)])
        ).SerializeToString()
        assert grpc_export(server.grpc_endpoint, payload).code is grpc.StatusCode.OK
        table = "holonograph.writes_after_refusal"
        create = f"CREATE TABLE {table} (v UInt8) ENGINE = MergeTree ORDER BY v"
        query = ["query", "--data-dir", str(data_dir)]
        refusals = [
            create,
            "INSERT INTO holonograph.quarantine SETTINGS readonly = 2"
            " SELECT * FROM holonograph.quarantine",
            "SYSTEM STOP MERGES",
        ]
        *refused, created, inserted, read, saved, status = run_cli(
            *([*query, sql] for sql in refusals),
            [*query, "--write", create],
            [*query, "--write", f"INSERT INTO {table} VALUES (7)"],
            [*query, "--json", f"SELECT v FROM {table}"],
            ["completeness", "--data-dir", str(data_dir), "--refresh", "--json"],
            [*query, "--json", "SELECT status FROM holonograph.stream_status FINAL"],
        )
        for done in refused:
            assert done["code"] == 1, done
            assert "refused" in done["stderr"] or "READONLY" in done["stderr"], done
        assert [created["code"], inserted["code"]] == [0, 0], (created, inserted)
        assert json.loads(read["stdout"]) == [{"v": 7}]
        assert saved["code"] == 0, saved
        assert json.loads(status["stdout"]) == [{"status": "closed-complete"}]
    finally:
        code, stderr = server.stop()
    assert code == 0, stderr
    assert "Traceback" not in stderr


def test_data_directory_tree_is_owner_only_after_serve_wrote_data(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o755)
    data_dir.chmod(0o755)
    stale = data_dir / ADMIN_FILE  # left by a crash, world-readable
    stale.write_text("{}")
    stale.chmod(0o644)
    server = ServeProcess(data_dir)
    try:
        payload = export_request(
            record_spans([Evaluation("m", i) for i in range(3)])
        ).SerializeToString()
        assert grpc_export(server.grpc_endpoint, payload).code is grpc.StatusCode.OK
        count = "SELECT count() AS n FROM holonograph.evaluation_events FINAL"
        assert _rows(data_dir, count) == [{"n": 3}]
        modes = _modes(data_dir)
    finally:
        code, _ = server.stop()
    assert code == 0
    assert modes.pop(data_dir) == 0o700
    assert modes.pop(data_dir / ADMIN_FILE) == 0o600
    assert len(modes) > 20  # chDB's own tree: metadata, parts, columns
    loose = {str(p): oct(m) for p, m in modes.items() if m not in (0o700, 0o600)}
    assert loose == {}
    assert {m for p, m in modes.items() if p.is_dir()} == {0o700}
    assert all(m == 0o600 for p, m in modes.items() if p.is_file())
    after = _modes(data_dir)
    assert all(m in (0o700, 0o600) for m in after.values())


def _modes(root: Path) -> dict[Path, int]:
    """Every path's mode; the running engine's temporary parts (an insert or a merge in
    progress) may vanish during the walk, and a path gone holds nothing."""
    out = {root: stat.S_IMODE(root.stat().st_mode)}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            with contextlib.suppress(FileNotFoundError):
                if not path.is_symlink():
                    out[path] = stat.S_IMODE(path.stat().st_mode)
    return out


# --- secrets -----------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _secret_store() -> str:
    return f"http://holo:{SECRET}@127.0.0.1:{_closed_port()}"


@pytest.mark.parametrize(
    "args",
    [
        ["serve", "--grpc-port", "0", "--http-port", "0", "--store", "{store}"],
        ["serve", "--grpc-port", "0", "--http-port", "0", "--store", "{store}", "--json", "-v"],
        ["sink", "--kafka", "127.0.0.1:{port}", "--store", "{store}", "-v"],
        ["query", "--store", "{store}", "SELECT 1"],
        ["query", "--store", "{store}", "--json", "--tenant", "acme", "SELECT 1"],
        ["completeness", "--store", "{store}", "--json"],
    ],
    ids=["serve", "serve-json-verbose", "sink", "query", "query-json-tenant", "completeness"],
)
def test_no_password_in_any_output_of_an_unreachable_store(args: list[str]) -> None:
    store, port = _secret_store(), _closed_port()
    argv = [a.format(store=store, port=port) for a in args]
    done = holonograph(*argv)
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert SECRET not in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    if args[0] in ("serve", "sink"):
        assert "holo:***@127.0.0.1" in done.stderr


def test_no_password_from_the_environment_or_a_malformed_url() -> None:
    from_env = holonograph(
        "serve", "--grpc-port", "0", "--http-port", "0", env={"HOLONOGRAPH_STORE": _secret_store()}
    )
    assert from_env.returncode == 3
    assert SECRET not in from_env.stdout + from_env.stderr
    for command, bad in (
        (["serve"], f"http://holo:{SECRET}@"),
        (["query", "SELECT 1"], f"ftp://holo:{SECRET}@example.com"),
    ):
        done = holonograph(command[0], "--store", bad, *command[1:])
        assert done.returncode == 2, (bad, done.stderr)
        assert SECRET not in done.stdout + done.stderr
        assert "holo:***@" in done.stderr


def test_start_up_lines_and_json_show_a_server_store_without_its_password(
    store: ClickHouseStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """The success path of `serve`'s announcement (no ClickHouse server here: the
    store object is given the URL of one, over the test's chDB connection)."""
    url = f"http://holo:{SECRET}@clickhouse.internal:8123"
    held = ClickHouseStore(url, store._client)
    service = SimpleNamespace(
        config=ServeConfig(grpc_port=0, http_port=0), listeners=Listeners(1, 2, 3), store=held
    )
    announce(service, as_json=False)  # type: ignore[arg-type]
    announce(service, as_json=True)  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert SECRET not in out
    assert "store      http://holo:***@clickhouse.internal:8123 (ClickHouse server)" in out
    assert json.loads(out.splitlines()[-1])["store"] == "http://holo:***@clickhouse.internal:8123"
