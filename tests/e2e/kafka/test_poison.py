"""Poison records reach the dead-letter topic with their reason; past the brake's
run limit the sink stops loudly and commits nothing past the last good batch."""

from __future__ import annotations

import asyncio
import json

import grpc
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.partitioner import murmur2
from aiokafka.structs import TopicPartition

from ingest.sink.dlq import SinkHalted
from ingest.store.clickhouse import ClickHouseStore
from schemas import records
from tests.e2e.kafka.conftest import Broker, KafkaReceiver, RunningSink
from tests.e2e.kafka.helpers import count, read_records, wait_until
from tests.ingest.helpers import grpc_export
from tests.otel_emit import Evaluation, export_request, record_spans

pytestmark = [pytest.mark.kafka, pytest.mark.clickhouse]


PARTITIONS = 4
# A partition no record of stream "p" is on, so its offsets are the poison's alone.
POISON_PARTITION = ((murmur2(b"p") & 0x7FFFFFFF) % PARTITIONS + 1) % PARTITIONS


async def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(topic, value, key=b"x", partition=POISON_PARTITION)
    finally:
        await producer.stop()


async def _committed(bootstrap: str, group: str, tp: TopicPartition) -> int | None:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
    await consumer.start()
    try:
        return await consumer.committed(tp)  # type: ignore[no-any-return]
    finally:
        await consumer.stop()


def _future_version() -> bytes:
    body = json.loads(
        records.encode(
            records.PoisonLetter(
                reason="x",
                dead_lettered_at="2026-11-30T00:00:00Z",  # type: ignore[arg-type]
                source_topic="t",
                source_partition=0,
                source_offset=0,
            )
        )
    )
    body["schema_version"] = max(records.SUPPORTED_VERSIONS) + 1
    return json.dumps(body).encode()


def test_poison_is_dead_lettered_and_the_brake_stops_the_sink(
    broker: Broker,
    names: dict[str, str],
    store: ClickHouseStore,
    kafka_receiver: KafkaReceiver,
) -> None:
    sink = RunningSink(broker, names, store, sink_max_invalid_run=3)
    topic, dlq = names["kafka_records_topic"], names["kafka_dead_letter_topic"]
    try:
        payload = export_request(record_spans([Evaluation("p", 0), Evaluation("p", 1)]))
        reply = grpc_export(kafka_receiver.grpc_endpoint, payload.SerializeToString())
        assert reply.code is grpc.StatusCode.OK
        poison = [b"\x00\x01 not json", _future_version(), b'{"schema_version":1,"kind":"batch"}']
        asyncio.run(_produce(broker.bootstrap, topic, poison))
        wait_until(lambda: count(store) == 2, what="good records stored")

        letters = asyncio.run(read_records(broker.bootstrap, dlq, 3))
        assert all(isinstance(letter, records.PoisonLetter) for letter in letters)
        reasons = sorted(letter.reason for letter in letters)  # type: ignore[union-attr]
        assert reasons[0].startswith("batch: receipt_id: Field required")
        assert reasons[1].startswith("not JSON")
        supported = ",".join(str(v) for v in sorted(records.SUPPORTED_VERSIONS))
        newer = max(records.SUPPORTED_VERSIONS) + 1
        assert reasons[2] == f"schema_version {newer} is not supported (this build: {supported})"
        assert {letter.value for letter in letters} == set(poison)  # type: ignore[union-attr]
        partition = TopicPartition(topic, POISON_PARTITION)
        group = names["sink_group"]
        # The letters were acked before their offsets were committed.
        wait_until(
            lambda: asyncio.run(_committed(broker.bootstrap, group, partition)) == 3,
            what="poison offsets committed",
        )

        # A valid record after the poison ends that run (only records-topic records count).
        payload = export_request(record_spans([Evaluation("p", 2)], seed=2))
        reply = grpc_export(kafka_receiver.grpc_endpoint, payload.SerializeToString())
        assert reply.code is grpc.StatusCode.OK
        wait_until(lambda: count(store) == 3, what="the run-ending record stored")

        asyncio.run(_produce(broker.bootstrap, topic, [b"junk"] * 4))  # a run of 4 > 3
        with pytest.raises(SinkHalted, match="4 invalid records in a row"):
            sink.call(sink.service.wait())
        assert sink.service.halted is not None
        # Junk at offsets 3..6: 3, 4, 5 were dead-lettered and committed, 6 tripped the
        # brake and is left for a fixed sink to read again.
        assert asyncio.run(_committed(broker.bootstrap, group, partition)) == 6
        assert len(asyncio.run(read_records(broker.bootstrap, dlq, 6))) == 6
    finally:
        sink.stop()
