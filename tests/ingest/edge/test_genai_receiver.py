"""OpenTelemetry GenAI evaluation results into a live receiver: as span events and as
log records, over gRPC and HTTP (protobuf, OTLP/JSON, gzip), through the official SDK
exporters, into exact rows; what no contract places answered in partial success and
quarantined; the logs receiver behind the same tokens, tenants and limits as traces.

One receiver serves the module: every test writes as a tenant of its own (its bearer
token's), so the rows of one test never meet another's."""

from __future__ import annotations

import datetime as dt
import gzip as gzip_module
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import requests
from click.testing import CliRunner
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceResponse as PB2ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse as PB2ExportTraceServiceResponse,
)
from opentelemetry.sdk._logs.export import LogRecordExportResult
from opentelemetry.sdk.trace.export import SpanExportResult

from holonograph.cli import cli
from ingest.export.request import AGENT_REJECTED
from ingest.store.clickhouse import ClickHouseStore
from testkit.backends import fresh_store
from tests.conftest import RunningReceiver
from tests.genai_emit import (
    Call,
    Eval,
    export_logs_grpc,
    export_logs_http,
    genai_contract,
    logs_json,
    logs_request,
    record_call_logs,
    record_calls,
)
from tests.ingest.helpers import GrpcReply, to_otlp_json
from tests.otel_emit import export_grpc, export_http, export_request

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

TRANSPORTS = ["grpc", "grpc-gzip", "http", "http-gzip", "http-json", "http-json-gzip"]
TENANTS = [
    *(f"spans-{t}" for t in TRANSPORTS),
    *(f"logs-{t}" for t in TRANSPORTS),
    "rejects",
    "both-forms",
    "acme",
    "globex",
    "openlit",
    "limits",
    "drift",
]
LIMITED = "limited"  # may write support-bot only
SLOW = "slow"  # rate-limited to almost nothing
MAX_REQUEST_SPANS = 500
MAX_REQUEST_BYTES = 256 * 1024
FIXTURES = Path(__file__).resolve().parents[2] / "testdata" / "genai"
LOGS_METHOD = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
TRACES_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
# Placed by agent name (spans carry it) or service name (log records do not).
CONTRACT = genai_contract(
    genai={
        "surfaces": [
            {"surfaceId": "classify-intent", "agentName": "triage"},
            {"surfaceId": "classify-intent", "serviceName": "billing-api"},
        ],
        "labels": {"passLabels": ["pass"], "failLabels": ["fail"]},
    }
)
CALLS = [
    Call(
        [
            Eval("relevance", score=4.0, explanation="answers it", response_id="chatcmpl-1"),
            Eval("correctness", label="pass"),
        ]
    ),
    Call([Eval("correctness", label="fail", score=0.1)], response_model="gpt-5-2025-10-01"),
]


def token(tenant: str) -> str:
    return f"tok-{tenant}"


def auth(tenant: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token(tenant)}"}


def _tokens_file(path: Path) -> Path:
    lines = ["tokens:"]
    for tenant in TENANTS:
        lines.append(f'  - {{tenant: {tenant}, token: "{token(tenant)}", agents: "*"}}')
    lines.append(f'  - {{tenant: {LIMITED}, token: "{token(LIMITED)}", agents: ["support-bot"]}}')
    lines.append('  - {tenant: acme, token: "tok-reader", agents: "*", scopes: [read]}')
    # the tenant's operator, who registers its contracts
    lines.append(f'  - {{tenant: {LIMITED}, token: "{token(LIMITED)}-admin", agents: "*"}}')
    lines.append(
        f'  - {{tenant: {SLOW}, token: "{token(SLOW)}", agents: "*", spans_per_second: 0.001}}'
    )
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o600)
    return path


def register(
    receiver: RunningReceiver, tenant: str, contract: dict[str, Any], as_token: str = ""
) -> None:
    bearer = {"authorization": f"Bearer {as_token}"} if as_token else auth(tenant)
    reply = requests.post(
        f"{receiver.http_endpoint}/holonograph/contract",
        json=contract,
        headers={**bearer, "x-holonograph-run-mode": "production"},
        timeout=30,
    )
    assert reply.status_code in (200, 201), reply.text


@pytest.fixture(scope="module")
def genai_receiver(
    tmp_path_factory: pytest.TempPathFactory, clickhouse_server: str | None
) -> Iterator[RunningReceiver]:
    root = tmp_path_factory.mktemp("genai-receiver")
    store = fresh_store(root / "store", clickhouse_server)
    running = RunningReceiver(
        store,
        auth_tokens_file=_tokens_file(root / "tokens.yaml"),
        max_request_spans=MAX_REQUEST_SPANS,
        max_request_bytes=MAX_REQUEST_BYTES,
    )
    try:
        for tenant in [*TENANTS, SLOW]:
            register(running, tenant, CONTRACT if tenant != "openlit" else openlit_contract())
        register(running, f"{LIMITED}-admin", CONTRACT, as_token=f"{token(LIMITED)}-admin")
        yield running
    finally:
        running.stop()
        store.close()


def rows(store: ClickHouseStore, table: str, tenant: str, order: str) -> list[dict[str, Any]]:
    sql = (
        # the placement columns (migration 0016) are tests/ingest/store/test_placement.py's
        f"SELECT * EXCEPT (ingested_at, ingest_version, placed_surface_id, placed_hour)"
        f" FROM holonograph.{table} FINAL"
        f" WHERE tenant_id = {{tenant:String}} ORDER BY {order}"
    )
    return store.query(sql, {"tenant": tenant}).dicts()


def events(store: ClickHouseStore, tenant: str) -> list[dict[str, Any]]:
    return rows(store, "evaluation_events", tenant, "timestamp")


def dimensions(store: ClickHouseStore, tenant: str) -> list[dict[str, Any]]:
    return rows(store, "evaluation_dimensions", tenant, "timestamp, dimension_id")


def quarantine(store: ClickHouseStore, tenant: str) -> list[dict[str, Any]]:
    return store.query(
        "SELECT reason, span_name, trace_id, attributes FROM holonograph.quarantine FINAL"
        " WHERE tenant_id = {tenant:String} ORDER BY reason",
        {"tenant": tenant},
    ).dicts()


def _post(
    receiver: RunningReceiver,
    path: str,
    body: bytes,
    tenant: str | None,
    content_type: str = "application/x-protobuf",
    gzip: bool = False,
) -> requests.Response:
    headers = {"Content-Type": content_type, **(auth(tenant) if tenant else {})}
    if gzip:
        body = gzip_module.compress(body)
        headers["Content-Encoding"] = "gzip"
    return requests.post(f"{receiver.http_endpoint}{path}", data=body, headers=headers, timeout=30)


def _grpc(receiver: RunningReceiver, method: str, payload: bytes, tenant: str | None) -> GrpcReply:
    metadata = tuple(auth(tenant).items()) if tenant else ()
    with grpc.insecure_channel(receiver.grpc_endpoint) as channel:
        call = channel.unary_unary(method)
        try:
            body, state = call.with_call(payload, timeout=30, metadata=metadata)
            return GrpcReply(grpc.StatusCode.OK, "", body, state.trailing_metadata())
        except grpc.RpcError as err:
            return GrpcReply(err.code(), err.details(), None, err.trailing_metadata())


def _json_answer(reply: requests.Response) -> dict[str, Any]:
    assert reply.headers["Content-Type"].startswith("application/json"), reply.headers
    answer: dict[str, Any] = json.loads(reply.content)
    return answer


# --- span events ---------------------------------------------------------------------


def expected_events(trace_ids: list[str], span_ids: list[str], tenant: str) -> list[dict[str, Any]]:
    def event(n: int, served: str, labels: dict[str, str], dims: list[str]) -> dict[str, Any]:
        return {
            "tenant_id": tenant,
            "event_id": _event_id(trace_ids[n], span_ids[n]),
            "surface_id": "classify-intent",
            "agent_id": "billing-triage",
            "correlation_id": trace_ids[n],
            "run_mode": "production",
            "provenance": "production-state",
            "timestamp": dt.datetime(2026, 11, 30, 13, 43, 59, 326297)
            + dt.timedelta(seconds=10 * n),
            "lens_version": "",
            "light_source_id": f"openai/{served}",
            "light_source_requested": "openai/gpt-5",
            "substrate": {},
            "cohort_tags": [],
            "multiplex_role": "",
            "fixture_id": "",
            "markers": {},
            "latency_ms": 1326.297,
            "cost_usd": None,
            "tokens_input": 153,
            "tokens_output": 490,
            "sdk_name": "opentelemetry",
            "dimension_ids": dims,
            "emission_stream": "",
            "emission_seq": 0,
            "emission_final": False,
            "trace_id": trace_ids[n],
            "span_id": span_ids[n],
            "extras": labels,
        }

    return [
        event(
            0,
            "gpt-5-2025-08-07",
            {
                "gen_ai.response.id": "chatcmpl-1",
                "gen_ai.agent.name": "triage",
                "gen_ai.operation.name": "chat",
                "gen_ai.evaluation.score.label": {"correctness": "pass"},
            },
            ["relevance", "correctness"],
        ),
        event(
            1,
            "gpt-5-2025-10-01",
            {
                "gen_ai.agent.name": "triage",
                "gen_ai.operation.name": "chat",
                "gen_ai.evaluation.score.label": {"correctness": "fail"},
            },
            ["correctness"],
        ),
    ]


def _event_id(trace_id: str, span_id: str) -> str:
    import hashlib

    return "evt_g_" + hashlib.sha256(f"span\x00{trace_id}\x00{span_id}".encode()).hexdigest()[:24]


def _normalized(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with the columns a test cannot know exactly (the contract's version id, the
    SDK's version, the resource's instance id) set aside, each checked on its own."""
    out = []
    for row in found:
        row = dict(row)
        assert row.pop("contract_version_id").startswith("cv_")
        assert row.pop("contract_findings")[0].startswith("undeclared-dimension:")
        assert row.pop("sdk_version")
        resource = json.loads(row.pop("resource_attributes"))
        assert resource["service.name"] == "billing-api"
        assert resource["deployment.environment.name"] == "production"
        row["extras"] = json.loads(row["extras"])
        out.append(row)
    return out


def metric(text: str, line_prefix: str) -> float:
    """The value of the first exposition line starting with `line_prefix` (0: none)."""
    for line in text.splitlines():
        if line.startswith(line_prefix):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def send_spans(receiver: RunningReceiver, transport: str, tenant: str, spans: Any) -> None:
    gzip = transport.endswith("gzip")
    if transport.startswith("http-json"):
        body = to_otlp_json(export_request(spans))
        reply = _post(receiver, "/v1/traces", body, tenant, "application/json", gzip)
        assert reply.status_code == 200, reply.text
        assert _json_answer(reply) == {}
    elif transport.startswith("grpc"):
        assert (
            export_grpc(receiver.grpc_endpoint, spans, gzip, auth(tenant))
            is SpanExportResult.SUCCESS
        )
    else:
        assert (
            export_http(receiver.http_endpoint, spans, gzip, auth(tenant))
            is SpanExportResult.SUCCESS
        )


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_span_events_land_as_exact_rows_through_every_transport(
    genai_receiver: RunningReceiver, transport: str
) -> None:
    tenant = f"spans-{transport}"
    spans = record_calls(CALLS)
    send_spans(genai_receiver, transport, tenant, spans)
    store = genai_receiver.store
    trace_ids = [f"{s.context.trace_id:032x}" for s in spans]
    span_ids = [f"{s.context.span_id:016x}" for s in spans]
    assert _normalized(events(store, tenant)) == expected_events(trace_ids, span_ids, tenant)
    found = [
        (d["dimension_id"], d["passed"], d["score"], d["actual"], d["light_source_id"])
        for d in dimensions(store, tenant)
    ]
    assert found == [
        ("correctness", True, None, "", "openai/gpt-5-2025-08-07"),
        ("relevance", None, 4.0, "answers it", "openai/gpt-5-2025-08-07"),
        ("correctness", False, 0.1, "", "openai/gpt-5-2025-10-01"),
    ]
    receipts = store.query(
        "SELECT count() FROM holonograph.emission_receipts WHERE tenant_id = {t:String}",
        {"t": tenant},
    ).scalar()
    assert receipts == 0  # no ordinals, no arrivals to count


# --- log records ---------------------------------------------------------------------


def send_logs(receiver: RunningReceiver, transport: str, tenant: str, records: Any) -> None:
    gzip = transport.endswith("gzip")
    if transport.startswith("http-json"):
        body = logs_json(logs_request(records))
        reply = _post(receiver, "/v1/logs", body, tenant, "application/json", gzip)
        assert reply.status_code == 200, reply.text
        assert _json_answer(reply) == {}
    elif transport.startswith("grpc"):
        result = export_logs_grpc(receiver.grpc_endpoint, records, gzip, auth(tenant))
        assert result is LogRecordExportResult.SUCCESS
    else:
        result = export_logs_http(receiver.http_endpoint, records, gzip, auth(tenant))
        assert result is LogRecordExportResult.SUCCESS


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_log_records_land_as_exact_rows_through_every_transport(
    genai_receiver: RunningReceiver, transport: str
) -> None:
    tenant = f"logs-{transport}"
    spans, records = record_call_logs(CALLS)
    send_logs(genai_receiver, transport, tenant, records)
    store = genai_receiver.store
    found = events(store, tenant)
    assert [
        (e["event_id"], e["trace_id"], e["span_id"], e["surface_id"], e["run_mode"]) for e in found
    ] == [
        (
            _event_id(f"{s.context.trace_id:032x}", f"{s.context.span_id:016x}"),
            f"{s.context.trace_id:032x}",
            f"{s.context.span_id:016x}",
            "classify-intent",
            "production",
        )
        for s in spans
    ]
    assert [e["dimension_ids"] for e in found] == [["relevance", "correctness"], ["correctness"]]
    # what only the operation's span knows is not on a log record, and is not guessed
    assert {(e["light_source_id"], e["latency_ms"], e["tokens_input"]) for e in found} == {
        ("", None, None)
    }
    assert [e["timestamp"] for e in found] == [
        dt.datetime(2026, 11, 30, 13, 43, 59, 326297),
        dt.datetime(2026, 11, 30, 13, 44, 9, 326297),
    ]
    found_dims = [(d["dimension_id"], d["passed"], d["score"]) for d in dimensions(store, tenant)]
    assert found_dims == [
        ("correctness", True, None),
        ("relevance", None, 4.0),
        ("correctness", False, 0.1),
    ]
    assert quarantine(store, tenant) == []


def test_results_of_one_operation_in_both_forms_are_one_event(
    genai_receiver: RunningReceiver,
) -> None:
    tenant = "both-forms"
    call = Call([Eval("relevance", score=3.0)])
    spans = record_calls([call])
    send_spans(genai_receiver, "grpc", tenant, spans)
    _, records = record_call_logs([Call([Eval("correctness", label="pass")])])
    send_logs(genai_receiver, "http", tenant, records)
    store = genai_receiver.store
    assert len(events(store, tenant)) == 1  # one operation, one event id
    assert [d["dimension_id"] for d in dimensions(store, tenant)] == ["correctness", "relevance"]


# --- rejections ----------------------------------------------------------------------


def test_what_no_contract_places_is_answered_and_quarantined_with_the_reason(
    genai_receiver: RunningReceiver,
) -> None:
    tenant = "rejects"
    elsewhere = {"service.name": "checkout", "deployment.environment.name": "production"}
    _, records = record_call_logs([Call([Eval("relevance", score=1.0)], agent=None)], elsewhere)
    payload = logs_request(records).SerializeToString()
    reply = _grpc(genai_receiver, LOGS_METHOD, payload, tenant)
    assert reply.code is grpc.StatusCode.OK
    answer = PB2ExportLogsServiceResponse.FromString(reply.body or b"")
    reason = (
        "genai: no contract's genai mapping places this evaluation (gen_ai.agent.name '',"
        " gen_ai.operation.name '', service.name 'checkout'); map it in its agent's contract"
        " (docs/genai.md)"
    )
    assert answer.partial_success.rejected_log_records == 1
    assert answer.partial_success.error_message == (
        f"rejected 1 log record(s): log record 0 (gen_ai.evaluation.result): {reason}"
    )

    bad = Call([Eval("relevance", score=1.0), Eval(None, score=2.0)])
    _, records = record_call_logs([bad], seed=12)
    body = logs_json(logs_request(records))
    http = _post(genai_receiver, "/v1/logs", body, tenant, "application/json")
    assert http.status_code == 200
    assert _json_answer(http)["partialSuccess"] == {
        "rejectedLogRecords": "1",
        "errorMessage": "rejected 1 log record(s): log record 1 (gen_ai.evaluation.result):"
        " gen_ai.evaluation.name: missing",
    }

    spans = record_calls([Call([Eval("relevance", label="maybe")])], seed=13)
    traced = _grpc(genai_receiver, TRACES_METHOD, export_request(spans).SerializeToString(), tenant)
    partial = PB2ExportTraceServiceResponse.FromString(traced.body or b"").partial_success
    assert partial.rejected_spans == 1
    assert "'maybe' of evaluation 'relevance' is neither a pass nor a fail label" in (
        partial.error_message
    )

    store = genai_receiver.store
    stored = quarantine(store, tenant)
    assert [(q["reason"].split(":")[0], q["span_name"]) for q in stored] == [
        ("event 0 (gen_ai.evaluation.result)", "chat gpt-5"),
        ("gen_ai.evaluation.name", "gen_ai.evaluation.result"),
        ("genai", "gen_ai.evaluation.result"),
    ]
    assert json.loads(stored[2]["attributes"])["gen_ai.evaluation.name"] == "relevance"
    # the good result of the second request landed beside its rejected neighbour
    assert [d["dimension_id"] for d in dimensions(store, tenant)] == ["relevance"]
    metrics = requests.get(f"{genai_receiver.admin_endpoint}/metrics", timeout=10).text
    rejected = "holonograph_log_records_rejected_total"
    assert metric(metrics, f'{rejected}{{reason="genai"}}') >= 1
    assert metric(metrics, f'{rejected}{{reason="gen_ai.evaluation.name"}}') >= 1
    assert metric(metrics, "holonograph_log_records_ignored_total") >= 2
    assert metric(metrics, 'holonograph_spans_rejected_total{reason="span event"}') >= 1


# --- the logs receiver's edge: tokens, tenants, limits --------------------------------


def test_logs_need_a_known_bearer_token(genai_receiver: RunningReceiver) -> None:
    _, records = record_call_logs(CALLS)
    payload = logs_request(records).SerializeToString()
    for presented in (None, "tok-nobody"):
        headers = {"Content-Type": "application/x-protobuf"}
        if presented:
            headers["authorization"] = f"Bearer {presented}"
        reply = requests.post(
            f"{genai_receiver.http_endpoint}/v1/logs", data=payload, headers=headers, timeout=30
        )
        assert reply.status_code == 401 and reply.headers["WWW-Authenticate"] == "Bearer"
        metadata = (("authorization", f"Bearer {presented}"),) if presented else ()
        with (
            grpc.insecure_channel(genai_receiver.grpc_endpoint) as channel,
            pytest.raises(grpc.RpcError) as refused,
        ):
            channel.unary_unary(LOGS_METHOD)(payload, timeout=30, metadata=metadata)
        assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
    # a token that may read but not write: 403 / PERMISSION_DENIED, as for traces
    reader = {"Content-Type": "application/x-protobuf", "authorization": "Bearer tok-reader"}
    reply = requests.post(
        f"{genai_receiver.http_endpoint}/v1/logs", data=payload, headers=reader, timeout=30
    )
    assert reply.status_code == 403
    with (
        grpc.insecure_channel(genai_receiver.grpc_endpoint) as channel,
        pytest.raises(grpc.RpcError) as forbidden,
    ):
        metadata = (("authorization", "Bearer tok-reader"),)
        channel.unary_unary(LOGS_METHOD)(payload, timeout=30, metadata=metadata)
    assert forbidden.value.code() is grpc.StatusCode.PERMISSION_DENIED


def test_tenants_are_apart_and_a_token_writes_only_its_agents(
    genai_receiver: RunningReceiver,
) -> None:
    _, records = record_call_logs(CALLS)
    for tenant in ("acme", "globex"):
        send_logs(genai_receiver, "http", tenant, records)
    store = genai_receiver.store
    acme, globex = events(store, "acme"), events(store, "globex")
    assert [e["event_id"] for e in acme] == [e["event_id"] for e in globex]
    assert {e["tenant_id"] for e in acme + globex} == {"acme", "globex"}
    assert len(acme) == len(globex) == 2

    payload = logs_request(records).SerializeToString()
    reply = _post(genai_receiver, "/v1/logs", payload, LIMITED)
    answer = PB2ExportLogsServiceResponse.FromString(reply.content)
    assert answer.partial_success.rejected_log_records == 3
    assert f"{AGENT_REJECTED}: 'billing-triage' is not one of the token's agents" in (
        answer.partial_success.error_message
    )
    assert events(store, LIMITED) == []


def test_logs_are_held_to_the_receivers_limits(genai_receiver: RunningReceiver) -> None:
    tenant = "limits"
    large = _post(genai_receiver, "/v1/logs", b"\x00" * (MAX_REQUEST_BYTES + 1), tenant)
    assert large.status_code == 413 and f"exceeds {MAX_REQUEST_BYTES} bytes" in large.text
    too_many = [Call([Eval("relevance", score=1.0)]) for _ in range(MAX_REQUEST_SPANS + 1)]
    _, records = record_call_logs(too_many)
    many = logs_request(records[: MAX_REQUEST_SPANS + 1]).SerializeToString()
    assert len(many) < MAX_REQUEST_BYTES
    reply = _post(genai_receiver, "/v1/logs", many, tenant)
    assert reply.status_code == 413
    assert f"exceeds {MAX_REQUEST_SPANS} log records" in reply.text
    grpc_reply = _grpc(genai_receiver, LOGS_METHOD, many, tenant)
    assert grpc_reply.code is grpc.StatusCode.RESOURCE_EXHAUSTED

    bomb = gzip_module.compress(b"\x00" * (MAX_REQUEST_BYTES + 1))
    reply = requests.post(
        f"{genai_receiver.http_endpoint}/v1/logs",
        data=bomb,
        headers={
            "Content-Type": "application/x-protobuf",
            "Content-Encoding": "gzip",
            **auth(tenant),
        },
        timeout=30,
    )
    assert reply.status_code == 413 and "after gzip decompression" in reply.text

    assert _post(genai_receiver, "/v1/logs", b"\xff\x00junk", tenant).status_code == 400
    assert (
        _post(genai_receiver, "/v1/logs", b"{not json", tenant, "application/json").status_code
        == 400
    )
    assert _post(genai_receiver, "/v1/logs", b"x", tenant, "text/plain").status_code == 415
    assert events(genai_receiver.store, tenant) == []

    few = logs_request(records[:1]).SerializeToString()
    assert _post(genai_receiver, "/v1/logs", few, SLOW).status_code == 200
    limited = _post(genai_receiver, "/v1/logs", few, SLOW)
    assert limited.status_code == 429 and int(limited.headers["Retry-After"]) >= 1
    throttled = _grpc(genai_receiver, LOGS_METHOD, few, SLOW)
    assert throttled.code is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert throttled.retry_delay() is not None


# --- a recorded OpenLIT payload --------------------------------------------------------


def openlit_contract() -> dict[str, Any]:
    document: dict[str, Any] = json.loads((FIXTURES / "openlit-contract.json").read_text())
    return document


def test_a_recorded_openlit_payload_lands_by_its_contract(genai_receiver: RunningReceiver) -> None:
    tenant = "openlit"
    for path, route in (
        ("openlit-traces.otlp.json", "/v1/traces"),
        ("openlit-logs.otlp.json", "/v1/logs"),
    ):
        reply = _post(
            genai_receiver, route, (FIXTURES / path).read_bytes(), tenant, "application/json"
        )
        assert reply.status_code == 200 and _json_answer(reply) == {}, reply.text
    store = genai_receiver.store
    (event,) = events(store, tenant)
    assert (event["surface_id"], event["agent_id"], event["run_mode"], event["sdk_name"]) == (
        "answer-question",
        "support-bot",
        "production",
        "openlit",
    )
    found = [
        (d["dimension_id"], d["passed"], d["score"], d["actual"]) for d in dimensions(store, tenant)
    ]
    assert found == [
        ("bias_detection", True, 0.0, "No bias detected in the response."),
        (
            "hallucination",
            False,
            0.9,
            "The response states a refund policy the context does not contain.",
        ),
        ("toxicity_detection", True, 0.05, "Polite and factual."),
    ]


# --- analyses over GenAI-only traffic -------------------------------------------------

DRIFT_START = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)


def test_drift_finds_a_seeded_shift_in_genai_only_traffic(genai_receiver: RunningReceiver) -> None:
    """48 hours of one surface's GenAI evaluations, 25 calls an hour; at hour 24 the
    served model changes and the pass rate falls from 0.85 to 0.55: `holonograph drift`
    finds it and attributes it to the light source; `compare` sets the two apart;
    `variance decompose` reads the first day; completeness says it cannot know."""
    tenant, rng = "drift", random.Random(3)
    calls = []
    for hour in range(48):
        after = hour >= 24
        for n in range(25):
            at = DRIFT_START + dt.timedelta(hours=hour, minutes=2 * n)
            passed = rng.random() < (0.55 if after else 0.85)
            calls.append(
                Call(
                    [Eval("correctness", label="pass" if passed else "fail")],
                    response_model="gpt-5-2025-10-01" if after else "gpt-5-2025-08-07",
                    start_ns=int(at.timestamp()) * 1_000_000_000,
                )
            )
    spans = record_calls(calls, seed=21)
    for start in range(0, len(spans), MAX_REQUEST_SPANS):
        send_spans(genai_receiver, "grpc", tenant, spans[start : start + MAX_REQUEST_SPANS])
    assert len(events(genai_receiver.store, tenant)) == len(calls)

    window = ["--since", "2026-06-01T00:00:00Z", "--until", "2026-06-03T00:00:00Z"]
    common = ["--surface", "classify-intent", *window, "--tenant", tenant]
    store = ["--store", genai_receiver.store.url, "--json"]
    drift = CliRunner().invoke(cli, ["drift", *common, "--no-save", *store])
    assert drift.exit_code == 1, drift.output
    report = json.loads(drift.stdout)
    (point,) = report["changePoints"]
    assert point["source"] == "light source", point
    assert point["window"]["from"] <= "2026-06-02T00:00:00Z" < point["window"]["to"]

    compared = CliRunner().invoke(cli, ["compare", *common, *store])
    assert compared.exit_code in (0, 1), compared.output
    groups = {
        g["group"]: g["dimensions"][0]["passRate"]["estimate"]
        for g in json.loads(compared.stdout)["groups"]
    }
    assert set(groups) == {"openai/gpt-5-2025-08-07", "openai/gpt-5-2025-10-01"}
    assert groups["openai/gpt-5-2025-08-07"] > 0.75 > 0.65 > groups["openai/gpt-5-2025-10-01"]

    before = ["--since", "2026-06-01T00:00:00Z", "--until", "2026-06-02T00:00:00Z"]
    variance = CliRunner().invoke(
        cli,
        ["variance", "decompose", "--surface", "classify-intent", "--dimension", "correctness",
         *before, "--tenant", tenant, *store],
    )  # fmt: skip
    assert variance.exit_code == 0, variance.output
    assert json.loads(variance.stdout)["buckets"] == 24

    unknown = CliRunner().invoke(
        cli,
        [
            "completeness",
            "--surface",
            "classify-intent",
            "--tenant",
            tenant,
            "--store",
            genai_receiver.store.url,
        ],
    )
    assert unknown.exit_code == 0, unknown.output
    assert "classify-intent  unknown: no emission ordinals  1200" in unknown.output
