"""Jobs the CLI schedules inside `serve`: stream status refreshes by itself, so a
silent stream turns `dead` without anyone asking (clock injected, no waiting)."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from opentelemetry.sdk.trace.export import SpanExportResult

from holonograph.jobs import periodic_jobs
from ingest.config import ServeConfig
from ingest.store import ClickHouseStore
from tests.conftest import RunningReceiver
from tests.otel_emit import BASE_NS, Evaluation, Sentinel, export_grpc, record_spans

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

EVENT_TIME = dt.datetime.fromtimestamp(BASE_NS / 1e9, dt.UTC)


class ManualClock:
    def __init__(self, now: dt.datetime) -> None:
        self.now = now

    def __call__(self) -> dt.datetime:
        return self.now


def _status(store: ClickHouseStore) -> dict[str, str]:
    rows = store.query("SELECT emission_stream, status FROM holonograph.stream_status FINAL").rows
    return dict(rows)


def _wait_for(condition, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "periodic job did not get there"
        time.sleep(0.02)


def test_serve_marks_a_silent_stream_dead_by_itself(store: ClickHouseStore) -> None:
    clock = ManualClock(EVENT_TIME + dt.timedelta(seconds=1))
    jobs = periodic_jobs(ServeConfig(status_refresh_seconds=0.05))
    receiver = RunningReceiver(store, periodic=jobs, clock=clock)
    try:
        spans = record_spans(
            [Evaluation("crashy", 0), Sentinel("crashy", 1, interval_ms=10_000),
             Evaluation("clean", 0), Sentinel("clean", 1, final=True)]
        )  # fmt: skip
        assert export_grpc(receiver.grpc_endpoint, spans) is SpanExportResult.SUCCESS
        _wait_for(lambda: _status(store) == {"crashy": "open", "clean": "closed-complete"})
        clock.now = EVENT_TIME + dt.timedelta(seconds=60)  # silent for > 3 x its 10 s interval
        _wait_for(lambda: _status(store).get("crashy") == "dead")
        assert _status(store)["clean"] == "closed-complete"
    finally:
        receiver.stop()
