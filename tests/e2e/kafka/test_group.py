"""Two receivers and a consumer group of two sinks (one process, one shared chDB
store): gap accounting stays exact, also across a rebalance mid-stream."""

from __future__ import annotations

import concurrent.futures
import random

import grpc
import pytest

from ingest.store.clickhouse import ClickHouseStore
from tests.e2e.kafka.conftest import Broker, KafkaReceiver, RunningSink
from tests.e2e.kafka.helpers import accepted_ordinals, count, wait_until
from tests.ingest.helpers import grpc_export
from tests.otel_emit import Evaluation, Item, Sentinel, export_request, record_spans

pytestmark = [pytest.mark.kafka, pytest.mark.clickhouse, pytest.mark.e2e]

STREAMS = 8
PER_STREAM = 30


def _plan(seed: int = 11) -> tuple[list[list[Item]], set[tuple[str, int]]]:
    """Requests of interleaved streams; each stream drops some ordinals (client-side
    losses), which must show up as gaps, never be filled or doubled."""
    rng = random.Random(seed)
    sent: set[tuple[str, int]] = set()
    items: list[Item] = []
    for s in range(STREAMS):
        for seq in range(PER_STREAM):
            if rng.random() < 0.15 and seq != PER_STREAM - 1:
                continue  # lost in the client's buffer
            stream = f"g{s}"
            item: Item = Sentinel(stream, seq) if seq % 10 == 9 else Evaluation(stream, seq)
            items.append(item)
            sent.add((stream, seq))
    rng.shuffle(items)
    requests = [items[i : i + 7] for i in range(0, len(items), 7)]
    return requests, sent


def _assignments(*sinks: RunningSink) -> list[set[object]]:
    out = []
    for running in sinks:
        sink = running.service.sink
        out.append(set(sink._consumer.assignment()) if sink is not None else set())
    return out


def test_two_receivers_two_sinks_exact_gap_accounting(
    broker: Broker, names: dict[str, str], store: ClickHouseStore
) -> None:
    receivers = [KafkaReceiver(broker, names), KafkaReceiver(broker, names)]
    sink_a = RunningSink(broker, names, store)
    sink_b = RunningSink(broker, names, store)
    requests, sent = _plan()
    try:
        wait_until(
            lambda: all(len(a) == 4 for a in _assignments(sink_a, sink_b)),
            timeout=60,
            what="both members to own half of the 8 partitions",
        )
        a, b = _assignments(sink_a, sink_b)
        assert not a & b

        def send(index: int) -> grpc.StatusCode:
            endpoint = receivers[index % 2].grpc_endpoint
            payload = export_request(record_spans(requests[index], seed=index))
            return grpc_export(endpoint, payload.SerializeToString()).code

        half = len(requests) // 2
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            codes = list(pool.map(send, range(half)))
            wait_until(lambda: count(store, "emission_receipts") > 0, what="first rows")
            sink_b.stop()  # rebalance mid-stream: b finishes its batch, a takes over
            codes += list(pool.map(send, range(half, len(requests))))
        assert set(codes) == {grpc.StatusCode.OK}

        wait_until(lambda: accepted_ordinals(store) == sent, timeout=60, what="all stored")
    finally:
        for receiver in receivers:
            receiver.stop()
        sink_a.stop()
        sink_b.stop()

    records = store.query(
        "SELECT emission_stream, emission_seq, received_count, kind"
        " FROM holonograph.emission_records"
    ).rows
    assert {(s, q) for s, q, _, _ in records} == sent
    assert all(received == 1 for _, _, received, _ in records)
    gaps = store.query(
        "SELECT emission_stream, arrayFilter(x -> NOT has(groupArray(emission_seq), x),"
        " range(toUInt64(max(emission_seq) + 1))) AS missing"
        " FROM holonograph.emission_records GROUP BY emission_stream"
    ).rows
    expected_gaps = {
        f"g{s}": [q for q in range(PER_STREAM) if (f"g{s}", q) not in sent] for s in range(STREAMS)
    }
    assert {stream: list(missing) for stream, missing in gaps} == expected_gaps
    events = sum(1 for s, q in sent if q % 10 != 9)
    assert count(store) == events


def test_rebalance_while_a_members_store_is_down_abandons_safely(
    broker: Broker, names: dict[str, str], store: ClickHouseStore
) -> None:
    receiver = KafkaReceiver(broker, names)
    sink_a = RunningSink(broker, names, store)
    sink_b: RunningSink | None = None
    try:
        wait_until(lambda: len(_assignments(sink_a)[0]) == 8, timeout=60, what="a owns all")
        sink_a.faulty.fail()
        expected = set()
        for n in range(6):
            payload = export_request(record_spans([Evaluation(f"rb{n}", 0)], seed=n))
            code = grpc_export(receiver.grpc_endpoint, payload.SerializeToString()).code
            assert code is grpc.StatusCode.OK
            expected.add((f"rb{n}", 0))
        wait_until(lambda: sink_a.faulty.failed.is_set(), what="a's write failing")

        sink_b = RunningSink(broker, names, store)  # the rebalance revokes a's partitions
        abandoned = sink_a.service.sink_metrics.abandoned
        wait_until(lambda: abandoned._value.get() > 0, timeout=60, what="a abandoning")
        wait_until(
            lambda: all(len(a) == 4 for a in _assignments(sink_a, sink_b)),  # type: ignore[arg-type]
            timeout=60,
            what="the group to settle",
        )
        sink_a.faulty.heal()
        wait_until(lambda: accepted_ordinals(store) == expected, timeout=60, what="all stored")
    finally:
        receiver.stop()
        sink_a.stop()
        if sink_b is not None:
            sink_b.stop()
    rows = store.query("SELECT received_count FROM holonograph.emission_records").rows
    assert [n for (n,) in rows] == [1] * len(expected)
    assert count(store) == len(expected)
