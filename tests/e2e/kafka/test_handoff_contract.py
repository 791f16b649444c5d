"""One contract for every hand-off (`ingest.handoff.protocol`), run against each
implementation in the spirit of arroyo's backend mixins: the embedded group commit
over a real chDB store and the Kafka producer over the test broker. A subject says
how to build its hand-off, how to read back what it made durable and how to take its
store or broker away; the tests are the same for all."""

from __future__ import annotations

import gc
import uuid
import weakref
from collections.abc import AsyncIterator
from typing import Any

import pytest

from ingest.errors import Unavailable
from ingest.export.request import validate_request
from ingest.handoff.embedded import EmbeddedHandoff
from ingest.handoff.kafka import KafkaHandoff
from ingest.handoff.protocol import Handoff
from ingest.replay import dead_letters
from ingest.store.clickhouse import ClickHouseStore
from schemas import records
from schemas.events import ValidatedBatch
from schemas.topics import Topics
from testkit.faulty_store import FaultyStore
from testkit.tansu import free_port
from tests.e2e.kafka.conftest import Broker
from tests.otel_emit import Evaluation, Sentinel, export_request, record_spans

MIB = 1 << 20


def _batch(stream: str) -> ValidatedBatch:
    items = [Evaluation(stream, 0), Evaluation(stream, 1), Sentinel(stream, 2, final=True)]
    return validate_request(export_request(record_spans(items, seed=len(stream))))


class Subject:
    """One implementation under the contract."""

    handoff: Handoff[Any]

    async def durable_event_ids(self) -> set[str]:
        raise NotImplementedError

    def take_away(self) -> None:
        """Make its store or broker unreachable."""
        raise NotImplementedError

    async def unready(self) -> Handoff[Any]:
        """A hand-off of this kind whose store or broker cannot be reached."""
        raise NotImplementedError


class HandoffContract:
    """The tests every hand-off passes; subclasses provide the `subject` fixture."""

    async def test_every_step_then_durable_when_submit_returns(self, subject: Subject) -> None:
        batch = _batch(f"contract-{uuid.uuid4().hex[:8]}")
        handoff = subject.handoff
        with handoff.arriving():
            prepared = handoff.prepare(batch)
        assert prepared.batch == batch  # nothing to quarantine: the client hears of none
        stored = await handoff.submit(prepared, uuid.uuid4().hex, 1000)
        assert stored == batch
        assert {e.event_id for e in batch.events} <= await subject.durable_event_ids()

    async def test_a_prepared_batch_never_submitted_leaves_nothing_behind(
        self, subject: Subject
    ) -> None:
        prepared = subject.handoff.prepare(_batch("abandoned"))
        gone = weakref.ref(prepared)
        del prepared
        gc.collect()
        assert gone() is None  # the hand-off kept no state between the steps

    async def test_ready_while_it_can_take_requests_and_says_why_not(
        self, subject: Subject
    ) -> None:
        assert await subject.handoff.readiness() is None
        unready = await subject.unready()
        try:
            problem = await unready.readiness()
        finally:
            await unready.close()
        assert isinstance(problem, str) and problem

    async def test_after_close_a_submit_is_refused_for_the_client_to_retry(
        self, subject: Subject
    ) -> None:
        batch = _batch(f"closed-{uuid.uuid4().hex[:8]}")
        handoff = subject.handoff
        prepared = handoff.prepare(batch)
        await handoff.close()
        with pytest.raises(Unavailable, match="shutting down"):
            await handoff.submit(prepared, uuid.uuid4().hex, 1000)
        assert not {e.event_id for e in batch.events} & await subject.durable_event_ids()


class _Embedded(Subject):
    def __init__(self, store: ClickHouseStore) -> None:
        self.store = store
        self.faulty = FaultyStore(store)
        self.handoff = EmbeddedHandoff(self.faulty, max_inflight_bytes=16 * MIB)

    async def durable_event_ids(self) -> set[str]:
        rows = self.store.query("SELECT event_id FROM holonograph.evaluation_events").rows
        return {str(event_id) for (event_id,) in rows}

    async def unready(self) -> Handoff[Any]:
        faulty = FaultyStore(self.store)
        faulty.fail("store is down (injected)")
        return EmbeddedHandoff(faulty, max_inflight_bytes=16 * MIB)


class _Kafka(Subject):
    def __init__(self, broker: Broker, names: dict[str, str]) -> None:
        self.broker = broker
        self.topics = Topics(
            records=names["kafka_records_topic"],
            dead_letter=names["kafka_dead_letter_topic"],
            partitions=2,
        )
        self.handoff = self._handoff(broker.bootstrap)

    def _handoff(self, bootstrap: str) -> KafkaHandoff:
        return KafkaHandoff(
            bootstrap,
            self.topics,
            max_inflight_bytes=16 * MIB,
            max_message_bytes=1_000_000,
            timeout_seconds=2.0,
            idempotence=self.broker.idempotence,
        )

    async def durable_event_ids(self) -> set[str]:
        ids: set[str] = set()
        async for _key, value in dead_letters(self.broker.bootstrap, self.topics.records):
            record = records.decode(value)
            if isinstance(record, records.BatchRecord):
                ids |= {e.event_id for e in record.events}
        return ids

    async def unready(self) -> Handoff[Any]:
        return self._handoff(f"127.0.0.1:{free_port()}")  # nothing listens there


@pytest.mark.clickhouse
class TestEmbeddedHandoff(HandoffContract):
    @pytest.fixture
    async def subject(self, store: ClickHouseStore) -> AsyncIterator[Subject]:
        subject = _Embedded(store)
        yield subject
        await subject.handoff.close()


@pytest.mark.kafka
class TestKafkaHandoff(HandoffContract):
    @pytest.fixture
    async def subject(self, broker: Broker, names: dict[str, str]) -> AsyncIterator[Subject]:
        subject = _Kafka(broker, names)
        assert isinstance(subject.handoff, KafkaHandoff)
        await subject.handoff.start()
        yield subject
        await subject.handoff.close()
