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
    # The decoded request leaves `arriving` and is queued with no await between (as
    # `ExportHandler.export` does): it joins the waiting commit, one insert for both.
    await handoff.submit(handoff.prepare(_batch("b", 2)), "r2", 100)
    await first
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


def _lingering(faulty: FaultyStore, linger: float) -> EmbeddedHandoff:
    return EmbeddedHandoff(
        faulty, max_inflight_bytes=16 * MIB, linger_seconds=linger, linger_rows=100
    )


async def test_a_lone_client_never_lingers(store: ClickHouseStore) -> None:
    """Commits of one request each: written at once, however long the linger."""
    faulty = FaultyStore(store)
    handoff = _lingering(faulty, linger=30.0)
    for n in range(3):
        await asyncio.wait_for(handoff.submit(handoff.prepare(_batch(f"l{n}")), f"r{n}", 100), 20)
    await handoff.close()
    assert _event_inserts(faulty) == [3, 3, 3]


async def test_after_a_shared_commit_small_requests_linger_to_join(store: ClickHouseStore) -> None:
    faulty = FaultyStore(store)
    handoff = _lingering(faulty, linger=30.0)
    submit = handoff.submit
    # Two requests queued before the writer runs: one commit of both.
    await asyncio.gather(*(submit(handoff.prepare(_batch(f"a{n}")), f"a{n}", 100) for n in (0, 1)))
    # The next small request lingers for others instead of being written alone.
    first = asyncio.create_task(submit(handoff.prepare(_batch("b0")), "b0", 100))
    for _ in range(20):
        await asyncio.sleep(0)
    assert not first.done() and _event_inserts(faulty) == [6]
    await asyncio.gather(first, submit(handoff.prepare(_batch("b1")), "b1", 100))
    await handoff.close()
    assert _event_inserts(faulty) == [6, 6]


async def test_a_commit_at_the_linger_rows_is_written_at_once(store: ClickHouseStore) -> None:
    faulty = FaultyStore(store)
    handoff = _lingering(faulty, linger=30.0)
    submit = handoff.submit
    await asyncio.gather(*(submit(handoff.prepare(_batch(f"a{n}")), f"a{n}", 100) for n in (0, 1)))
    big = _batch("big", 60)  # 60 events + 60 arrivals: past the 100 rows of the linger
    await asyncio.wait_for(submit(handoff.prepare(big), "big", 100), 20)
    await handoff.close()
    assert _event_inserts(faulty) == [6, 60]


async def test_fast_and_model_batches_share_a_commit(store: ClickHouseStore) -> None:
    """A hot-path batch and a reference one in one commit: the rows of both, each
    request answered with what it handed in."""
    from ingest.export.fast import fast_batch

    faulty = FaultyStore(store)
    handoff = _handoff(faulty, commit_wait=30.0)
    request = export_request(record_spans([Evaluation("fast", s) for s in range(4)], seed=9))
    fast = fast_batch(request)
    assert fast is not None
    answered = await asyncio.gather(
        handoff.submit(handoff.prepare(fast), "f", 100),
        handoff.submit(handoff.prepare(_batch("model", 2)), "m", 100),
    )
    await handoff.close()
    assert answered[0] is fast
    assert _event_inserts(faulty) == [6]
    stored = store.query(
        "SELECT emission_stream, count() FROM holonograph.evaluation_events FINAL"
        " GROUP BY emission_stream ORDER BY emission_stream"
    ).rows
    assert stored == [("fast", 4), ("model", 2)]
