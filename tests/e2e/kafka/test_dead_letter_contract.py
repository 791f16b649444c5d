"""One contract for every dead-letter sink (`ingest.sink.dlq.DeadLetterSink`), run
against each implementation over the test broker: the topic writer and the one that
also counts on a rejection log. When `send` returns, every letter is on the topic,
keyed like its source and decoding to the very letter; nothing to send sends nothing."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import AsyncIterator

import pytest
from aiokafka import AIOKafkaProducer

from ingest.handoff.kafka_topics import ensure_topics
from ingest.service.rejections import LoggedDeadLetters, RejectionLog
from ingest.sink.dlq import DeadLetterSink, KafkaDeadLetters
from schemas.records import PoisonLetter
from schemas.topics import Topics
from tests.e2e.kafka.conftest import Broker
from tests.e2e.kafka.helpers import read_keyed

pytestmark = [pytest.mark.kafka]

T0 = dt.datetime(2026, 7, 1, 9, 0, tzinfo=dt.UTC)


def _letters(source: str) -> list[PoisonLetter]:
    return [
        PoisonLetter(
            reason=f"not a record: bad JSON ({n})",
            dead_lettered_at=T0,
            source_topic=source,
            source_partition=n % 2,
            source_offset=40 + n,
            key=f"stream-{n}".encode(),
            value=b"{not json",
        )
        for n in range(3)
    ]


class DeadLetterContract:
    """The tests every dead-letter sink passes; subclasses provide `make`."""

    def make(self, inner: KafkaDeadLetters) -> DeadLetterSink:
        raise NotImplementedError

    @pytest.fixture
    async def topic(self, broker: Broker) -> AsyncIterator[tuple[str, KafkaDeadLetters]]:
        tag = uuid.uuid4().hex[:10]
        topics = Topics(records=f"t{tag}.records", dead_letter=f"t{tag}.dead-letter", partitions=2)
        await ensure_topics(broker.bootstrap, topics, 1_000_000, 5000, "dead-letter-contract")
        producer = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap, acks="all", enable_idempotence=broker.idempotence
        )
        await producer.start()
        try:
            yield topics.dead_letter, KafkaDeadLetters(producer, topics.dead_letter)
        finally:
            await producer.stop()

    async def test_every_letter_is_on_the_topic_when_send_returns(
        self, broker: Broker, topic: tuple[str, KafkaDeadLetters]
    ) -> None:
        name, inner = topic
        letters = _letters("records-a")
        await self.make(inner).send(letters)
        found = await read_keyed(broker.bootstrap, name, len(letters), seconds=20.0)
        assert sorted(found, key=lambda kv: kv[0] or b"") == [(lt.key, lt) for lt in letters]

    async def test_nothing_to_send_sends_nothing(
        self, broker: Broker, topic: tuple[str, KafkaDeadLetters]
    ) -> None:
        name, inner = topic
        await self.make(inner).send([])
        assert await read_keyed(broker.bootstrap, name, 1, seconds=2.0) == []


class TestKafkaDeadLetters(DeadLetterContract):
    def make(self, inner: KafkaDeadLetters) -> DeadLetterSink:
        return inner


class TestLoggedDeadLetters(DeadLetterContract):
    def make(self, inner: KafkaDeadLetters) -> DeadLetterSink:
        log = RejectionLog("record(s) dead-lettered", 60, "topic dlq")
        return LoggedDeadLetters(inner, log)
