"""A sink never goes quiet unseen (`ingest.sink.liveness`), on an injected clock: lag
and time since progress per held partition are metrics, a partition with lag and no
progress for the stall time (or a member waiting that long for an assignment) is a
reason to be degraded, logged once when it starts and once when it ends, and a
revoked partition's series go away. The same against a live sink and broker:
`tests/e2e/kafka/test_stop_and_liveness.py`."""

from __future__ import annotations

import logging

import pytest
from aiokafka.structs import TopicPartition
from prometheus_client import CollectorRegistry, generate_latest

from ingest.metrics import SinkMetrics
from ingest.sink.liveness import Liveness

P0, P1 = TopicPartition("holonograph.records", 0), TopicPartition("holonograph.records", 1)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def exposed(registry: CollectorRegistry) -> dict[str, float]:
    """The per-partition series, by name and partition."""
    found = {}
    for line in generate_latest(registry).decode().splitlines():
        if line.startswith("holonograph_sink_partition_"):
            name, value = line.rsplit(" ", 1)
            found[name.replace(',topic="holonograph.records"', "")] = float(value)
    return found


def test_lag_without_progress_for_the_stall_time_degrades_and_progress_ends_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, registry = Clock(), CollectorRegistry()
    liveness = Liveness(SinkMetrics(registry), stall_seconds=15, monotonic=clock)
    liveness.assigned([P0, P1])
    liveness.observe(P0, next_offset=10, log_end=850)
    liveness.observe(P1, next_offset=5, log_end=5)
    clock.now += 14.9
    assert liveness.stalled() is None
    caplog.set_level(logging.WARNING, "ingest.sink.liveness")
    clock.now += 1.1
    liveness.observe(P0, next_offset=10, log_end=860)  # more lag, still no progress
    reason = "holonograph.records:0 has 850 record(s) of lag and no progress for 16s"
    assert liveness.stalled() == reason
    assert exposed(registry) == {
        'holonograph_sink_partition_lag{partition="0"}': 850.0,
        'holonograph_sink_partition_lag{partition="1"}': 0.0,
        'holonograph_sink_partition_seconds_since_progress{partition="0"}': 16.0,
        'holonograph_sink_partition_seconds_since_progress{partition="1"}': 16.0,
    }
    clock.now += 5
    assert liveness.stalled() is not None  # still degraded: logged once, not again
    liveness.observe(P0, next_offset=500, log_end=860)  # progress
    assert liveness.stalled() is None
    assert [r.getMessage() for r in caplog.records] == [
        f"sink degraded: {reason}",
        "sink making progress again",
    ]
    assert (
        exposed(registry)['holonograph_sink_partition_seconds_since_progress{partition="0"}'] == 0
    )


def test_a_partition_with_no_lag_is_never_stalled() -> None:
    clock = Clock()
    liveness = Liveness(SinkMetrics(CollectorRegistry()), stall_seconds=15, monotonic=clock)
    liveness.assigned([P0])
    liveness.observe(P0, next_offset=7, log_end=7)
    clock.now += 3600
    assert liveness.stalled() is None


def test_waiting_for_an_assignment_degrades_and_revoked_partitions_leave_the_metrics() -> None:
    clock, registry = Clock(), CollectorRegistry()
    liveness = Liveness(SinkMetrics(registry), stall_seconds=15, monotonic=clock)
    clock.now += 15
    reason = liveness.stalled()
    assert reason is not None and reason.startswith("no partition assigned for 15s")
    liveness.assigned([P0, P1])
    assert liveness.stalled() is None
    liveness.revoked([P0, P1])  # a rebalance: joining again
    assert exposed(registry) == {}
    clock.now += 14
    assert liveness.stalled() is None
    clock.now += 1
    assert (liveness.stalled() or "").startswith("no partition assigned for 15s")
    liveness.observe(P0, next_offset=0, log_end=100)  # not held: ignored
    assert exposed(registry) == {}
