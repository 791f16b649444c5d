"""When the sink reads its ownership claims back (`Sink._verify_claims`): always on a
ClickHouse server; on a chDB directory only while another sink of this process writes
it too, counted from its construction until its `close`."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from ingest.metrics import SinkMetrics
from ingest.sink.consume import Sink
from ingest.sink.dlq import DeadLetterSink
from schemas.topics import Topics


class Store:
    def __init__(self, url: str) -> None:
        self.url = url


def sink(url: str) -> Sink:
    store: Any = Store(url)
    dead: Any = DeadLetterSink
    return Sink(None, store, dead, Topics(), SinkMetrics(CollectorRegistry()))  # type: ignore[arg-type]


def test_one_sink_on_a_chdb_directory_skips_the_read_back(tmp_path: Any) -> None:
    url = f"chdb://{tmp_path}/store"
    first = sink(url)
    assert not first._verify_claims()
    second = sink(url)
    assert first._verify_claims() and second._verify_claims()
    other = sink(f"chdb://{tmp_path}/elsewhere")
    assert not other._verify_claims()
    second.close()
    second.close()  # once only
    assert not first._verify_claims()
    first.close()
    other.close()


def test_a_sink_collected_unclosed_no_longer_counts(tmp_path: Any) -> None:
    url = f"chdb://{tmp_path}/store"
    first = sink(url)
    sink(url)  # never closed: collected at once (no reference is kept)
    assert not first._verify_claims()
    first.close()


def test_a_server_is_always_read_back() -> None:
    alone = sink("http://user:pass@clickhouse.invalid:8123")
    assert alone._verify_claims()
    alone.close()
