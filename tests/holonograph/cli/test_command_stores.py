"""A command's connections to a chDB directory it opens itself (`CommandStores`): the
runner's tenant lookup and the reads of that tenant share one read-only connection
when every row of the store is that tenant's, and only then; the job's scope,
freshness and queries run on it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from holonograph.cli import cli
from holonograph.cli import jobs as cli_jobs
from holonograph.cli.jobs import CommandStores
from ingest.store.clickhouse import open_store
from ingest.store.querygate import StatementRefused
from processors.tenants import resolve_tenant, store_tenants
from schemas.migrations import apply_migrations
from tests.processors.conformance.support import event, insert_events

pytestmark = pytest.mark.clickhouse

COUNT = "SELECT count() FROM holonograph.evaluation_events"
OTHER_TENANT_RUN = (
    "INSERT INTO holonograph.schedule_runs (tenant_id, schedule, run_id)"
    " VALUES ('globex', 'nightly', 'run_1')"
)


def _store(path: Path, *statements: str, tenants: tuple[str, ...] = ("acme",)) -> Path:
    store = open_store(f"chdb://{path}")
    try:
        apply_migrations(store)
        for tenant in tenants:
            insert_events(store, [event("evt_1", {}), event("evt_2", {})], tenant_id=tenant)
        for statement in statements:
            store.command(statement)
    finally:
        store.close()
    return path


@pytest.fixture
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CommandStores]:
    statements, tenants = request.param
    opened = CommandStores(None, str(_store(tmp_path / "d", *statements, tenants=tenants)))
    yield opened
    opened.close()


@pytest.mark.parametrize("stores", [((), ("acme",))], indirect=True)
def test_one_tenant_store_one_reader(stores: CommandStores) -> None:
    with stores.reading(None) as scope:
        tenant = resolve_tenant(scope, None)
        assert tenant == "acme"
        assert scope.query(COUNT).scalar() == 2
    with stores.reading(tenant) as reader:
        assert reader is scope  # the same connection: no second open
        assert reader.query(COUNT).scalar() == 2
        with pytest.raises(StatementRefused):
            reader.command("DROP TABLE holonograph.evaluation_events")
    with stores.writing() as writer:
        assert writer is not reader
        writer.command(OTHER_TENANT_RUN)
    with stores.reading(tenant) as reader:  # still scoped: the other tenant's row is not seen
        assert reader.query("SELECT count() FROM holonograph.schedule_runs").scalar() == 0


@pytest.mark.parametrize(
    "stores",
    [((OTHER_TENANT_RUN,), ("acme",)), ((), ("acme", "globex")), ((), ())],
    indirect=True,
    ids=["a-row-of-another-tenant-elsewhere", "two-tenants", "no-tenant-yet"],
)
def test_otherwise_the_unscoped_reader_stays_unscoped(stores: CommandStores) -> None:
    with stores.reading(None) as scope:
        assert getattr(scope, "tenant", "?") is None
        runs = scope.query("SELECT count() FROM holonograph.schedule_runs").scalar()
        events = scope.query(COUNT).scalar()
    with stores.reading("acme") as reader:
        assert reader is not scope
    assert (runs, events) in {(1, 2), (0, 4), (0, 0)}  # every tenant's rows, as before


ACME_RUN = (
    "INSERT INTO holonograph.schedule_runs (tenant_id, schedule, run_id)"
    " VALUES ('acme', 'nightly', 'run_1')"
)


@pytest.mark.parametrize(
    "stores",
    [((), ("acme",)), ((ACME_RUN,), ()), ((ACME_RUN,), ("acme",))],
    indirect=True,
    ids=["events", "only-a-table-the-lookup-does-not-list", "both"],
)
def test_the_tenant_found_at_open_scopes_the_reader_the_lookup_runs_on(
    stores: CommandStores,
) -> None:
    with stores.reading(None) as scope:
        assert getattr(scope, "tenant", None) == "acme"
        asked = store_tenants(scope)  # the lookup's own queries, on the same scoped reader
        assert asked in ([], ["acme"])
        assert resolve_tenant(scope, None) == (asked[0] if asked else None)


@pytest.mark.parametrize("stores", [((ACME_RUN,), ())], indirect=True)
def test_a_write_drops_the_tenants_read_at_open(stores: CommandStores) -> None:
    with stores.reading(None) as scope:
        assert store_tenants(scope) == []  # schedule_runs is not a table the lookup lists
    with stores.writing() as writer:
        insert_events(writer, [event("evt_1", {})], tenant_id="acme")
    with stores.reading(None) as reader:
        assert reader is scope
        assert store_tenants(reader) == ["acme"]  # asked again, not the answer from open


def test_scope_freshness_and_the_job_share_one_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`drift` on a directory it opens itself: the tenant lookup, the windows'
    freshness and the job's queries run on one read-only connection within the job's
    limits; a writer is opened only to persist."""
    data_dir = _store(tmp_path / "d")
    opened: list[tuple[bool, str | None]] = []
    real = cli_jobs.open_store_or_exit

    def counted(*args: Any, **kwargs: Any) -> Any:
        opened.append((kwargs["write"], kwargs["tenant"]))
        return real(*args, **kwargs)

    monkeypatch.setattr(cli_jobs, "open_store_or_exit", counted)
    window = ["--since", "2026-07-01T00:00:00Z", "--until", "2026-07-02T00:00:00Z"]
    args = ["drift", "--surface", "classify-intent", *window, "--data-dir", str(data_dir), "--json"]
    done = CliRunner().invoke(cli, args)  # the windows were never refreshed: it does
    assert done.exit_code in (0, 1), done.output
    assert "refreshed the completeness windows first" in done.output
    assert opened == [(False, None), (True, None)]  # one writer: the refresh and the run's
    opened.clear()
    done = CliRunner().invoke(cli, [*args, "--no-save"])  # fresh now, nothing to persist
    assert done.exit_code in (0, 1), done.output
    assert opened == [(False, None)]
