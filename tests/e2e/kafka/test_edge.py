"""The same receiver edge on the scale-out path (`serve --kafka` against Tansu, the
sink storing): TLS, bearer tokens and per-tenant rate limits behave as on the
embedded path, and what the edge refuses never reaches the topic."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import requests
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk.trace.export import SpanExportResult

from ingest.store.clickhouse import ClickHouseStore
from tests.e2e.kafka.conftest import Broker, KafkaReceiver, RunningSink
from tests.e2e.kafka.helpers import wait_until
from tests.ingest.certs import CertificateAuthority
from tests.ingest.helpers import EXPORT, GrpcReply
from tests.otel_emit import Evaluation, export_request, record_spans

pytestmark = [pytest.mark.kafka, pytest.mark.clickhouse, pytest.mark.e2e]

TOKEN = "tok-kafka-acme-42"
LIMITED = "tok-kafka-slow-7"


@pytest.fixture(autouse=True)
def _no_ca_bundle_override(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def ca(tmp_path: Path) -> CertificateAuthority:
    authority = CertificateAuthority()
    (tmp_path / "ca.pem").write_bytes(authority.cert_pem)
    authority.issue("receiver").write(tmp_path / "server.pem", tmp_path / "server.key")
    digest = hashlib.sha256(LIMITED.encode()).hexdigest()
    (tmp_path / "tokens.yaml").write_text(
        "tokens:\n"
        f'  - {{tenant: acme, token: "{TOKEN}", agents: "*"}}\n'
        f'  - {{tenant: slow, token_sha256: "{digest}", agents: "*", spans_per_second: 1}}\n'
    )
    (tmp_path / "tokens.yaml").chmod(0o600)
    return authority


@pytest.fixture
def secure_receiver(
    broker: Broker, names: dict[str, str], ca: CertificateAuthority, tmp_path: Path
) -> Iterator[KafkaReceiver]:
    running = KafkaReceiver(
        broker,
        names,
        tls_cert_file=tmp_path / "server.pem",
        tls_key_file=tmp_path / "server.key",
        auth_tokens_file=tmp_path / "tokens.yaml",
    )
    yield running
    running.stop()


def _call(endpoint: str, ca: CertificateAuthority, payload: bytes, token: str | None) -> GrpcReply:
    credentials = grpc.ssl_channel_credentials(root_certificates=ca.cert_pem)
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    with grpc.secure_channel(endpoint, credentials) as channel:
        try:
            body, state = channel.unary_unary(EXPORT).with_call(
                payload, timeout=30, metadata=metadata
            )
            return GrpcReply(grpc.StatusCode.OK, "", body, state.trailing_metadata())
        except grpc.RpcError as err:
            return GrpcReply(err.code(), err.details(), None, err.trailing_metadata())


def _stored(store: ClickHouseStore, stream: str) -> int:
    return int(
        store.query(
            "SELECT count() FROM holonograph.emission_receipts WHERE emission_stream = {s:String}",
            {"s": stream},
        ).scalar()
    )


def test_tls_and_tokens_on_the_kafka_path(
    secure_receiver: KafkaReceiver,
    sink: RunningSink,
    store: ClickHouseStore,
    ca: CertificateAuthority,
    tmp_path: Path,
) -> None:
    https = secure_receiver.http_endpoint.replace("http://", "https://")
    intruder = export_request(record_spans([Evaluation("k-intruder", 0)])).SerializeToString()
    refused = _call(secure_receiver.grpc_endpoint, ca, intruder, None)
    assert refused.code is grpc.StatusCode.UNAUTHENTICATED
    answer = requests.post(
        f"{https}/v1/traces",
        data=intruder,
        headers={"Content-Type": "application/x-protobuf", "Authorization": "Bearer wrong"},
        verify=str(tmp_path / "ca.pem"),
        timeout=10,
    )
    assert answer.status_code == 401
    with (
        pytest.raises(grpc.RpcError) as plain,
        grpc.insecure_channel(secure_receiver.grpc_endpoint) as channel,
    ):
        channel.unary_unary(EXPORT)(intruder, timeout=5)
    assert plain.value.code() is grpc.StatusCode.UNAVAILABLE

    spans = record_spans([Evaluation("k-acme", 0), Evaluation("k-acme", 1)])
    headers = {"authorization": f"Bearer {TOKEN}"}
    grpc_exporter = GrpcSpanExporter(
        endpoint=secure_receiver.grpc_endpoint,
        credentials=grpc.ssl_channel_credentials(root_certificates=ca.cert_pem),
        headers=headers,
        timeout=20,
    )
    http_exporter = HttpSpanExporter(
        endpoint=f"{https}/v1/traces",
        certificate_file=str(tmp_path / "ca.pem"),
        headers=headers,
        timeout=20,
    )
    try:
        assert grpc_exporter.export(spans) is SpanExportResult.SUCCESS
        assert http_exporter.export(spans) is SpanExportResult.SUCCESS
    finally:
        grpc_exporter.shutdown()
        http_exporter.shutdown()
    wait_until(lambda: _stored(store, "k-acme") == 4, what="acme's spans stored by the sink")
    assert _stored(store, "k-intruder") == 0


def test_rate_limit_on_the_kafka_path(
    secure_receiver: KafkaReceiver,
    sink: RunningSink,
    store: ClickHouseStore,
    ca: CertificateAuthority,
) -> None:
    def payload(stream: str) -> bytes:
        items = [Evaluation(stream, seq) for seq in range(5)]
        return export_request(record_spans(items)).SerializeToString()

    first = _call(secure_receiver.grpc_endpoint, ca, payload("k-slow-0"), LIMITED)
    assert first.code is grpc.StatusCode.OK
    limited = _call(secure_receiver.grpc_endpoint, ca, payload("k-slow-1"), LIMITED)
    assert limited.code is grpc.StatusCode.RESOURCE_EXHAUSTED
    delay = limited.retry_delay()
    assert delay is not None and 3.0 < delay <= 5.0
    wait_until(lambda: _stored(store, "k-slow-0") == 5, what="the admitted request stored")
    assert _stored(store, "k-slow-1") == 0
