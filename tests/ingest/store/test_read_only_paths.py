"""Read-only is the server side's decision on every in-process query path: a store
connection opened read-only (`open_reader`) and the admin endpoint with the read
token. Each statement class is refused and leaves no trace; refusals change nothing
for the next statement, the write token or the owner's periodic jobs; a tenant's
view hides every other tenant's rows. (`holonograph query` on a directory no process
holds: tests/holonograph/cli/test_query_security.py.)"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from opentelemetry.sdk.trace.export import SpanExportResult

from holonograph.jobs import periodic_jobs
from ingest.service.admin import ADMIN_FILE
from ingest.store.clickhouse import ClickHouseStore, open_store
from ingest.store.querygate import StatementRefused
from ingest.store.reader import open_reader
from ingest.store.url import chdb_path
from schemas.migrations import apply_migrations
from tests.conftest import RunningReceiver
from tests.otel_emit import Evaluation, Sentinel, export_grpc, record_spans
from tests.security_cases import (
    ATTACKS,
    PROBE,
    PROBE_ROWS,
    Attack,
    Host,
    create_probe,
    merges_run,
)

pytestmark = [pytest.mark.clickhouse, pytest.mark.e2e]


@dataclass
class World:
    store: ClickHouseStore
    receiver: RunningReceiver
    host: Host
    tokens: dict[str, Any]

    def admin(self, path: str, body: dict[str, Any], token: str) -> requests.Response:
        return requests.post(
            f"{self.tokens['url']}{path}",
            data=json.dumps(body),
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("readonly")
    store = open_store(f"chdb://{root / 'store'}")
    apply_migrations(store)
    create_probe(store)
    jobs = periodic_jobs(0.1)
    receiver = RunningReceiver(store, periodic=jobs)
    tokens = json.loads((chdb_path(store.url) / ADMIN_FILE).read_text())
    host = Host(root / "host")
    try:
        yield World(store, receiver, host, tokens)
    finally:
        receiver.stop()
        host.close()
        store.close()


@dataclass
class Outcome:
    refused: bool
    message: str


def via_reader(world: World, sql: str, tenant: str | None = None) -> Outcome:
    reader = open_reader(world.store.url, tenant)
    try:
        rows = reader.query(sql).rows
    except Exception as err:
        return Outcome(True, str(err))
    finally:
        reader.close()
    return Outcome(False, repr(rows))


def via_admin_read_token(world: World, sql: str) -> Outcome:
    # The request asks to write; the read token's queries are read-only regardless.
    reply = world.admin("/admin/query", {"sql": sql, "write": True}, world.tokens["read_token"])
    return Outcome(reply.status_code != 200, reply.text)


PATHS: dict[str, Callable[[World, str], Outcome]] = {
    "read-only connection": via_reader,
    "admin read token": via_admin_read_token,
}


def _refused_without_trace(world: World, attack: Attack, path: str) -> Outcome:
    before = world.host.trace(world.store)
    outcome = PATHS[path](world, world.host.sql(attack))
    assert outcome.refused, f"{attack.name} ran through {path}: {outcome.message}"
    assert "refused" in outcome.message or "READONLY" in outcome.message, outcome.message
    assert world.host.secret_text not in outcome.message
    assert world.host.trace(world.store) == before
    return outcome


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_statement_is_refused_and_leaves_no_trace(world: World, attack: Attack, path: str) -> None:
    _refused_without_trace(world, attack, path)


@pytest.mark.parametrize("path", list(PATHS))
def test_refused_system_stop_merges_leaves_merges_running(world: World, path: str) -> None:
    (attack,) = [a for a in ATTACKS if a.name == "system-stop-merges"]
    _refused_without_trace(world, attack, path)
    assert merges_run(world.store)


@pytest.mark.parametrize("path", list(PATHS))
def test_refused_kill_query_kills_nothing(world: World, path: str) -> None:
    """A slow query of the owner runs while a read-only path tries to kill it."""
    worker = world.store.reopen()
    watcher = world.store.reopen()
    result: dict[str, Any] = {}

    def slow() -> None:
        try:
            result["rows"] = worker.query(
                "SELECT count() AS n FROM numbers(150) WHERE NOT ignore(sleepEachRow(0.01))"
                " SETTINGS max_block_size = 1"
            ).rows
        except Exception as err:
            result["error"] = err

    thread = threading.Thread(target=slow)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not watcher.query(
            "SELECT count() FROM system.processes WHERE query LIKE '%sleepEachRow(0.01)%'"
            " AND query NOT LIKE '%system.processes%'"
        ).scalar():
            assert thread.is_alive() and time.monotonic() < deadline, result
            time.sleep(0.01)
        (attack,) = [a for a in ATTACKS if a.name == "kill-query"]
        _refused_without_trace(world, attack, path)
    finally:
        thread.join(60)
        worker.close()
        watcher.close()
    assert result == {"rows": [(150,)]}


def test_read_token_cannot_command_or_insert(world: World) -> None:
    read = world.tokens["read_token"]
    before = world.host.trace(world.store)
    command = world.admin("/admin/command", {"sql": f"TRUNCATE TABLE {PROBE}"}, read)
    insert = world.admin(
        "/admin/insert",
        {"table": PROBE, "rows": [["acme", 7]], "column_names": ["tenant_id", "v"]},
        read,
    )
    assert (command.status_code, insert.status_code) == (403, 403)
    assert "the read token cannot write" in command.json()["error"]
    assert world.host.trace(world.store) == before
    stranger = world.admin("/admin/query", {"sql": "SELECT 1"}, "not-a-token")
    assert stranger.status_code == 401


def test_after_refusals_the_write_token_and_periodic_jobs_still_work(world: World) -> None:
    """The statements that used to leave the shared connection read-only (a refused
    write with readonly set by the request) change nothing for what comes after."""
    poison = [
        f"INSERT INTO {PROBE} SETTINGS readonly = 2 VALUES ('acme', 5)",
        "SELECT 1 SETTINGS readonly = 2",
        "SET readonly = 1",
        f"DROP TABLE {PROBE}",
    ]
    for sql in poison:
        assert via_admin_read_token(world, sql).refused
        assert via_reader(world, sql).refused
    write = world.tokens["write_token"]
    table = "holonograph.security_writes"
    created = world.admin(
        "/admin/command",
        {"sql": f"CREATE TABLE IF NOT EXISTS {table} (v UInt8) ENGINE = MergeTree ORDER BY v"},
        write,
    )
    assert created.status_code == 200, created.text
    inserted = world.admin("/admin/query", {"sql": f"INSERT INTO {table} VALUES (1)"}, write)
    assert inserted.status_code == 200, inserted.text
    check = {"sql": f"SELECT count() AS n, getSetting('readonly') AS ro FROM {table}"}
    assert world.admin("/admin/query", check, write).json()["rows"] == [[1, 0]]
    # The read token's connections are as read-only as before, and still answer.
    read = world.tokens["read_token"]
    assert world.admin("/admin/query", check, read).json()["rows"] == [[1, 1]]

    spans = record_spans([Evaluation("after-refusal", 0), Sentinel("after-refusal", 1, final=True)])
    assert export_grpc(world.receiver.grpc_endpoint, spans) is SpanExportResult.SUCCESS
    deadline = time.monotonic() + 30
    status = "holonograph.stream_status FINAL WHERE emission_stream = 'after-refusal'"
    while not world.store.query(f"SELECT status FROM {status}").rows:
        assert time.monotonic() < deadline, "the periodic completeness job stopped refreshing"
        time.sleep(0.05)
    assert world.store.query(f"SELECT status FROM {status}").rows == [("closed-complete",)]


# --- a tenant's view ---------------------------------------------------------------


def _tenant_rows(world: World, sql: str, tenant: str, path: str) -> list[list[Any]]:
    if path == "read-only connection":
        reader = open_reader(world.store.url, tenant)
        try:
            return [list(r) for r in reader.query(sql).rows]
        finally:
            reader.close()
    reply = world.admin("/admin/query", {"sql": sql, "tenant": tenant}, world.tokens["read_token"])
    assert reply.status_code == 200, reply.text
    rows: list[list[Any]] = reply.json()["rows"]
    return rows


@pytest.mark.parametrize("path", list(PATHS))
def test_a_tenant_sees_only_its_rows_however_the_table_is_reached(world: World, path: str) -> None:
    acme = sorted([v] for t, v in PROBE_ROWS if t == "acme")
    queries = {
        "table": f"SELECT v FROM {PROBE} ORDER BY v",
        "alias": f"SELECT p.v FROM {PROBE} AS p ORDER BY p.v",
        "subquery": f"SELECT v FROM (SELECT * FROM {PROBE}) ORDER BY v",
        "view": "SELECT intDiv(v10, 10) FROM holonograph.security_probe_view ORDER BY 1",
        "view()": f"SELECT v FROM view(SELECT v FROM {PROBE}) ORDER BY v",
        "join": f"SELECT a.v FROM {PROBE} AS a JOIN {PROBE} AS b ON a.v = b.v ORDER BY a.v",
        "cte": f"WITH t AS (SELECT v FROM {PROBE}) SELECT v FROM t ORDER BY v",
        "in": f"SELECT number FROM numbers(10) WHERE number IN (SELECT v FROM {PROBE}) ORDER BY 1",
    }
    for name, sql in queries.items():
        assert _tenant_rows(world, sql, "acme", path) == acme, name
    assert _tenant_rows(world, f"SELECT count() FROM {PROBE}", "globex", path) == [[1]]
    assert _tenant_rows(world, f"SELECT count() FROM {PROBE}", "o'brien \\ x", path) == [[0]]
    # Without a tenant every row is there, on both paths (the admin endpoint keeps
    # untenanted read-only connections for later requests, never a tenant's).
    assert via_reader(world, f"SELECT count() FROM {PROBE}").message == f"[({len(PROBE_ROWS)},)]"
    everyone = world.admin(
        "/admin/query", {"sql": f"SELECT count() FROM {PROBE}"}, world.tokens["read_token"]
    )
    assert everyone.json()["rows"] == [[len(PROBE_ROWS)]]


@pytest.mark.parametrize(
    "sql",
    [
        f"SELECT * FROM {PROBE} SETTINGS additional_table_filters = {{}}",
        "SELECT * FROM merge('holonograph', '^security_probe$')",
        "SELECT * FROM mergeTreeIndex('holonograph', 'security_probe', with_marks = true)",
        f"SELECT * FROM {PROBE} SETTINGS readonly = 0",
    ],
    ids=["settings", "merge", "mergeTreeIndex", "readonly"],
)
def test_a_tenant_cannot_lift_its_filter(world: World, sql: str) -> None:
    outcome = via_reader(world, sql, tenant="acme")
    assert outcome.refused
    assert "globex" not in outcome.message
    reply = world.admin("/admin/query", {"sql": sql, "tenant": "acme"}, world.tokens["write_token"])
    assert reply.status_code in (400, 403) and "globex" not in reply.text


def test_a_tenant_view_through_the_write_token_is_still_read_only(world: World) -> None:
    before = world.host.trace(world.store)
    reply = world.admin(
        "/admin/query",
        {"sql": f"INSERT INTO {PROBE} VALUES ('acme', 50)", "tenant": "acme"},
        world.tokens["write_token"],
    )
    assert reply.status_code == 403
    assert world.host.trace(world.store) == before


def test_readers_refuse_commands_inserts_and_client_side_parameters(world: World) -> None:
    reader = open_reader(world.store.url)
    try:
        with pytest.raises(StatementRefused):
            reader.command(f"TRUNCATE TABLE {PROBE}")
        with pytest.raises(StatementRefused):
            reader.insert(PROBE, [["acme", 9]], ["tenant_id", "v"])
        # %(x)s would be formatted into the SQL by the client after the gate saw it.
        with pytest.raises(StatementRefused, match="bind on the server"):
            reader.query("SELECT %(x)s", {"x": "1"})
        assert reader.query("SELECT {x:UInt8} + 1 AS y", {"x": 1}).rows == [(2,)]
    finally:
        reader.close()
    assert world.store.query(f"SELECT count() FROM {PROBE}").scalar() == len(PROBE_ROWS)


def test_published_admin_file_is_owner_only(world: World) -> None:
    path = Path(chdb_path(world.store.url)) / ADMIN_FILE
    assert path.stat().st_mode & 0o777 == 0o600
    assert set(world.tokens) == {"url", "pid", "read_token", "write_token"}
    assert world.tokens["read_token"] != world.tokens["write_token"]
