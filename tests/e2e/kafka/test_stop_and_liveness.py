"""Stop means stop, and a sink never goes quiet unseen (docs/kafka.md, "Stopping" and
"Liveness").

`holonograph sink` exits within `--stop-timeout` on SIGTERM while the broker does not
answer (SIGSTOP), a second Ctrl-C exits at once, `serve --kafka` stops within its bound
with a request waiting on that broker, and nothing acknowledged is lost: a sink started
afterwards stores every record once. A sink restarted after a crash says `degraded`
while it waits for its partitions and while it holds them with lag and no progress,
then catches up and is ready again. A committed offset the log no longer has resumes
from the earliest record."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import grpc
import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from ingest.store.clickhouse import ClickHouseStore
from tests.e2e.kafka.conftest import Broker, KafkaReceiver, RunningSink
from tests.e2e.kafka.helpers import count, wait_until
from tests.e2e.kafka.test_cli_processes import Process, _count, _kafka_flags
from tests.holonograph.cli.test_stopping import stop as signalled
from tests.ingest.helpers import grpc_export
from tests.otel_emit import Evaluation, export_request, record_spans

pytestmark = [pytest.mark.kafka, pytest.mark.e2e, pytest.mark.clickhouse]

STOP_TIMEOUT = 4.0
# Process exit after the bound: interpreter teardown, on a shared, noisy machine.
SLACK = 2.0


def produce(receiver: KafkaReceiver, stream: str, events: int, seed: int) -> None:
    items = [Evaluation(stream, seq) for seq in range(events)]
    payload = export_request(record_spans(items, seed=seed)).SerializeToString()
    assert grpc_export(receiver.grpc_endpoint, payload).code is grpc.StatusCode.OK


def sink_process(
    broker: Broker, names: dict[str, str], data_dir: Path, *flags: str, **env: str
) -> Process:
    return Process(
        ["sink", *_kafka_flags(broker, names), "--data-dir", str(data_dir),
         "--group", names["sink_group"], "--batch-seconds", "0.05",
         "--stop-timeout", str(STOP_TIMEOUT), "--metrics-port", "0", *flags],
        5,
        env={"HOLONOGRAPH_SINK_SESSION_TIMEOUT_MS": "6000", **env},
    )  # fmt: skip


@pytest.fixture
def paused(broker: Broker) -> Iterator[Broker]:
    """The broker, to pause; resumed whatever the test does."""
    yield broker
    broker.resume()


@pytest.mark.tansu_only("stops the broker with SIGSTOP")
def test_sink_stops_within_its_bound_while_the_broker_is_stopped_and_loses_nothing(
    paused: Broker, names: dict[str, str], kafka_receiver: KafkaReceiver, tmp_path: Path
) -> None:
    data_dir = tmp_path / "sink-data"
    first = sink_process(paused, names, data_dir)
    produce(kafka_receiver, "before", 20, seed=1)
    wait_until(lambda: _count(data_dir) == 20, timeout=60, what="the first records stored")
    produce(kafka_receiver, "during", 20, seed=2)  # acknowledged; maybe not yet committed
    paused.pause()
    seconds, _, stderr = signalled(first.process, signal.SIGTERM)
    code = first.process.returncode
    assert seconds <= STOP_TIMEOUT + SLACK, stderr
    assert code in (0, 130), stderr
    assert f"stopping (at most {STOP_TIMEOUT:g}s" in stderr

    paused.resume()
    # This one is about loss, not the bound: a roomier stop than the first sink's rides
    # out a rebalance the first member's expiring session may start meanwhile.
    second = sink_process(paused, names, data_dir, "--stop-timeout", "15")
    try:
        wait_until(lambda: _count(data_dir) == 40, timeout=90, what="every record, once")
        assert _count(data_dir, "evaluation_events", "FINAL") == 40
    finally:
        code, stderr = second.stop()
    assert code == 0, stderr


async def _uncommitted(bootstrap: str, group: str, topic: str) -> int:
    """Records of `topic` past `group`'s committed offsets (-1 before the topic exists)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
    await consumer.start()
    try:
        await consumer.topics()
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        if not partitions:
            return -1
        ends = await consumer.end_offsets(partitions)
        return sum([ends[tp] - (await consumer.committed(tp) or 0) for tp in partitions])
    finally:
        await consumer.stop()


class _LeaveUnanswered(AIOKafkaConsumer):  # type: ignore[misc]
    """A member whose group leave the broker never answers (a rebalance it holds, or a
    broker gone at that moment); `close` stops it for real after the test."""

    made: ClassVar[list[_LeaveUnanswered]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.made.append(self)

    async def stop(self) -> None:
        await asyncio.Event().wait()

    async def close(self) -> None:
        await AIOKafkaConsumer.stop(self)


def test_a_sink_with_everything_committed_stops_gracefully_when_its_leave_is_unanswered(
    broker: Broker,
    names: dict[str, str],
    kafka_receiver: KafkaReceiver,
    store: ClickHouseStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = RunningSink(broker, names, store, consumer_class=_LeaveUnanswered)
    try:
        produce(kafka_receiver, "settled", 20, seed=3)
        wait_until(lambda: count(store) == 20, timeout=60, what="the records stored")
        topic, group = names["kafka_records_topic"], names["sink_group"]
        wait_until(
            lambda: asyncio.run(_uncommitted(broker.bootstrap, group, topic)) == 0,
            timeout=30,
            what="every record committed",
        )
        with caplog.at_level(logging.WARNING, logger="ingest.service.sink"):
            graceful = sink.call(sink.service.stop(2.0))
        assert graceful, caplog.text
        assert "every record taken is stored and committed" in caplog.text
        assert "stay uncommitted" not in caplog.text
    finally:
        for member in _LeaveUnanswered.made:
            sink.call(member.close())
        sink.close()


class _CommitUnanswered(AIOKafkaConsumer):  # type: ignore[misc]
    """A member whose offset commits the broker never answers (aiokafka would retry one
    for as long as the broker keeps it waiting)."""

    async def commit(self, offsets: Any = None) -> None:
        await asyncio.Event().wait()


def test_an_unanswered_offset_commit_is_bounded_and_the_next_member_rereads_without_loss(
    broker: Broker,
    names: dict[str, str],
    kafka_receiver: KafkaReceiver,
    store: ClickHouseStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    first = RunningSink(broker, names, store, consumer_class=_CommitUnanswered)
    try:
        with caplog.at_level(logging.WARNING, logger="ingest.sink.consume"):
            produce(kafka_receiver, "unanswered", 20, seed=4)
            wait_until(lambda: count(store) == 20, timeout=60, what="the records stored")
            wait_until(
                lambda: "offset commit failed" in caplog.text, timeout=30, what="the commit bound"
            )
            # The loop went on past the unanswered commit: the stop is graceful, in time.
            graceful = first.call(first.service.stop(8.0))
        assert graceful, caplog.text
        assert "offset commit failed (records will be redelivered): not answered within 2s" in (
            caplog.text
        )
    finally:
        first.close()
    topic, group = names["kafka_records_topic"], names["sink_group"]
    assert asyncio.run(_uncommitted(broker.bootstrap, group, topic)) > 0  # the request's records
    second = RunningSink(broker, names, store)
    try:
        wait_until(
            lambda: asyncio.run(_uncommitted(broker.bootstrap, group, topic)) == 0,
            timeout=60,
            what="the next member's commit",
        )
        assert count(store) == 20  # read again, collapsed: once each
    finally:
        second.stop()


@pytest.mark.tansu_only("stops the broker with SIGSTOP")
def test_a_second_ctrl_c_exits_at_once(
    paused: Broker, names: dict[str, str], tmp_path: Path
) -> None:
    sink = sink_process(paused, names, tmp_path / "sink-data", "--stop-timeout", "60")
    paused.pause()
    seconds, _, stderr = signalled(sink.process, signal.SIGINT, signal.SIGINT)
    code = sink.process.returncode
    assert seconds <= SLACK, stderr
    assert code == 130
    assert "SIGINT again: exiting now; records not yet committed stay in Kafka" in stderr


@pytest.mark.tansu_only("stops the broker with SIGSTOP")
def test_serve_kafka_stops_within_its_bound_with_a_request_waiting_on_the_broker(
    paused: Broker, names: dict[str, str]
) -> None:
    serve = Process(
        ["serve", *_kafka_flags(paused, names), "--grpc-port", "0", "--http-port", "0",
         "--kafka-timeout-ms", "60000", "--stop-timeout", str(STOP_TIMEOUT)],
        4,
    )  # fmt: skip
    endpoint = f"127.0.0.1:{serve.port('OTLP/gRPC')}"
    admin = serve.port("admin")
    paused.pause()
    payload = export_request(record_spans([Evaluation("stuck", 0)])).SerializeToString()
    waiting = threading.Thread(target=grpc_export, args=(endpoint, payload), daemon=True)
    waiting.start()

    def waiting_for_acks() -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=5) as reply:
            text = reply.read().decode()
        return any(
            line.startswith("holonograph_kafka_inflight_bytes ") and float(line.split()[1]) > 0
            for line in text.splitlines()
        )

    wait_until(waiting_for_acks, timeout=30, what="the request in the receiver, waiting for acks")
    seconds, _, stderr = signalled(serve.process, signal.SIGTERM)
    code = serve.process.returncode
    assert seconds <= STOP_TIMEOUT + SLACK, stderr
    assert code in (0, 130), stderr


def readyz(port: int) -> dict[str, Any]:
    """The body of `/readyz`, 200 (ready, degraded) or 503 (not ready)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as reply:
            body: dict[str, Any] = json.loads(reply.read())
    except urllib.error.HTTPError as err:
        body = json.loads(err.read())
    return body


def test_a_killed_and_restarted_sink_is_degraded_until_it_catches_up(
    broker: Broker,
    names: dict[str, str],
    kafka_receiver: KafkaReceiver,
    store: ClickHouseStore,
    tmp_path: Path,
) -> None:
    """The first member dies (SIGKILL) holding every partition; its replacement, with
    the same `--group-instance-id`, waits for them, then holds them with lag while the
    store does not answer: degraded both times, with the reason, and ready once it has
    caught up."""
    member, session = "sink-1", "10000"
    dead = sink_process(
        broker, names, tmp_path / "dead", "--group-instance-id", member,
        HOLONOGRAPH_SINK_SESSION_TIMEOUT_MS=session,
    )  # fmt: skip
    metrics_port = dead.port("metrics")

    def holds_partitions() -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics") as reply:
            return "holonograph_sink_partition_lag{" in reply.read().decode()

    wait_until(holds_partitions, timeout=60, what="the first member to hold its partitions")
    dead.process.send_signal(signal.SIGKILL)
    dead.process.communicate(timeout=30)
    produce(kafka_receiver, "backlog", 30, seed=3)

    started = time.monotonic()
    restarted = RunningSink(
        broker, names, store, sink_group_instance_id=member, sink_stall_seconds=1.0,
        sink_session_timeout_ms=int(session),
    )  # fmt: skip
    restarted.faulty.hold()  # the store answers nothing: no progress
    try:
        seen: list[str] = []

        def degraded_by(words: str) -> bool:
            body = readyz(restarted.admin_port)
            seen.append(body.get("reason", body["status"]))
            return body["status"] == "degraded" and words in body["reason"]

        if not broker.external:  # Kafka gives a static member its partitions back at once
            wait_until(lambda: degraded_by("no partition assigned"), what="degraded, joining")
        wait_until(
            lambda: (
                "holonograph_sink_partition_lag{" in restarted.service.metrics.exposition().decode()
            ),
            timeout=60,
            what="the partitions back",
        )
        assigned_after = time.monotonic() - started
        wait_until(lambda: degraded_by("record(s) of lag and no progress"),
                   what="degraded while it holds the backlog")  # fmt: skip
        metrics = restarted.service.metrics.exposition().decode()
        assert "holonograph_sink_partition_seconds_since_progress{" in metrics
        released = time.monotonic()
        restarted.faulty.release()
        wait_until(lambda: count(store) == 30, timeout=30, what="the backlog stored")
        wait_until(lambda: readyz(restarted.admin_port) == {"status": "ready"},
                   what="ready once caught up")  # fmt: skip
        caught_up = time.monotonic() - released
    finally:
        restarted.faulty.release()
        restarted.stop()
    # The restarted member did not wait for its dead session to expire first: that wait
    # and a join round after it take at least 1.5 sessions on Tansu (its own join alone
    # about 0.8), and at least one on Kafka (where a static rejoin is at once).
    limit = (1.0 if broker.external else 1.3) * int(session) / 1000
    assert assigned_after < limit, (assigned_after, seen)
    assert caught_up < 10.0, (caught_up, seen)


async def _commit_past_the_end(bootstrap: str, topic: str, group: str, partitions: int) -> None:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.commit({tp: 1_000_000 for tp in tps})
    finally:
        await consumer.stop()


def test_an_offset_the_log_does_not_have_resumes_from_the_earliest_record(
    broker: Broker,
    names: dict[str, str],
    kafka_receiver: KafkaReceiver,
    store: ClickHouseStore,
) -> None:
    """The group's committed offsets lie past the log's end (a log restarted or
    truncated under it): the sink reads from the earliest record kept, not the latest."""
    if not broker.external:
        pytest.skip(
            "Tansu answers a fetch past the log end with no records, not OFFSET_OUT_OF_RANGE,"
            " and has no DeleteRecords: run with HOLONOGRAPH_TEST_BACKEND=containers or"
            " HOLONOGRAPH_TEST_KAFKA=host:port"
        )
    produce(kafka_receiver, "kept", 12, seed=4)
    asyncio.run(
        _commit_past_the_end(broker.bootstrap, names["kafka_records_topic"],
                             names["sink_group"], kafka_receiver.config.kafka_partitions)
    )  # fmt: skip
    sink = RunningSink(broker, names, store)
    try:
        wait_until(lambda: count(store) == 12, timeout=60, what="the records before the offset")
    finally:
        sink.stop()
