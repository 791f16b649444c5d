"""The tenant through the scale-out path (receiver -> Kafka -> sink -> store), tenants
apart there too, a ten-year backfill, and which version of an event id wins when a
sink batch holds two."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from aiokafka.structs import TopicPartition
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse as PB2ExportTraceServiceResponse,
)

from ingest.export.handler import ExportOutcome
from ingest.export.principal import Principal
from ingest.export.request import AGENT_REJECTED, validate_request
from ingest.handoff.kafka_packing import pack, screen
from ingest.sink.batch import Batch, Consumed
from ingest.store.clickhouse import ClickHouseStore
from ingest.store.rows import write_rows
from processors.completeness.job import Selection, read_report
from schemas import records
from tests.e2e.kafka.conftest import Broker, KafkaReceiver, RunningSink
from tests.e2e.kafka.helpers import count, wait_until
from tests.ingest.edge.test_auth import grpc_call, http_call
from tests.ingest.edge.test_tenants_over_the_wire import ACME as ACME_TOKEN
from tests.ingest.edge.test_tenants_over_the_wire import GLOBEX as GLOBEX_TOKEN
from tests.ingest.edge.test_tenants_over_the_wire import billing, tokens
from tests.ingest.helpers import grpc_export
from tests.otel_emit import Dim, Evaluation, Sentinel, export_request, record_spans

pytestmark = [pytest.mark.clickhouse]

ACME = Principal(tenant_id="acme", agents=frozenset({"billing-triage"}), name="acme")
GLOBEX = Principal(tenant_id="globex", name="globex")
NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def export_as(receiver: KafkaReceiver, items: list[Evaluation | Sentinel], principal: Principal,
              seed: int) -> ExportOutcome:  # fmt: skip
    request = export_request(record_spans(items, seed=seed))
    exporter = receiver.service._exporter  # the seam the edge calls once a token matched
    assert exporter is not None
    outcome: ExportOutcome = receiver.call(exporter.export(request, request.ByteSize(), principal))
    return outcome


@pytest.mark.kafka
@pytest.mark.e2e
def test_the_tenant_travels_through_kafka_and_tenants_stay_apart(
    kafka_receiver: KafkaReceiver, sink: RunningSink, store: ClickHouseStore
) -> None:
    agent = {"holonograph.agent.id": "billing-triage"}
    acme = [
        Evaluation("strm", 0, event_id="evt_shared", extra=agent,
                   dims=[Dim("correctness", passed=True)]),
        Evaluation("strm", 1, event_id="evt_foreign", extra={"holonograph.agent.id": "x"}),
    ]  # fmt: skip
    outcome = export_as(kafka_receiver, acme, ACME, seed=1)
    assert (outcome.accepted_spans, outcome.rejected_spans) == (1, 1)
    globex = [
        Evaluation("strm", 0, event_id="evt_shared", dims=[Dim("correctness", passed=False)]),
        Evaluation("strm", 1),
        Sentinel("strm", 2, final=True),
    ]
    assert export_as(kafka_receiver, globex, GLOBEX, seed=2).rejected_spans == 0
    wait_until(
        lambda: count(store, "emission_receipts") == 5 and count(store, "quarantine") == 1,
        what="the sink to store both tenants' rows",
    )
    grades = store.query(
        "SELECT tenant_id, passed FROM holonograph.evaluation_dimensions FINAL"
        " WHERE event_id = 'evt_shared' ORDER BY tenant_id"
    ).rows
    assert grades == [("acme", True), ("globex", False)]
    assert store.query("SELECT tenant_id FROM holonograph.quarantine FINAL").rows == [("acme",)]
    (mine,) = read_report(store, NOW, Selection(tenant="acme")).streams
    assert (mine.status, mine.final_seen, mine.quarantined) == ("open", False, 1)
    (theirs,) = read_report(store, NOW, Selection(tenant="globex")).streams
    assert theirs.status == "closed-complete"


@pytest.mark.kafka
@pytest.mark.e2e
def test_a_backfill_over_ten_years_in_one_request_is_stored(
    kafka_receiver: KafkaReceiver, sink: RunningSink, store: ClickHouseStore
) -> None:
    items = [
        Evaluation("backfill", m, end_ns=int(dt.datetime(2016 + m // 12, m % 12 + 1, 15,
                                                         tzinfo=dt.UTC).timestamp()) * 10**9)
        for m in range(120)
    ]  # fmt: skip
    payload = export_request(record_spans(items)).SerializeToString()
    reply = grpc_export(kafka_receiver.grpc_endpoint, payload)
    assert reply.code is grpc.StatusCode.OK
    assert reply.response().partial_success.rejected_spans == 0
    wait_until(lambda: count(store) == 120, what="all 120 months stored")
    months = store.query(
        "SELECT uniqExact(toStartOfMonth(timestamp)) FROM holonograph.evaluation_events FINAL"
    ).scalar()
    assert months == 120


def test_the_later_received_version_wins_whatever_order_a_sink_batch_holds(
    store: ClickHouseStore,
) -> None:
    """Two receivers accepted versions of one event id 300 microseconds apart (within
    one millisecond, the resolution of `ingested_at`); the sink's batch holds the newer
    record first (it came from another partition)."""

    def record(passed: bool, at: dt.datetime, seed: int) -> records.BatchRecord:
        item = Evaluation("s", 0, event_id="evt_v", dims=[Dim("correctness", passed=passed)])
        batch = validate_request(export_request(record_spans([item], seed=seed)))
        (out,) = pack(screen(batch, 1_000_000), f"r{seed}", at, 1_000_000)
        decoded = records.decode(out.value)
        assert isinstance(decoded, records.BatchRecord)
        return decoded

    older = record(False, NOW, seed=1)
    newer = record(True, NOW + dt.timedelta(microseconds=300), seed=2)
    held = Batch(0.0)
    for offset, stored in enumerate((newer, older)):
        held.add(Consumed(TopicPartition("t", offset), 0, b"%d" % offset, record=stored))
    write_rows(store, held.table_rows())
    passed = store.query("SELECT passed FROM holonograph.evaluation_dimensions FINAL").rows
    assert passed == [(True,)]


@pytest.fixture
def token_receiver(
    broker: Broker, names: dict[str, str], tmp_path: Path
) -> Iterator[KafkaReceiver]:
    running = KafkaReceiver(broker, names, auth_tokens_file=tokens(tmp_path / "tokens.yaml"))
    yield running
    running.stop()


@pytest.mark.kafka
@pytest.mark.e2e
def test_tokens_decide_the_tenant_through_kafka(
    token_receiver: KafkaReceiver, sink: RunningSink, store: ClickHouseStore
) -> None:
    mine = [
        billing("wire", 0, event_id="evt_w", dims=[Dim("ok", passed=True)]),
        Evaluation("wire", 1, extra={"holonograph.agent.id": "support"}),
    ]
    reply = grpc_call(
        token_receiver.grpc_endpoint,
        export_request(record_spans(mine)).SerializeToString(),
        ACME_TOKEN,
    )
    assert reply.code is grpc.StatusCode.OK
    answer = PB2ExportTraceServiceResponse.FromString(reply.body or b"")
    assert answer.partial_success.rejected_spans == 1
    theirs = [
        Evaluation("wire", 0, event_id="evt_w", dims=[Dim("ok", passed=False)]),
        Sentinel("wire", 1, final=True),
    ]
    payload = export_request(record_spans(theirs, seed=4)).SerializeToString()
    assert http_call(token_receiver.http_endpoint, payload, GLOBEX_TOKEN).status_code == 200
    assert http_call(token_receiver.http_endpoint, payload, "tok-nobody").status_code == 401
    wait_until(
        lambda: count(store, "emission_receipts") == 4 and count(store, "quarantine") == 1,
        what="the sink to store both tenants' rows",
    )
    grades = store.query(
        "SELECT tenant_id, passed FROM holonograph.evaluation_dimensions FINAL"
        " WHERE event_id = 'evt_w' ORDER BY tenant_id"
    ).rows
    assert grades == [("acme", True), ("globex", False)]
    quarantined = store.query("SELECT tenant_id, reason FROM holonograph.quarantine FINAL").rows
    assert [(t, r.startswith(AGENT_REJECTED)) for t, r in quarantined] == [("acme", True)]
    (acme,) = read_report(store, NOW, Selection(tenant="acme")).streams
    assert (acme.status, acme.final_seen) == ("open", False)
