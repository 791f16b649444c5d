"""Group commit: a commit waits for requests already on their way (being decoded),
never for ones that have not arrived, and never longer than the commit wait."""

from __future__ import annotations

import asyncio

import pytest

from ingest.export.request import validate_request
from ingest.handoff.embedded import EmbeddedHandoff
from ingest.store.clickhouse import ClickHouseStore
from schemas.events import ValidatedBatch
from testkit.faulty_store import FaultyStore
from tests.otel_emit import Evaluation, export_request, record_spans

pytestmark = [pytest.mark.clickhouse]

MIB = 1 << 20


def _batch(stream: str, count: int = 3) -> ValidatedBatch:
    items = [Evaluation(stream, seq) for seq in range(count)]
    return validate_request(export_request(record_spans(items, seed=len(stream))))


def _event_inserts(faulty: FaultyStore) -> list[int]:
    return [rows for table, rows in faulty.insert_calls if table.endswith("evaluation_events")]


def _handoff(faulty: FaultyStore, commit_wait: float) -> EmbeddedHandoff:
    return EmbeddedHandoff(faulty, max_inflight_bytes=16 * MIB, commit_wait_seconds=commit_wait)


async def _queued_while_one_arrives(
    handoff: EmbeddedHandoff, faulty: FaultyStore, stream: str
) -> asyncio.Task[None]:
    """Submit a batch while another request is on its way; the commit must wait."""
    first = asyncio.create_task(handoff.submit(handoff.prepare(_batch(stream)), "r1", 100))
    for _ in range(20):  # the writer runs, sees a request on its way and waits
        await asyncio.sleep(0)
    assert not first.done()
    assert faulty.insert_calls == []
    return first


async def test_a_commit_waits_for_requests_being_decoded(store: ClickHouseStore) -> None:
    faulty = FaultyStore(store)
    handoff = _handoff(faulty, commit_wait=30.0)
    with handoff.arriving():
        first = await _queued_while_one_arrives(handoff, faulty, "a")
    # The decoded request joins the waiting commit: one insert for both.
    await asyncio.gather(first, handoff.submit(handoff.prepare(_batch("b", 2)), "r2", 100))
    await handoff.close()
    assert _event_inserts(faulty) == [5]


async def test_a_lone_request_is_written_without_waiting(store: ClickHouseStore) -> None:
    faulty = FaultyStore(store)
    handoff = _handoff(faulty, commit_wait=30.0)
    await asyncio.wait_for(handoff.submit(handoff.prepare(_batch("alone")), "r1", 100), 20)
    await handoff.close()
    assert _event_inserts(faulty) == [3]


async def test_the_wait_is_bounded_by_the_commit_wait(store: ClickHouseStore) -> None:
    faulty = FaultyStore(store)
    handoff = _handoff(faulty, commit_wait=0.05)
    with handoff.arriving():  # a request that never finishes decoding
        await asyncio.wait_for(handoff.submit(handoff.prepare(_batch("bounded")), "r1", 100), 20)
    await handoff.close()
    assert _event_inserts(faulty) == [3]


async def test_a_request_that_yields_nothing_releases_the_wait(store: ClickHouseStore) -> None:
    faulty = FaultyStore(store)
    handoff = _handoff(faulty, commit_wait=30.0)
    with handoff.arriving():
        first = await _queued_while_one_arrives(handoff, faulty, "c")
    # Leaving `arriving` without submitting (every span ignored) ends the wait.
    await asyncio.wait_for(first, 20)
    await handoff.close()
    assert _event_inserts(faulty) == [3]
