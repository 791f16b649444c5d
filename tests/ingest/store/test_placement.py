"""Placements on the commit path (`schemas.placement`, decision 0014): an event's rows
are written under the surface and hour of its first receipt, whatever a re-send
carries, so every version keeps one sorting key and `FINAL` collapses them; a re-send
that moves the event is listed as a move and read where it now is. The ownership
lookup gives the placement in the same query, for the reference and the hot path."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from ingest.export.fast import FastBatch, fast_batch
from ingest.export.principal import Principal
from ingest.export.request import validate_request
from ingest.store import owners
from ingest.store.clickhouse import ClickHouseStore
from ingest.store.owners import Submission, Writer
from ingest.store.rows import TableRows, write_rows
from processors.series.cells import SERIES_FILTER, SeriesQuery
from schemas.placement import placed_hour
from testkit.faulty_store import FaultyStore
from tests.otel_emit import Evaluation, export_request, record_spans

pytestmark = pytest.mark.clickhouse

AT = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)
FIRST = dt.datetime(2026, 11, 20, 10, 30, tzinfo=dt.UTC)
LATER = FIRST + dt.timedelta(days=2, hours=3)  # another day, another hour
BILLING = Principal(tenant_id="acme", agents=frozenset({"billing-triage"}))


def _ns(moment: dt.datetime) -> int:
    return int(moment.timestamp()) * 1_000_000_000


def request(surface: str, at: dt.datetime, hot: bool, seq: int = 0) -> Any:
    item = Evaluation("s", seq, surface=surface, event_id="evt_moved", end_ns=_ns(at),
                      extra={"holonograph.agent.id": "billing-triage"})  # fmt: skip
    body = export_request(record_spans([item], seed=seq + 1))
    if hot:
        batch = fast_batch(body, BILLING)
        assert batch is not None
        return batch
    return validate_request(body, principal=BILLING)


def commit(store: Any, batches: list[Any], received: dt.datetime) -> owners.Checked:
    """One commit as the embedded writer makes it: check, then rows under placements."""
    submissions = [Submission(b, Writer(b.agents), received, i) for i, b in enumerate(batches)]
    checked = owners.check(store, submissions, verify=False)
    rows = TableRows(placements=checked.placements)
    for i, batch in enumerate(checked):
        if isinstance(batch, FastBatch):
            batch.add_to(rows, f"r{received.timestamp()}-{i}", received, i)
        else:
            rows.add(batch, f"r{received.timestamp()}-{i}", received, i)
    write_rows(store, rows)
    return checked


def _count(store: ClickHouseStore, surface: str, since: dt.datetime) -> int:
    query = SeriesQuery(surface, since, since + dt.timedelta(hours=2), tenant_id="acme",
                        provenances=())  # fmt: skip
    sql = f"SELECT count() FROM holonograph.evaluation_dimensions FINAL WHERE {SERIES_FILTER}"
    return int(store.query(sql, query.params()).scalar())


@pytest.mark.parametrize("hot", [False, True], ids=["reference", "hot-path"])
def test_a_resend_elsewhere_keeps_its_first_placement_and_is_read_where_it_is(
    store: ClickHouseStore, hot: bool
) -> None:
    first = commit(store, [request("classify-intent", FIRST, hot)], AT)
    place = ("classify-intent", placed_hour(FIRST))
    assert first.placements == {("acme", "evt_moved"): place}

    counting = FaultyStore(store)
    again = commit(counting, [request("route-ticket", LATER, hot, seq=1)], AT + dt.timedelta(1))
    assert again.placements == {("acme", "evt_moved"): place}  # the store's, not the re-send's
    assert len(counting.queries) == 1  # the placement came with the ownership lookup

    rows = store.query(
        "SELECT surface_id, placed_surface_id, toUnixTimestamp(placed_hour)"
        " FROM holonograph.evaluation_events ORDER BY ingest_version"
    ).rows
    assert rows == [("classify-intent", *place), ("route-ticket", *place)]
    assert store.query(
        "SELECT surface_id, timestamp FROM holonograph.evaluation_events FINAL"
    ).rows == [("route-ticket", LATER.replace(tzinfo=None))]
    moves = store.query(
        "SELECT DISTINCT surface_id, hour, placed_surface_id FROM holonograph.event_moves"
    ).rows
    assert moves == [("route-ticket", LATER.replace(minute=0, tzinfo=None), "classify-intent")]
    # Read where it now is (through the moves), and no longer where it was placed.
    assert _count(store, "route-ticket", LATER - dt.timedelta(minutes=30)) == 1
    assert _count(store, "classify-intent", FIRST - dt.timedelta(minutes=30)) == 0


@pytest.mark.parametrize("hot", [False, True], ids=["reference", "hot-path"])
def test_two_versions_of_a_new_event_in_one_commit_share_the_first_ones_placement(
    store: ClickHouseStore, hot: bool
) -> None:
    checked = commit(
        store,
        [request("classify-intent", FIRST, hot), request("route-ticket", LATER, hot, seq=1)],
        AT,
    )
    assert checked.placements == {("acme", "evt_moved"): ("classify-intent", placed_hour(FIRST))}
    # Both versions under one key, which FINAL (and the merges) collapse to one row
    # (under two keys both rows would stay).
    assert store.query(
        "SELECT count(), uniqExact(placed_surface_id, placed_hour, dimension_id, event_id),"
        " any(placed_surface_id) FROM holonograph.evaluation_dimensions"
    ).rows == [(2, 1, "classify-intent")]
    assert store.query(
        "SELECT count(), any(placed_surface_id) FROM holonograph.evaluation_dimensions FINAL"
    ).rows == [(1, "classify-intent")]
    assert store.query("SELECT surface_id FROM holonograph.evaluation_events FINAL").rows == [
        ("route-ticket",)
    ]
    # The claim the row wrote carries the placement: the next commit finds it.
    found = owners.lookup(store, {("acme", "evt_moved")}, set())
    assert found.placements == checked.placements


def test_another_writers_earlier_claim_gives_the_placement(store: ClickHouseStore) -> None:
    """Several writers (a sink): a claim read back that came first decides the key."""
    store.insert(
        "holonograph.event_owners",
        [["acme", "evt_moved", "billing-triage", 0, 1, "route-ticket", placed_hour(LATER)]],
        owners.EVENT_OWNERS.columns,
    )
    batch = request("classify-intent", FIRST, hot=False)
    checked = owners.check(store, [Submission(batch, Writer(batch.agents), AT)], verify=True)
    assert checked.placements == {("acme", "evt_moved"): ("route-ticket", placed_hour(LATER))}
