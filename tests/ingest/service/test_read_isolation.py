"""Reads never hold up ingest, are stopped by their limits, and stop when their client
goes away, on a live receiver: admin queries run on threads of their own, so a commit
completes while eight slow reads run (the probe of issue 23 stalled ingest ~40 s);
a runaway read stops at its limit with the limit named and the receiver carries on; a
client that disconnects or times out leaves nothing running in `system.processes`.
(The same through `holonograph query` and `serve` as processes:
tests/holonograph/cli/test_query_limits.py; ingest p99 under heavy reads:
bench/read_isolation.py.)"""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
import requests

from ingest.service.admin import ADMIN_FILE
from ingest.service.periodic import Periodic
from ingest.store.clickhouse import ClickHouseStore
from ingest.store.url import chdb_path
from schemas.store import Store
from tests.conftest import RunningReceiver
from tests.ingest.helpers import grpc_export
from tests.otel_emit import Evaluation, export_request, record_spans

pytestmark = [
    pytest.mark.clickhouse,
    pytest.mark.e2e,
    pytest.mark.chdb_only("the admin endpoint is published for an embedded store"),
]

# The test's own limit: every slow read ends by it, whatever else happens.
LIMIT_SECONDS = 20.0
READS = 8


def slow_read(probe: str) -> str:
    """A read that runs for hours (1e9 rows, 10 µs each) unless stopped: cheap in CPU,
    and it holds its thread the whole time, as the probe's `sleepEachRow` reads did."""
    return (
        f"SELECT count() AS n, '{probe}' AS probe FROM numbers(1000000000)"
        " WHERE NOT ignore(sleepEachRow(0.00001))"
    )


def running(watcher: ClickHouseStore, probe: str) -> int:
    """Statements with `probe` in the server's process list (spelled in two literals
    here, so this statement does not count itself)."""
    head, tail = probe[:4], probe[4:]
    return int(
        watcher.query(
            "SELECT count() FROM system.processes WHERE position(query, concat({h:String},"
            " {t:String})) > 0",
            {"h": head, "t": tail},
        ).scalar()
    )


def wait_until(condition: Callable[[], bool], seconds: float, what: str) -> None:
    """Poll a condition the server reports (not a sleep standing in for an event)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


class Admin:
    def __init__(self, store: ClickHouseStore) -> None:
        self.info = json.loads((chdb_path(store.url) / ADMIN_FILE).read_text())

    def query(
        self, sql: str, token: str = "read_token", timeout: float = 60, **body: Any
    ) -> requests.Response:
        return requests.post(
            f"{self.info['url']}/admin/query",
            data=json.dumps({"sql": sql, **body}),
            headers={"Authorization": f"Bearer {self.info[token]}"},
            timeout=timeout,
        )


@pytest.fixture
def live(store: ClickHouseStore) -> Iterator[tuple[RunningReceiver, Admin, ClickHouseStore]]:
    receiver = RunningReceiver(store, read_workers=READS, read_max_execution_time=LIMIT_SECONDS)
    watcher = store.reopen()
    try:
        yield receiver, Admin(store), watcher
    finally:
        watcher.close()
        receiver.stop()


def _export(receiver: RunningReceiver, stream: str) -> grpc.StatusCode:
    payload = export_request(record_spans([Evaluation(stream, 0)])).SerializeToString()
    code: grpc.StatusCode = grpc_export(receiver.grpc_endpoint, payload).code
    return code


def test_a_commit_completes_while_eight_slow_reads_run(
    live: tuple[RunningReceiver, Admin, ClickHouseStore],
) -> None:
    receiver, admin, watcher = live
    probe = f"probe-{secrets.token_hex(6)}"
    with concurrent.futures.ThreadPoolExecutor(READS) as clients:
        reads = [clients.submit(admin.query, slow_read(probe)) for _ in range(READS)]
        wait_until(lambda: running(watcher, probe) == READS, 30, "eight reads running")
        assert _export(receiver, "beside-reads") is grpc.StatusCode.OK
        stored = watcher.query(
            "SELECT count() FROM holonograph.evaluation_events"
            " WHERE emission_stream = 'beside-reads'"
        ).scalar()
        # The commit is in the store while every read still runs: it waited for none.
        assert (stored, running(watcher, probe)) == (1, READS)
        answers = [read.result(timeout=LIMIT_SECONDS + 30) for read in reads]
    assert {a.status_code for a in answers} == {422}
    assert {a.json()["limit"] for a in answers} == {"max_execution_time"}
    assert running(watcher, probe) == 0


@pytest.mark.parametrize(
    ("sql", "limits", "limit"),
    [
        ("SELECT count() FROM numbers(1000000000000)", {}, "max_rows_to_read"),
        (slow_read("limited"), {"max_execution_time": 1}, "max_execution_time"),
        ("SELECT groupArray(number) FROM numbers(100000000)", {}, "max_memory_usage"),
        ("SELECT number FROM numbers(5000)", {"max_result_rows": 1000}, "max_result_rows"),
    ],
    ids=["rows-to-read", "execution-time", "memory", "result-rows"],
)
def test_a_runaway_read_stops_at_its_limit_and_the_receiver_carries_on(
    store: ClickHouseStore, sql: str, limits: dict[str, int], limit: str
) -> None:
    receiver = RunningReceiver(store, read_max_memory_usage=200_000_000)
    try:
        admin = Admin(store)
        started = time.monotonic()
        reply = admin.query(sql, limits=limits)
        assert reply.status_code == 422, reply.text
        assert reply.json()["limit"] == limit
        assert time.monotonic() - started < 30
        # The receiver carries on: the same connections answer, and ingest works.
        assert admin.query("SELECT 1 AS one").json()["rows"] == [[1]]
        assert _export(receiver, "after-limit") is grpc.StatusCode.OK
    finally:
        receiver.stop()


def test_a_client_cannot_raise_the_owners_limits(store: ClickHouseStore) -> None:
    receiver = RunningReceiver(store, read_max_rows_to_read=1_000_000)
    try:
        reply = Admin(store).query(
            "SELECT count() FROM numbers(2000000)", limits={"max_rows_to_read": 0}
        )
        assert (reply.status_code, reply.json()["limit"]) == (422, "max_rows_to_read")
        refused = Admin(store).query("SELECT 1", limits={"max_threads": 64})
        assert refused.status_code == 400
        assert "unknown read limit" in refused.json()["error"]
    finally:
        receiver.stop()


def test_limits_a_client_does_not_name_are_the_owners(store: ClickHouseStore) -> None:
    """Asking for a lower time limit keeps the owner's raised rows limit (2e10): the
    query then stops on time, not at the default 1e10 rows."""
    receiver = RunningReceiver(store, read_max_rows_to_read=20_000_000_000)
    try:
        reply = Admin(store).query(
            "SELECT count() FROM numbers(15000000000)", limits={"max_execution_time": 0.5}
        )
        assert (reply.status_code, reply.json()["limit"]) == (422, "max_execution_time")
    finally:
        receiver.stop()


def test_a_client_that_goes_away_leaves_nothing_running(
    live: tuple[RunningReceiver, Admin, ClickHouseStore],
) -> None:
    _, admin, watcher = live
    for token in ("read_token", "write_token"):  # read-only and writing connections alike
        probe = f"gone-{secrets.token_hex(6)}"
        with concurrent.futures.ThreadPoolExecutor(1) as client:
            # The client's own deadline: it gives up after 2 s and closes its connection.
            abandoned = client.submit(admin.query, slow_read(probe), token, 2.0)
            wait_until(lambda p=probe: running(watcher, p) == 1, 30, "the read running")  # type: ignore[misc]
            with pytest.raises(requests.exceptions.ReadTimeout):
                abandoned.result(timeout=30)
        # Stopped in the store well before its own limit (20 s) would have ended it.
        started = time.monotonic()
        wait_until(lambda p=probe: running(watcher, p) == 0, 10, "the read to stop")  # type: ignore[misc]
        assert time.monotonic() - started < LIMIT_SECONDS / 2
    assert admin.query("SELECT 1 AS one").json()["rows"] == [[1]]


def test_requests_past_the_workers_and_their_queue_are_told_to_retry(
    store: ClickHouseStore,
) -> None:
    receiver = RunningReceiver(store, read_workers=1, read_max_execution_time=LIMIT_SECONDS)
    watcher = store.reopen()
    probe = f"busy-{secrets.token_hex(6)}"
    try:
        admin = Admin(store)
        with concurrent.futures.ThreadPoolExecutor(4) as clients:
            # One runs, three wait (WAITING_PER_WORKER); the fifth is answered at once.
            held = [clients.submit(admin.query, slow_read(probe), "read_token", 3.0)]
            wait_until(lambda: running(watcher, probe) == 1, 30, "the first read running")
            held += [
                clients.submit(admin.query, slow_read(probe), "read_token", 3.0) for _ in range(3)
            ]
            wait_until(lambda: _outstanding(receiver) == 4, 30, "three reads waiting")
            busy = admin.query("SELECT 1")
            assert busy.status_code == 503, busy.text
            assert busy.headers["Retry-After"] == "1"
            for client in held:
                with pytest.raises(requests.exceptions.ReadTimeout):
                    client.result(timeout=30)
        wait_until(lambda: running(watcher, probe) == 0, 10, "the reads to stop")
        wait_until(lambda: _outstanding(receiver) == 0, 10, "the queue to drain")
        assert admin.query("SELECT 1 AS one").json()["rows"] == [[1]]
    finally:
        watcher.close()
        receiver.stop()


def _outstanding(receiver: RunningReceiver) -> int:
    admin = receiver.service._admin
    assert admin is not None
    return admin.workers.outstanding


def test_periodic_jobs_run_beside_eight_slow_reads_on_threads_of_their_own(
    store: ClickHouseStore,
) -> None:
    runs: list[str] = []
    ran = threading.Condition()

    def count(job_store: Store, now: dt.datetime) -> None:
        job_store.query("SELECT 1")
        with ran:
            runs.append(threading.current_thread().name)
            ran.notify_all()

    receiver = RunningReceiver(
        store,
        periodic=[Periodic("count", 0.05, count)],
        read_workers=READS,
        read_max_execution_time=LIMIT_SECONDS,
    )
    watcher = store.reopen()
    probe = f"jobs-{secrets.token_hex(6)}"
    try:
        admin = Admin(store)
        with concurrent.futures.ThreadPoolExecutor(READS) as clients:
            reads = [
                clients.submit(admin.query, slow_read(probe), "read_token", 5.0)
                for _ in range(READS)
            ]
            wait_until(lambda: running(watcher, probe) == READS, 30, "eight reads running")
            with ran:
                seen = len(runs)
                # Three more runs while every read holds its thread (0.05 s apart).
                assert ran.wait_for(lambda: len(runs) >= seen + 3, timeout=LIMIT_SECONDS / 2)
                assert running(watcher, probe) == READS
            for read in reads:
                with pytest.raises(requests.exceptions.ReadTimeout):
                    read.result(timeout=30)
        assert {name.rsplit("_", 1)[0] for name in runs} == {"periodic-job"}
        wait_until(lambda: running(watcher, probe) == 0, 10, "the reads to stop")
    finally:
        watcher.close()
        receiver.stop()
