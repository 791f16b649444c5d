"""A command's connections to a chDB directory it opens itself (`CommandStores`): the
runner's tenant lookup and the reads of that tenant share one read-only connection
when every row of the store is that tenant's, and only then."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from holonograph.cli.jobs import CommandStores
from ingest.store.clickhouse import open_store
from ingest.store.querygate import StatementRefused
from processors.tenants import resolve_tenant
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
