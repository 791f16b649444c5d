"""Retention per tenant (`holonograph retention`, migration 0018): a tenant's rows
older than its retention disappear from the event, dimension and receipt tables once
ClickHouse applies the TTL, another tenant's stay; the store's default (`serve
--retention`) covers the others; the TTL comes back after a table loses it (a
rebuild) and is not touched when nothing changed; completeness and drift say when
their window reaches past the retention; the HTTP API runs the same job."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from click.testing import CliRunner, Result

from holonograph.api import mount_api
from holonograph.cli import cli
from ingest.edge.auth import Authenticator
from ingest.service.routes import ApiContext
from ingest.service.workers import StoreWorkers
from ingest.store.clickhouse import ClickHouseStore, open_store
from ingest.store.reader import StoreSessions
from ingest.store.retention import apply_retention
from schemas.migrations import apply_migrations
from schemas.retention import RETAINED_TABLES, apply_retention_ttl
from schemas.store import Store
from schemas.tables import DATABASE, EMISSION_RECEIPTS, EVALUATION_DIMENSIONS, EVALUATION_EVENTS
from schemas.times import to_store_time, utc_now

pytestmark = pytest.mark.clickhouse

SURFACE = "classify-intent"
# The TTL counts from the store's own clock: rows are placed around the real now.
NOW = utc_now()
OLD = NOW - dt.timedelta(days=60)
NEW = NOW - dt.timedelta(days=1)
TENANTS = ("acme", "globex")


def seed(store: Store) -> None:
    events, dimensions, receipts = [], [], []
    for tenant in TENANTS:
        for age, when in (("old", OLD), ("new", NEW)):
            for i in range(3):
                event_id = f"{tenant}-{age}-{i}"
                at = to_store_time(when + dt.timedelta(minutes=i))
                events.append([tenant, event_id, SURFACE, at, at])
                dimensions.append([tenant, event_id, "correctness", True, SURFACE, at])
                receipts.append(
                    [tenant, f"{tenant}-s", i if age == "old" else 10 + i, event_id,
                     "evaluation", event_id, SURFACE, at, at]
                )  # fmt: skip
    store.insert(
        EVALUATION_EVENTS.qualified, events,
        EVALUATION_EVENTS.pick("tenant_id", "event_id", "surface_id", "timestamp", "ingested_at"),
    )  # fmt: skip
    store.insert(
        EVALUATION_DIMENSIONS.qualified, dimensions,
        EVALUATION_DIMENSIONS.pick(
            "tenant_id", "event_id", "dimension_id", "passed", "surface_id", "timestamp"
        ),
    )  # fmt: skip
    store.insert(
        EMISSION_RECEIPTS.qualified, receipts,
        EMISSION_RECEIPTS.pick(
            "tenant_id", "emission_stream", "emission_seq", "receipt_id", "kind", "event_id",
            "surface_id", "event_time", "received_at",
        ),
    )  # fmt: skip


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "store"
    store = open_store(f"chdb://{path}")
    try:
        apply_migrations(store)
        seed(store)
    finally:
        store.close()
    yield path


def run(data_dir: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "--data-dir", str(data_dir)])


def materialize(store: Store) -> None:
    """What ClickHouse's merges do in time, now: apply every table's TTL."""
    for table in RETAINED_TABLES:
        store.command(f"ALTER TABLE {DATABASE}.{table} MATERIALIZE TTL SETTINGS mutations_sync = 2")
        store.command(f"OPTIMIZE TABLE {DATABASE}.{table} FINAL")


def counts(store: Store) -> dict[tuple[str, str], int]:
    """Rows per (table, tenant-age) after FINAL."""
    out: dict[tuple[str, str], int] = {}
    for table, column in (
        (EVALUATION_EVENTS, "event_id"), (EVALUATION_DIMENSIONS, "event_id"),
        (EMISSION_RECEIPTS, "event_id"),
    ):  # fmt: skip
        for key, n in store.query(
            f"SELECT concat(tenant_id, '-', splitByChar('-', {column})[2]) AS k, count()"
            f" FROM {table.qualified} FINAL GROUP BY k"
        ).rows:
            out[(table.name, str(key))] = int(n)
    return out


def test_a_tenants_old_rows_go_and_every_other_row_stays(data_dir: Path) -> None:
    done = run(data_dir, "retention", "set", "--tenant", "acme", "--days", "30", "--json")
    assert done.exit_code == 0, done.output
    document = json.loads(done.stdout)
    assert document["tenantId"] == "acme" and document["tenantDays"] == 30
    assert document["effectiveDays"] == 30 and document["source"] == "tenant"
    assert set(document["appliedTo"]) == set(RETAINED_TABLES)
    store = open_store(f"chdb://{data_dir}")
    try:
        materialize(store)
        after = counts(store)
    finally:
        store.close()
    for table in (EVALUATION_EVENTS, EVALUATION_DIMENSIONS, EMISSION_RECEIPTS):
        assert (table.name, "acme-old") not in after, table.name
        assert after[(table.name, "acme-new")] == 3, table.name
        assert after[(table.name, "globex-old")] == 3, table.name
        assert after[(table.name, "globex-new")] == 3, table.name
    shown = run(data_dir, "retention", "show", "--tenant", "globex")
    assert shown.exit_code == 0, shown.output
    assert "tenant globex: kept forever (no setting)" in shown.stdout


def test_the_stores_default_covers_the_other_tenants_and_clear_returns_to_it(
    data_dir: Path,
) -> None:
    store = open_store(f"chdb://{data_dir}")
    try:
        # acme's setting first: a TTL applies to the rows there are when it is set.
        assert run(data_dir, "retention", "set", "--tenant", "acme", "--days", "90").exit_code == 0
        apply_retention(store, "40d")  # serve --retention 40d
        materialize(store)
        after = counts(store)
        # acme keeps 90 days (its own setting wins over the shorter default); globex 40.
        assert after[(EVALUATION_EVENTS.name, "acme-old")] == 3
        assert (EVALUATION_EVENTS.name, "globex-old") not in after
        cleared = run(data_dir, "retention", "clear", "--tenant", "acme", "--json")
        assert cleared.exit_code == 0, cleared.output
        document = json.loads(cleared.stdout)
        assert document["tenantDays"] is None and document["effectiveDays"] == 40
        assert document["source"] == "default"
        materialize(store)
        assert (EVALUATION_EVENTS.name, "acme-old") not in counts(store)
    finally:
        store.close()


def test_the_ttl_comes_back_after_a_rebuild_and_is_left_alone_otherwise(data_dir: Path) -> None:
    assert run(data_dir, "retention", "set", "--tenant", "acme", "--days", "30").exit_code == 0
    store: ClickHouseStore = open_store(f"chdb://{data_dir}")
    try:
        assert apply_retention_ttl(store) == []  # as wanted already: nothing altered
        store.command(f"ALTER TABLE {EVALUATION_EVENTS.qualified} REMOVE TTL")  # a rebuild
        # A store not current takes the full path, which re-applies the TTL at its end
        # (a current one costs one query and alters nothing).
        store.command(
            f"ALTER TABLE {DATABASE}.schema_migrations DELETE"
            " WHERE version = 18 SETTINGS mutations_sync = 2"
        )
        assert [m.version for m in apply_migrations(store)] == [18]  # the TTL re-applied
        assert apply_retention_ttl(store) == []
        ttl = store.query(
            "SELECT create_table_query FROM system.tables WHERE database = {db:String}"
            " AND name = {t:String}",
            {"db": DATABASE, "t": EVALUATION_EVENTS.name},
        ).scalar()
        acme = store.query("SELECT cityHash64('acme')").scalar()
        assert f"toIntervalDay(30) WHERE cityHash64(tenant_id) = {acme}" in ttl
        assert "acme" not in ttl  # every reader may read a table's definition
    finally:
        store.close()


def test_completeness_and_drift_say_when_the_window_reaches_past_retention(
    data_dir: Path,
) -> None:
    assert run(data_dir, "retention", "set", "--tenant", "acme", "--days", "30").exit_code == 0
    since = (NOW - dt.timedelta(days=90)).strftime("%Y-%m-%dT%H:%M:%SZ")
    recent = (NOW - dt.timedelta(days=7)).strftime("%Y-%m-%dT%H:%M:%SZ")
    until = (NOW + dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    for command in (["completeness"], ["drift", "--surface", SURFACE, "--no-save"]):
        wide = run(data_dir, *command, "--tenant", "acme", "--since", since, "--until", until,
                   "--json")  # fmt: skip
        assert wide.exit_code in (0, 1), wide.output
        reach = json.loads(wide.stdout)["retention"]
        assert reach["days"] == 30 and reach["source"] == "tenant"
        assert reach["windowReachesPast"] is True
        text = run(data_dir, *command, "--tenant", "acme", "--since", since, "--until", until)
        assert "retention: 30 days (the tenant's setting); rows before" in text.stdout
        assert "this window reaches past retention" in text.stdout
        narrow = run(data_dir, *command, "--tenant", "acme", "--since", recent, "--until",
                     until, "--json")  # fmt: skip
        assert json.loads(narrow.stdout)["retention"]["windowReachesPast"] is False
        other = run(data_dir, *command, "--tenant", "globex", "--since", since, "--until",
                    until, "--json")  # fmt: skip
        assert json.loads(other.stdout)["retention"] is None  # globex keeps everything


def test_usage_errors_exit_2(data_dir: Path) -> None:
    for args in (["set", "--tenant", "acme"], ["set", "--tenant", "acme", "--days", "0"]):
        done = run(data_dir, "retention", *args)
        assert done.exit_code == 2, done.output
        assert "Traceback" not in done.output


def test_the_http_api_shows_and_sets_the_tokens_tenants_retention(data_dir: Path) -> None:
    async def call() -> list[tuple[int, Any]]:
        application = web.Application()
        sessions = StoreSessions(f"chdb://{data_dir}")
        workers = StoreWorkers(sessions, 1)
        mount_api(application, ApiContext(Authenticator(None), workers, utc_now))
        answers = []
        headers = {"Content-Type": "application/json", "x-holonograph-run-mode": "production"}
        try:
            async with TestClient(TestServer(application)) as client:
                for body in ({"action": "set", "days": 3}, {"action": "show"}, {"days": 3}):
                    reply = await client.post(
                        "/holonograph/retention", data=json.dumps(body), headers=headers
                    )
                    answers.append((reply.status, await reply.json()))
        finally:
            workers.close()
            sessions.close()
        return answers

    (saved, shown, refused) = asyncio.run(call())
    assert saved[0] == 200, saved
    assert saved[1]["tenantId"] == "default" and saved[1]["effectiveDays"] == 3
    assert shown[0] == 200 and shown[1]["tenantDays"] == 3 and shown[1]["appliedTo"] == []
    assert refused[0] == 400 and refused[1]["code"] == "invalid_request"
