"""Values the store cannot hold on the scale-out path: refused at the receiver (the
quarantined spans reach the quarantine table through the dead-letter topic), and,
for records that bypass validation, isolated by the sink: a batch the store refuses
for good is bisected down to the offending record(s), which go to the dead-letter
topic with the store's message while everything else is written and committed. The
sink never stalls; the poison brake still applies."""

from __future__ import annotations

import asyncio
import datetime as dt
from functools import partial

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition

from ingest.export.request import validate_request
from ingest.handoff.kafka_topics import ensure_topics
from ingest.sink.dlq import SinkHalted
from ingest.store.clickhouse import ClickHouseStore
from schemas import records
from schemas.events import DEFAULT_TENANT, QuarantineRecord
from schemas.topics import Topics
from tests.e2e.kafka.conftest import Broker, KafkaReceiver, RunningSink
from tests.e2e.kafka.helpers import read_records, wait_until
from tests.otel_emit import Evaluation, Sentinel, export_request, record_spans
from tests.values import (
    Mix,
    arrived_quarantined,
    quarantine_reasons,
    send,
    send_concurrently,
    stored_once,
    valid_traffic,
)

pytestmark = [pytest.mark.kafka, pytest.mark.clickhouse, pytest.mark.e2e]

PARTITIONS = 4
RECEIVED = dt.datetime(2026, 11, 30, 14, 0, tzinfo=dt.UTC)
YEAR_2500 = dt.datetime(2500, 1, 1, tzinfo=dt.UTC)


def test_every_value_class_is_quarantined_and_the_sink_keeps_going(
    broker: Broker, names: dict[str, str], store: ClickHouseStore, kafka_receiver: KafkaReceiver
) -> None:
    sink = RunningSink(broker, names, store)
    try:
        endpoint = kafka_receiver.grpc_endpoint
        mix = Mix("kbad")
        others = valid_traffic("kother", clients=6, spans=5)
        sends = [partial(send, "grpc", endpoint, mix.request())]
        sends += [partial(send, "http-protobuf", kafka_receiver.http_endpoint, r) for r in others]
        answers = send_concurrently(sends)
        assert [status for status, _ in answers] == ["OK"] * len(sends)
        assert answers[0][1].partial_success.rejected_spans == len(mix.spoiled)

        streams = [mix.ok] + [f"kother-{c}" for c in range(6)]
        expected = {mix.ok: (2, 4), **{s: (5, 5) for s in streams[1:]}}
        wait_until(lambda: stored_once(store, streams) == expected, what="valid spans stored")
        wait_until(
            lambda: len(quarantine_reasons(store, mix.stream)) == len(mix.spoiled),
            what="quarantine rows",
        )
        reasons = quarantine_reasons(store, mix.stream)
        for seq, reason in mix.reasons().items():
            assert reasons[seq].startswith(reason), (seq, reasons[seq])
        assert arrived_quarantined(store, mix.stream) == set(mix.reasons())
        # They travelled as quarantined letters on the dead-letter topic, reasons and all.
        letters = asyncio.run(
            read_records(
                broker.bootstrap, names["kafka_dead_letter_topic"], len(mix.spoiled), then_ms=500
            )
        )
        assert sorted(
            (letter.span.emission_seq, letter.span.reason)
            for letter in letters
            if isinstance(letter, records.QuarantinedLetter)
        ) == sorted(reasons.items())

        # Nothing is stuck behind them: a later request lands too.
        later = export_request(record_spans([Evaluation("klater", 0)], seed=3))
        assert send("grpc", endpoint, later)[0] == "OK"
        wait_until(lambda: stored_once(store, ["klater"])["klater"] == (1, 1), what="later")
        assert sink.service.halted is None
    finally:
        sink.stop()


# --- records that bypass validation: the sink's own isolation ---------------------


def _record(stream: str, seqs: range, poison: bool = False) -> records.BatchRecord:
    """A batch record as a receiver writes it; `poison`: its first event dated 2500
    (produced straight to the topic, so no receiver ever validated it)."""
    batch = validate_request(
        export_request(record_spans([Evaluation(stream, s) for s in seqs], seed=len(stream)))
    )
    events, emissions = list(batch.events), list(batch.emissions)
    if poison:
        events[0] = events[0].model_copy(update={"timestamp": YEAR_2500})
        emissions[0] = emissions[0].model_copy(update={"event_time": YEAR_2500})
    return records.BatchRecord(
        tenant_id=DEFAULT_TENANT,
        agents=None,
        receipt_id=f"r-{stream}",
        received_at=RECEIVED,
        stream=stream,
        events=tuple(events),
        emissions=tuple(emissions),
    )


async def _produce(
    bootstrap: str, topic: str, placed: list[tuple[int, records.Record]]
) -> list[tuple[int, int]]:
    """Produce each record to its partition; returns (partition, offset) of each."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        where = []
        for partition, record in placed:
            key = record.stream.encode() if isinstance(record, records.BatchRecord) else b"q"
            meta = await producer.send_and_wait(
                topic, records.encode(record), key=key, partition=partition
            )
            where.append((meta.partition, meta.offset))
        return where
    finally:
        await producer.stop()


async def _committed(bootstrap: str, group: str, tps: list[TopicPartition]) -> list[int | None]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
    await consumer.start()
    try:
        return [await consumer.committed(tp) for tp in tps]
    finally:
        await consumer.stop()


def _topics(broker: Broker, names: dict[str, str]) -> Topics:
    topics = Topics(
        records=names["kafka_records_topic"],
        dead_letter=names["kafka_dead_letter_topic"],
        partitions=PARTITIONS,
    )
    asyncio.run(ensure_topics(broker.bootstrap, topics, 1 << 20, 5_000, "test"))
    return topics


def test_the_sink_bisects_a_refused_batch_down_to_its_poison_records(
    broker: Broker, names: dict[str, str], store: ClickHouseStore
) -> None:
    topics = _topics(broker, names)
    # Five records per partition; poison in the middle of two partitions, between
    # valid records of other streams on the same partition.
    placed: list[tuple[int, records.Record]] = []
    poison_at = {(1, 2), (3, 1)}
    for partition in range(PARTITIONS):
        for n in range(5):
            poisoned = (partition, n) in poison_at
            name = f"p{partition}-{n}"
            placed.append((partition, _record(name, range(3), poison=poisoned)))
    where = asyncio.run(_produce(broker.bootstrap, topics.records, placed))
    sink = RunningSink(broker, names, store)
    try:
        valid = [
            f"p{p}-{n}" for p in range(PARTITIONS) for n in range(5) if (p, n) not in poison_at
        ]
        expected = dict.fromkeys(valid, (3, 3))
        wait_until(lambda: stored_once(store, valid) == expected, what="valid records stored")
        tps = [TopicPartition(topics.records, p) for p in range(PARTITIONS)]
        wait_until(
            lambda: asyncio.run(_committed(broker.bootstrap, names["sink_group"], tps)) == [5] * 4,
            what="every partition committed to its end",
        )
        letters = asyncio.run(read_records(broker.bootstrap, topics.dead_letter, 2, then_ms=500))
        assert len(letters) == 2
        assert all(isinstance(letter, records.PoisonLetter) for letter in letters)
        by_place = {(lt.source_partition, lt.source_offset): lt for lt in letters}  # type: ignore[union-attr]
        poison_offsets = {where[p * 5 + n] for p, n in poison_at}
        assert set(by_place) == poison_offsets
        for letter in by_place.values():
            assert letter.reason.startswith("store refused: "), letter.reason
            assert "timestamp" in letter.reason
            assert letter.source_topic == topics.records
            original = records.decode(letter.value)
            assert isinstance(original, records.BatchRecord)
            assert original.events[0].timestamp == YEAR_2500
        # The poison records left nothing behind; the sink goes on.
        assert stored_once(store, ["p1-2", "p3-1"]) == {"p1-2": (0, 0), "p3-1": (0, 0)}
        asyncio.run(_produce(broker.bootstrap, topics.records, [(0, _record("after", range(2)))]))
        wait_until(lambda: stored_once(store, ["after"])["after"] == (2, 2), what="after")
        assert sink.service.halted is None
    finally:
        sink.stop()


def test_refused_records_count_for_the_brake(
    broker: Broker, names: dict[str, str], store: ClickHouseStore
) -> None:
    topics = _topics(broker, names)
    placed: list[tuple[int, records.Record]] = [
        (0, _record(f"bad{n}", range(2), poison=True)) for n in range(6)
    ]
    asyncio.run(_produce(broker.bootstrap, topics.records, placed))
    sink = RunningSink(broker, names, store, sink_max_invalid_run=3)
    try:
        with pytest.raises(SinkHalted, match="invalid records in a row"):
            sink.call(sink.service.wait())
        assert sink.service.halted is not None
        (committed,) = asyncio.run(
            _committed(broker.bootstrap, names["sink_group"], [TopicPartition(topics.records, 0)])
        )
        assert (committed or 0) < 6  # the record that tripped it is read again after a fix
    finally:
        sink.stop()


def test_a_dead_letter_the_store_refuses_is_skipped_not_dead_lettered_again(
    broker: Broker, names: dict[str, str], store: ClickHouseStore
) -> None:
    topics = _topics(broker, names)
    refused = records.QuarantinedLetter(
        tenant_id=DEFAULT_TENANT,
        agents=None,
        receipt_id="r-q",
        received_at=RECEIVED,
        span=QuarantineRecord(
            quarantine_id="q-too-big",
            reason="made by hand",
            span_name="holonograph.evaluation",
            trace_id="",
            span_id="",
            emission_stream="q",
            emission_seq=2**64,  # past UInt64
        ),
    )
    asyncio.run(_produce(broker.bootstrap, topics.dead_letter, [(0, refused)]))
    asyncio.run(_produce(broker.bootstrap, topics.records, [(0, _record("fine", range(2)))]))
    sink = RunningSink(broker, names, store)
    try:
        wait_until(lambda: stored_once(store, ["fine"])["fine"] == (2, 2), what="fine stored")
        wait_until(
            lambda: (
                asyncio.run(
                    _committed(
                        broker.bootstrap,
                        names["sink_group"],
                        [TopicPartition(topics.dead_letter, 0)],
                    )
                )
                == [1]
            ),
            what="the refused letter committed past",
        )
        assert (
            len(asyncio.run(read_records(broker.bootstrap, topics.dead_letter, 1, then_ms=500)))
            == 1
        )
        assert sink.service.halted is None
    finally:
        sink.stop()


def test_sentinels_and_events_spoiled_past_validation_are_isolated_per_record(
    broker: Broker, names: dict[str, str], store: ClickHouseStore
) -> None:
    """Other values the store refuses: a negative interval into UInt64 and a seq past
    it, each in its own hand-made record among valid ones."""
    topics = _topics(broker, names)
    sentinel = validate_request(export_request(record_spans([Sentinel("neg", 0)], seed=2)))
    negative = records.BatchRecord(
        tenant_id=DEFAULT_TENANT,
        agents=None,
        receipt_id="r-neg",
        received_at=RECEIVED,
        stream="neg",
        emissions=(
            sentinel.emissions[0].model_copy(
                update={
                    "sentinel": sentinel.emissions[0].sentinel.model_copy(  # type: ignore[union-attr]
                        update={"interval_ms": -1}
                    )
                }
            ),
        ),
    )
    placed: list[tuple[int, records.Record]] = [
        (0, _record("v0", range(2))),
        (0, negative),
        (2, _record("v1", range(2))),
        (2, _record("v2", range(2))),
    ]
    asyncio.run(_produce(broker.bootstrap, topics.records, placed))
    sink = RunningSink(broker, names, store)
    try:
        expected = dict.fromkeys(["v0", "v1", "v2"], (2, 2))
        wait_until(lambda: stored_once(store, list(expected)) == expected, what="valid stored")
        (letter,) = asyncio.run(read_records(broker.bootstrap, topics.dead_letter, 1, then_ms=500))
        assert isinstance(letter, records.PoisonLetter)
        assert "sentinel_interval_ms" in letter.reason
        assert (letter.source_partition, letter.source_offset) == (0, 1)
    finally:
        sink.stop()
