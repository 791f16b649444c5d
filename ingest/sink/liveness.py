"""A sink never goes quiet unseen: per partition it holds, the records of the log not
yet in the store (lag: the log end minus the next offset to commit) and the time since
that last went down or reached zero (progress). A partition with lag and no progress
for `stall_seconds`, or a member that has waited that long for a partition assignment
(its group rebalancing, a dead member's session not yet expired), makes the sink
degraded: `/readyz` says which and why, the log says so once when it starts and once
when it ends, and both figures are metrics:

    holonograph_sink_partition_lag{topic, partition}
    holonograph_sink_partition_seconds_since_progress{topic, partition}

Label values are the partitions this member holds (bounded by the topics' partition
count), removed when they are revoked.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from aiokafka.structs import TopicPartition

from ingest.metrics import SinkMetrics

log = logging.getLogger(__name__)


@dataclass
class _Partition:
    progress_at: float
    lag: int = 0
    next_offset: int | None = None


class Liveness:
    def __init__(
        self, metrics: SinkMetrics, stall_seconds: float, monotonic: Callable[[], float]
    ) -> None:
        self._metrics = metrics
        self._stall = stall_seconds
        self._monotonic = monotonic
        self._partitions: dict[TopicPartition, _Partition] = {}
        # Since when this member has waited for an assignment (None: it has one, maybe
        # of no partition, when the group has more members than partitions).
        self._joining_since: float | None = monotonic()
        self._reported: str | None = None

    def assigned(self, partitions: Iterable[TopicPartition]) -> None:
        now = self._monotonic()
        self._joining_since = None
        for tp in partitions:
            if tp in self._partitions:
                continue
            state = self._partitions[tp] = _Partition(progress_at=now)
            labels = {"topic": tp.topic, "partition": str(tp.partition)}
            self._metrics.partition_idle.labels(**labels).set_function(self._since(state))
            self._metrics.partition_lag.labels(**labels).set(0)

    def _since(self, state: _Partition) -> Callable[[], float]:
        return lambda: self._monotonic() - state.progress_at

    def revoked(self, partitions: Iterable[TopicPartition]) -> None:
        """A rebalance began: until the next assignment, this member is joining."""
        self._joining_since = self._monotonic()
        for tp in partitions:
            if self._partitions.pop(tp, None) is not None:
                for gauge in (self._metrics.partition_lag, self._metrics.partition_idle):
                    gauge.remove(tp.topic, str(tp.partition))

    def observe(self, tp: TopicPartition, next_offset: int, log_end: int) -> None:
        """`next_offset`: the first offset not yet in the store (the first one held, or
        the position when nothing of it is held)."""
        state = self._partitions.get(tp)
        if state is None:
            return
        state.lag = max(0, log_end - next_offset)
        if state.lag == 0 or (state.next_offset is not None and next_offset > state.next_offset):
            state.progress_at = self._monotonic()
        state.next_offset = next_offset
        self._metrics.partition_lag.labels(topic=tp.topic, partition=str(tp.partition)).set(
            state.lag
        )

    def stalled(self) -> str | None:
        """Why this member makes no progress, or None; logs when that changes."""
        now = self._monotonic()
        problems = [
            f"{tp.topic}:{tp.partition} has {state.lag} record(s) of lag and no progress"
            f" for {now - state.progress_at:.0f}s"
            for tp, state in sorted(self._partitions.items())
            if state.lag > 0 and now - state.progress_at >= self._stall
        ]
        if self._joining_since is not None and now - self._joining_since >= self._stall:
            problems.append(
                f"no partition assigned for {now - self._joining_since:.0f}s: the group is"
                " rebalancing (a member that died keeps its partitions until its session"
                " expires; a restart with the same --group-instance-id takes them back)"
            )
        reason = "; ".join(problems) or None
        if (reason is None) != (self._reported is None):
            if reason is None:
                log.warning("sink making progress again")
            else:
                log.warning("sink degraded: %s", reason)
        self._reported = reason
        return reason
