"""Through the real receiver with the official OTLP exporters: a simulated client
with a bounded buffer drops its oldest events under a burst, and the accounting
finds exactly the seqs it dropped."""

from __future__ import annotations

import datetime as dt
from collections import deque
from dataclasses import dataclass, field

import pytest
from opentelemetry.sdk.trace.export import SpanExportResult

from processors.completeness import job
from tests.conftest import RunningReceiver
from tests.otel_emit import (
    BASE_NS,
    Evaluation,
    Item,
    Sentinel,
    export_grpc,
    export_http,
    record_spans,
)

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

SECOND_NS = 1_000_000_000


@dataclass
class BufferedClient:
    """The SDK's emit path in miniature: seq assigned at record time, a ring buffer
    that drops its oldest entry when full (counting it), sentinels carrying the
    window counters, and a final sentinel on graceful shutdown."""

    stream: str
    capacity: int
    endpoint: str
    transport: str = "grpc"
    buffer: deque[Item] = field(default_factory=deque)
    dropped_seqs: list[int] = field(default_factory=list)
    seq: int = 0
    offered: int = 0
    delivered: int = 0
    window_dropped: int = 0
    exports: int = 0

    def _next(self) -> tuple[int, int]:
        seq, self.seq = self.seq, self.seq + 1
        return seq, BASE_NS + seq * SECOND_NS

    def _make_room(self) -> None:
        if len(self.buffer) == self.capacity:
            oldest = self.buffer.popleft()
            self.dropped_seqs.append(oldest.seq)
            self.window_dropped += 1

    def record(self, surface: str = "classify-intent", run_mode: str | None = "production") -> None:
        seq, end = self._next()
        self.offered += 1
        self._make_room()
        self.buffer.append(
            Evaluation(self.stream, seq, surface=surface, run_mode=run_mode, end_ns=end)
        )

    def sentinel(self, final: bool = False) -> None:
        seq, end = self._next()
        self._make_room()  # before counting, so the window includes its own eviction
        stamp = dt.datetime.fromtimestamp(end / SECOND_NS, dt.UTC)
        counters = {
            "offered": self.offered,
            "delivered": self.delivered,
            "dropped": self.window_dropped,
            "failed": 0,
            "window_start": (stamp - dt.timedelta(seconds=10)).isoformat(),
            "window_end": stamp.isoformat(),
        }
        self.offered = self.delivered = self.window_dropped = 0
        self.buffer.append(
            Sentinel(
                self.stream, seq, final=final, interval_ms=10_000, counters=counters, end_ns=end
            )
        )

    def flush(self, retry: bool = False) -> None:
        items = list(self.buffer)
        self.buffer.clear()
        spans = record_spans(items, seed=self.exports)
        self.exports += 1
        for _ in range(2 if retry else 1):
            if self.transport == "grpc":
                result = export_grpc(self.endpoint, spans)
            else:
                result = export_http(self.endpoint, spans)
            assert result is SpanExportResult.SUCCESS
        self.delivered += sum(isinstance(i, Evaluation) for i in items)


def ranges(seqs: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s in sorted(seqs):
        if out and out[-1][1] == s - 1:
            out[-1] = (out[-1][0], s)
        else:
            out.append((s, s))
    return out


def test_burst_drops_are_found_exactly(receiver: RunningReceiver) -> None:
    client = BufferedClient("strm_burst", capacity=8, endpoint=receiver.grpc_endpoint)
    for _ in range(5):
        client.record()
    client.sentinel()
    client.flush()
    for i in range(40):  # a burst the drain cannot keep up with: seqs 6-37 dropped
        client.record(surface="draft-reply" if i % 3 else "classify-intent")
    client.flush(retry=True)  # the exporter retried the whole request: 8 duplicates
    client.record(run_mode=None)  # rejected (no run mode) but it arrived: not a gap
    client.sentinel()  # reports the burst's 32 drops
    client.flush()
    for _ in range(20):  # seqs 48-59 dropped
        client.record()
    client.sentinel(final=True)  # shutdown(): evicts seq 60, reports 13 drops, final
    client.flush()

    assert client.dropped_seqs == [*range(6, 38), *range(48, 61)]
    now = dt.datetime.now(dt.UTC)
    (acc,) = job.account_streams(receiver.store, now)
    assert acc.stream == "strm_burst"
    assert [(g.seq_from, g.seq_to) for g in acc.missing_ranges] == ranges(client.dropped_seqs)
    assert acc.missing == len(client.dropped_seqs)
    assert acc.expected == client.seq and acc.final_seen and acc.status == "closed-lossy"
    assert acc.duplicates == 8 and acc.quarantined == 1
    assert acc.loss.reported_dropped == len(client.dropped_seqs)
    assert acc.loss.lost_after_client == 0 and not acc.loss.mismatch

    summary = job.refresh_stream_status(receiver.store, now)
    assert summary.streams == 1
    row = receiver.store.query(
        "SELECT status, missing, missing_ranges FROM holonograph.stream_status FINAL"
    ).rows[0]
    assert row[0] == "closed-lossy" and row[1] == len(client.dropped_seqs)
    biased = job.account_windows(receiver.store, "minute")
    assert sum(w.missing for w in biased if w.scope == "stream") == len(client.dropped_seqs)
    assert {w.surface_id for w in biased if w.scope == "surface" and w.bias_flag} == {
        "classify-intent",
        "draft-reply",
    }


def test_crashed_client_goes_dead_on_the_injected_clock(receiver: RunningReceiver) -> None:
    client = BufferedClient(
        "strm_crash", capacity=4, endpoint=receiver.http_endpoint, transport="http"
    )
    for _ in range(3):
        client.record()
    client.sentinel()
    client.flush()
    for _ in range(6):  # then the process dies: the buffer is never flushed
        client.record()

    (acc,) = job.account_streams(receiver.store, dt.datetime.now(dt.UTC))
    assert acc.missing == 0 and not acc.final_seen
    last = acc.last_seen_at
    assert job.account_streams(receiver.store, last + dt.timedelta(seconds=29))[0].status == "open"
    assert job.account_streams(receiver.store, last + dt.timedelta(seconds=31))[0].status == "dead"
