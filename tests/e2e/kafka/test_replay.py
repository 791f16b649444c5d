"""Replay after a fix: quarantined spans (table) and dead letters (topic) go through
validation again, land once under their original receipt, and a second replay
changes nothing. The "fix" is simulated by patching the validator / record reader."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import grpc
import pytest
from aiokafka import AIOKafkaProducer
from click.testing import CliRunner

from holonograph.cli import cli
from ingest.handoff.embedded import EmbeddedHandoff
from ingest.handoff.kafka import KafkaHandoff
from ingest.replay import ReplayReport, replay_dead_letters, replay_quarantine
from ingest.service.config import MIB
from ingest.store.clickhouse import ClickHouseStore
from schemas import records
from tests.conftest import RunningReceiver
from tests.e2e.kafka.conftest import Broker, KafkaReceiver, RunningSink
from tests.e2e.kafka.helpers import count, wait_until
from tests.ingest.helpers import accept_run_mode_alias, grpc_export
from tests.otel_emit import Evaluation, export_request, record_spans

pytestmark = [pytest.mark.clickhouse]


def _accept_alias(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fix: the contract now accepts `prod` as an alias of `production`."""
    accept_run_mode_alias(monkeypatch, "prod")


def _payload(stream: str) -> bytes:
    items = [Evaluation(stream, 0), Evaluation(stream, 1, run_mode="prod"), Evaluation(stream, 2)]
    return export_request(record_spans(items, seed=3)).SerializeToString()


def _record_of(store: ClickHouseStore, stream: str, seq: int) -> dict[str, Any]:
    rows = store.query(
        "SELECT received_count, quarantined FROM holonograph.emission_records"
        " WHERE emission_stream = {s:String} AND emission_seq = {q:UInt64}",
        {"s": stream, "q": seq},
    ).dicts()
    assert len(rows) == 1
    return rows[0]


def _replay_table(store: ClickHouseStore) -> ReplayReport:
    async def run() -> ReplayReport:
        handoff = EmbeddedHandoff(store, max_inflight_bytes=16 * MIB)
        try:
            return await replay_quarantine(store, handoff)
        finally:
            await handoff.close()

    return asyncio.run(run())


def test_quarantine_table_replay_after_a_fix(
    store: ClickHouseStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver = RunningReceiver(store)
    try:
        assert grpc_export(receiver.grpc_endpoint, _payload("q")).code is grpc.StatusCode.OK
    finally:
        receiver.stop()
    assert count(store) == 2 and _record_of(store, "q", 1) == {
        "received_count": 1,
        "quarantined": True,
    }

    unfixed = _replay_table(store)
    assert (unfixed.seen, unfixed.replayed, unfixed.still_rejected) == (1, 0, 1)
    assert "is not one of" in next(iter(unfixed.reasons))

    _accept_alias(monkeypatch)
    for _ in range(2):  # the second replay changes nothing
        report = _replay_table(store)
        assert (report.seen, report.replayed, report.still_rejected) == (1, 1, 0)
        assert count(store) == 3
        assert _record_of(store, "q", 1) == {"received_count": 1, "quarantined": False}
    run_mode = store.query(
        "SELECT run_mode FROM holonograph.evaluation_events FINAL WHERE emission_seq = 1"
    ).scalar()
    assert run_mode == "production"


def test_replay_cli_needs_kafka_for_the_dead_letter_topic() -> None:
    result = CliRunner().invoke(cli, ["replay", "--from", "dead-letter"])
    assert result.exit_code == 2
    assert "give --kafka BOOTSTRAP" in result.output


NEWER = max(records.SUPPORTED_VERSIONS) + 1


def _newer_version_record() -> bytes:
    """A batch record as a newer receiver would write it (the next schema_version)."""
    event_batch = validate_one("v2")
    body = json.loads(records.encode(event_batch))
    body["schema_version"] = NEWER
    return json.dumps(body).encode()


def validate_one(stream: str) -> records.BatchRecord:
    from ingest.export.request import validate_request

    batch = validate_request(export_request(record_spans([Evaluation(stream, 0)], seed=9)))
    return records.BatchRecord(
        tenant_id="default",
        agents=None,
        receipt_id="r-v2",
        received_at="2026-11-30T14:00:00Z",  # type: ignore[arg-type]
        stream=stream,
        events=batch.events,
        emissions=batch.emissions,
    )


async def _replay_topic(broker: Broker, names: dict[str, str]) -> ReplayReport:
    topics = records_topics(names)
    handoff = KafkaHandoff(
        broker.bootstrap,
        topics,
        max_inflight_bytes=16 * MIB,
        max_message_bytes=1_000_000,
        idempotence=broker.idempotence,
    )
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    await producer.start()
    try:
        return await replay_dead_letters(broker.bootstrap, topics.dead_letter, handoff, producer)
    finally:
        await producer.stop()
        await handoff.close()


def records_topics(names: dict[str, str]) -> Any:
    from schemas.topics import Topics

    return Topics(
        records=names["kafka_records_topic"],
        dead_letter=names["kafka_dead_letter_topic"],
        partitions=4,
    )


def _written(sink: RunningSink, names: dict[str, str], consumed: int) -> bool:
    """The sink read `consumed` records from the records topic and holds none unwritten."""
    counter = sink.service.sink_metrics.consumed.labels(topic=names["kafka_records_topic"])
    running = sink.service.sink
    return counter._value.get() == consumed and running is not None and not running.held()


async def _produce(bootstrap: str, topic: str, value: bytes) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(topic, value, key=b"v2")
    finally:
        await producer.stop()


@pytest.mark.kafka
def test_dead_letter_topic_replay_after_a_fix(
    broker: Broker,
    names: dict[str, str],
    store: ClickHouseStore,
    kafka_receiver: KafkaReceiver,
    sink: RunningSink,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert grpc_export(kafka_receiver.grpc_endpoint, _payload("d")).code is grpc.StatusCode.OK
    asyncio.run(_produce(broker.bootstrap, names["kafka_records_topic"], _newer_version_record()))
    wait_until(
        lambda: count(store, "emission_receipts") == 3 and count(store, "quarantine") == 1,
        what="first pass stored",
    )
    assert _record_of(store, "d", 1)["quarantined"] == 1
    wait_until(lambda: _written(sink, names, 2), what="the v2 record dead-lettered")

    _accept_alias(monkeypatch)  # the fixed validator ...
    supported = records.SUPPORTED_VERSIONS | {NEWER}
    monkeypatch.setattr(records, "SUPPORTED_VERSIONS", supported)  # ... and reader
    for attempt in range(2):
        report = asyncio.run(_replay_topic(broker, names))
        # the quarantined span's letter and the sink's poison letter
        assert (report.seen, report.replayed, report.still_rejected) == (2, 2, 0), report
        wait_until(lambda: count(store) == 4, what="replayed records stored")
        expected = 2 + 2 * (attempt + 1)
        wait_until(lambda n=expected: _written(sink, names, n), what="replayed records written")
        assert _record_of(store, "d", 1) == {"received_count": 1, "quarantined": False}
        assert _record_of(store, "v2", 0) == {"received_count": 1, "quarantined": False}
