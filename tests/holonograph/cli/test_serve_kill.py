"""`serve` killed with SIGKILL under load loses nothing it acknowledged: small requests
(decoded on the event loop, lingering commits) and large ones (the decode thread) on
the hot path, from several clients at once, the process killed while requests are in
flight; every span of every request answered OK is in the store afterwards: after
the next start, which replays what the small-request log acknowledged and had not
drained into the store yet (`ingest.handoff.smalllog`)."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path

import grpc
import pytest

from bench.payload import PayloadSpec, RequestFactory
from ingest.handoff.segments import pending
from ingest.store.clickhouse import open_store
from tests.holonograph.cli.test_serve import ServeProcess, holonograph
from tests.ingest.helpers import grpc_export

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]


def _client(endpoint: str, batch: int, tag: str, acked: list[str], stop: threading.Event) -> None:
    factory = RequestFactory(PayloadSpec(batch=batch, tag=tag))
    number = 0
    while not stop.is_set():
        stream = factory.spec.stream(number)
        try:
            reply = grpc_export(endpoint, factory.body(number))
        except Exception:
            return  # the server is gone
        if reply.code is grpc.StatusCode.OK:
            acked.append(stream)
        elif reply.code is grpc.StatusCode.UNAVAILABLE:
            return
        number += 1


def _drained(data_dir: Path) -> bool:
    """The log's recorded position is at the end of its last segment."""
    log = data_dir / "ingest-log"
    segment, offset = (log / "position").read_text().split()
    last = max(log.glob("*.seg"))
    return int(last.stem) == int(segment) and last.stat().st_size == int(offset)


def _killed_under_load(data_dir: Path) -> dict[tuple[str, int], list[str]]:
    """Start `serve`, load it from several clients, SIGKILL it with requests in flight;
    the streams of every request answered OK, by (tag, batch size)."""
    server = ServeProcess(data_dir)
    acked: dict[tuple[str, int], list[str]] = {}
    stop = threading.Event()
    threads = []
    for n, batch in enumerate([1, 1, 1, 1, 64, 512]):
        streams: list[str] = []
        acked[(f"kill{n:04d}", batch)] = streams
        thread = threading.Thread(
            target=_client,
            args=(server.grpc_endpoint, batch, f"kill{n:04d}", streams, stop),
            daemon=True,
        )
        threads.append(thread)
        thread.start()
    while sum(len(s) for s in acked.values()) < 40:  # load is flowing, requests in flight
        if server.process.poll() is not None:
            pytest.fail(f"serve exited: {server.process.communicate()}")
        threading.Event().wait(0.05)
    server.process.send_signal(signal.SIGKILL)
    server.process.wait(30)
    stop.set()
    for thread in threads:
        thread.join(30)
    return acked


def _assert_all_stored(stored: dict[str, int], acked: dict[tuple[str, int], list[str]]) -> None:
    for (_, batch), streams in acked.items():
        for stream in streams:  # every acknowledged request: all its spans arrived
            assert stored.get(stream) == batch, (stream, stored.get(stream), batch)


_STORED = (
    "SELECT emission_stream, count() AS n FROM"
    " (SELECT DISTINCT emission_stream, emission_seq FROM holonograph.emission_receipts)"
    " GROUP BY emission_stream"
)


@pytest.mark.chdb_only("kills the process that holds the embedded store")
def test_sigkill_under_load_loses_no_acknowledged_span(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    acked = _killed_under_load(data_dir)
    restarted = ServeProcess(data_dir)  # replays the log, then stops gracefully
    code, stderr = restarted.stop()
    assert code == 0, stderr
    assert not list((data_dir / "ingest-log").glob("*.seg")) or _drained(data_dir)
    store = open_store(f"chdb://{data_dir}")
    try:
        stored = dict(store.query(_STORED).rows)
    finally:
        store.close()
    _assert_all_stored(stored, acked)


@pytest.mark.chdb_only("kills the process that holds the embedded store")
def test_an_offline_command_after_a_kill_reads_every_acknowledged_span(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No restart: the next process to open the directory is an offline command, and
    what the log acknowledged and had not drained is in its answer."""
    monkeypatch.setenv("HOLONOGRAPH_INGEST_LOG_DRAIN_MS", "600000")  # drain at 20k rows only
    data_dir = tmp_path / "data"
    acked = _killed_under_load(data_dir)
    assert pending(data_dir / "ingest-log"), "the kill left nothing undrained: no replay to test"
    done = holonograph("query", "--data-dir", str(data_dir), "--json", _STORED)
    assert done.returncode == 0, done.stderr
    stored = {row["emission_stream"]: int(row["n"]) for row in json.loads(done.stdout)}
    _assert_all_stored(stored, acked)
    assert not pending(data_dir / "ingest-log")
