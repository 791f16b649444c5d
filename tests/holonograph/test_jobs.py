"""Jobs the CLI schedules inside `serve`: stream status refreshes by itself, so a
silent stream turns `dead` without anyone asking (clock injected, no waiting); a
failing job degrades `/readyz` with its reason and recovers by itself."""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
import urllib.error
import urllib.request

import pytest
from opentelemetry.sdk.trace.export import SpanExportResult

from holonograph.jobs import periodic_jobs
from ingest.store.clickhouse import ClickHouseStore
from testkit.faulty_store import FaultyStore
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
    jobs = periodic_jobs(0.05)
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


def _readyz(receiver: RunningReceiver) -> tuple[int, dict[str, str]]:
    try:
        with urllib.request.urlopen(f"{receiver.admin_endpoint}/readyz", timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_a_failing_job_degrades_readyz_then_recovers_by_itself(
    store: ClickHouseStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="ingest.service.periodic")
    jobs_store = FaultyStore(store)  # the seam: the store the periodic jobs run on
    receiver = RunningReceiver(store, periodic=periodic_jobs(0.02), job_store=jobs_store)
    try:
        _wait_for(lambda: receiver.service.jobs.health["completeness"].last_success is not None)
        assert _readyz(receiver) == (200, {"status": "ready"})
        jobs_store.fail("store is down (injected)")
        _wait_for(lambda: receiver.service.jobs.health["completeness"].failures >= 3)
        code, body = _readyz(receiver)
        assert (code, body["status"]) == (200, "degraded")  # still taking data
        assert body["reason"].startswith("periodic job completeness failing since ")
        assert body["reason"].endswith(": StoreDown: store is down (injected)")
        spans = record_spans([Evaluation("during", 0), Sentinel("during", 1, final=True)])
        assert export_grpc(receiver.grpc_endpoint, spans) is SpanExportResult.SUCCESS
        metrics = urllib.request.urlopen(f"{receiver.admin_endpoint}/metrics").read().decode()
        assert 'holonograph_periodic_job_failing{job="completeness"} 1.0' in metrics
        jobs_store.heal()
        _wait_for(lambda: _readyz(receiver) == (200, {"status": "ready"}))
        _wait_for(lambda: _status(store).get("during") == "closed-complete")
    finally:
        receiver.stop()
    lines = [r for r in caplog.records if r.name == "ingest.service.periodic"]
    assert [r.getMessage() for r in lines][:1] == [
        "periodic job completeness failed (retrying every 0.02s; /readyz says degraded):"
        " StoreDown: store is down (injected)"
    ]  # one line for the whole run of failures, not one per period
    assert lines[1].getMessage().startswith("periodic job completeness recovered after ")
    assert len(lines) == 2 and all(r.exc_info is None for r in lines)
