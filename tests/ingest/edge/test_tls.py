"""TLS on both OTLP listeners: the official OpenTelemetry exporters succeed over TLS,
plaintext is refused, mTLS refuses clients without a certificate the client CA
signed, and a rotated certificate is served without a restart."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
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
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

from ingest.store.clickhouse import ClickHouseStore
from tests.conftest import RunningReceiver
from tests.e2e.kafka.helpers import wait_until
from tests.ingest.certs import CertificateAuthority, Issued
from tests.ingest.helpers import EXPORT
from tests.otel_emit import Evaluation, export_request, record_spans

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]


@pytest.fixture(autouse=True)
def _no_ca_bundle_override(monkeypatch: pytest.MonkeyPatch) -> None:
    """requests lets these variables override a session's own CA file (the exporter's
    `certificate_file`); the tests trust exactly their own CA."""
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)


@dataclass
class Pki:
    ca: CertificateAuthority
    ca_file: Path
    cert_file: Path
    key_file: Path
    client: Issued
    client_cert_file: Path
    client_key_file: Path


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    ca = CertificateAuthority()
    ca_file = tmp_path / "ca.pem"
    ca_file.write_bytes(ca.cert_pem)
    ca.issue("holonograph receiver").write(tmp_path / "server.pem", tmp_path / "server.key")
    client = ca.issue("billing agent", server=False)
    client.write(tmp_path / "client.pem", tmp_path / "client.key")
    return Pki(
        ca,
        ca_file,
        tmp_path / "server.pem",
        tmp_path / "server.key",
        client,
        tmp_path / "client.pem",
        tmp_path / "client.key",
    )


@pytest.fixture
def tls_receiver(store: ClickHouseStore, pki: Pki) -> Iterator[RunningReceiver]:
    running = RunningReceiver(
        store,
        tls_cert_file=pki.cert_file,
        tls_key_file=pki.key_file,
        reload_interval_seconds=0.05,
    )
    yield running
    running.stop()


@pytest.fixture
def mtls_receiver(store: ClickHouseStore, pki: Pki) -> Iterator[RunningReceiver]:
    running = RunningReceiver(
        store,
        tls_cert_file=pki.cert_file,
        tls_key_file=pki.key_file,
        tls_client_ca_file=pki.ca_file,
    )
    yield running
    running.stop()


def _spans(stream: str) -> Sequence[ReadableSpan]:
    return record_spans([Evaluation(stream, 0), Evaluation(stream, 1)])


def _https(receiver: RunningReceiver) -> str:
    return receiver.http_endpoint.replace("http://", "https://")


def _count(receiver: RunningReceiver, stream: str) -> int:
    return int(
        receiver.store.query(
            "SELECT count() FROM holonograph.evaluation_events FINAL"
            " WHERE emission_stream = {s:String}",
            {"s": stream},
        ).scalar()
    )


def _grpc_raw(
    endpoint: str,
    credentials: grpc.ChannelCredentials | None,
    payload: bytes = b"",
) -> grpc.StatusCode:
    """One export on a fresh connection; its status code (no exporter retries)."""
    channel = (
        grpc.secure_channel(endpoint, credentials)
        if credentials is not None
        else grpc.insecure_channel(endpoint)
    )
    with channel:
        try:
            channel.unary_unary(EXPORT)(payload, timeout=5)
        except grpc.RpcError as err:
            return err.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def test_official_exporters_succeed_over_tls(tls_receiver: RunningReceiver, pki: Pki) -> None:
    grpc_exporter = GrpcSpanExporter(
        endpoint=tls_receiver.grpc_endpoint,
        credentials=grpc.ssl_channel_credentials(root_certificates=pki.ca.cert_pem),
        timeout=20,
    )
    http_exporter = HttpSpanExporter(
        endpoint=f"{_https(tls_receiver)}/v1/traces", certificate_file=str(pki.ca_file), timeout=20
    )
    try:
        assert grpc_exporter.export(_spans("tls-grpc")) is SpanExportResult.SUCCESS
        assert http_exporter.export(_spans("tls-http")) is SpanExportResult.SUCCESS
    finally:
        grpc_exporter.shutdown()
        http_exporter.shutdown()
    assert _count(tls_receiver, "tls-grpc") == 2
    assert _count(tls_receiver, "tls-http") == 2


def test_plaintext_clients_are_refused(tls_receiver: RunningReceiver) -> None:
    payload = export_request(_spans("plain")).SerializeToString()
    assert _grpc_raw(tls_receiver.grpc_endpoint, None, payload) is grpc.StatusCode.UNAVAILABLE
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.post(
            f"{tls_receiver.http_endpoint}/v1/traces",
            data=payload,
            headers={"Content-Type": "application/x-protobuf"},
            timeout=10,
        )
    assert _count(tls_receiver, "plain") == 0


def test_mtls_refuses_clients_without_a_valid_certificate(
    mtls_receiver: RunningReceiver, pki: Pki
) -> None:
    payload = export_request(_spans("mtls")).SerializeToString()
    anonymous = grpc.ssl_channel_credentials(root_certificates=pki.ca.cert_pem)
    assert _grpc_raw(mtls_receiver.grpc_endpoint, anonymous, payload) is grpc.StatusCode.UNAVAILABLE
    stranger = CertificateAuthority("someone else").issue("stranger", server=False)
    foreign = grpc.ssl_channel_credentials(pki.ca.cert_pem, stranger.key_pem, stranger.cert_pem)
    assert _grpc_raw(mtls_receiver.grpc_endpoint, foreign, payload) is grpc.StatusCode.UNAVAILABLE
    # TLS 1.3: the server's refusal may come after the client's handshake finished.
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.post(
            f"{_https(mtls_receiver)}/v1/traces",
            data=payload,
            headers={"Content-Type": "application/x-protobuf"},
            verify=str(pki.ca_file),
            timeout=10,
        )
    assert _count(mtls_receiver, "mtls") == 0

    client = grpc.ssl_channel_credentials(pki.ca.cert_pem, pki.client.key_pem, pki.client.cert_pem)
    grpc_exporter = GrpcSpanExporter(
        endpoint=mtls_receiver.grpc_endpoint, credentials=client, timeout=20
    )
    http_exporter = HttpSpanExporter(
        endpoint=f"{_https(mtls_receiver)}/v1/traces",
        certificate_file=str(pki.ca_file),
        client_certificate_file=str(pki.client_cert_file),
        client_key_file=str(pki.client_key_file),
        timeout=20,
    )
    try:
        assert grpc_exporter.export(_spans("mtls-grpc")) is SpanExportResult.SUCCESS
        assert http_exporter.export(_spans("mtls-http")) is SpanExportResult.SUCCESS
    finally:
        grpc_exporter.shutdown()
        http_exporter.shutdown()
    assert _count(mtls_receiver, "mtls-grpc") == 2
    assert _count(mtls_receiver, "mtls-http") == 2


def test_rotated_certificate_is_served_without_restart(
    tls_receiver: RunningReceiver, pki: Pki, tmp_path: Path
) -> None:
    new_ca = CertificateAuthority("rotated CA")
    new_ca_file = tmp_path / "new-ca.pem"
    new_ca_file.write_bytes(new_ca.cert_pem)
    old_trust = grpc.ssl_channel_credentials(root_certificates=pki.ca.cert_pem)
    new_trust = grpc.ssl_channel_credentials(root_certificates=new_ca.cert_pem)
    endpoint = tls_receiver.grpc_endpoint
    assert _grpc_raw(endpoint, old_trust) is grpc.StatusCode.OK
    assert _grpc_raw(endpoint, new_trust) is grpc.StatusCode.UNAVAILABLE

    new_ca.issue("holonograph receiver").write(pki.cert_file, pki.key_file)

    wait_until(lambda: _grpc_raw(endpoint, new_trust) is grpc.StatusCode.OK, what="gRPC rotation")
    assert _grpc_raw(endpoint, old_trust) is grpc.StatusCode.UNAVAILABLE

    def http_trusts(ca_file: Path) -> bool:
        try:
            requests.post(
                f"{_https(tls_receiver)}/v1/traces",
                data=b"",
                headers={"Content-Type": "application/x-protobuf"},
                verify=str(ca_file),
                timeout=5,
            )
        except requests.exceptions.SSLError:
            return False
        return True

    wait_until(lambda: http_trusts(new_ca_file), what="HTTP rotation")
    assert not http_trusts(pki.ca_file)
    # The service kept running: a new export over the rotated certificate lands.
    exporter = GrpcSpanExporter(endpoint=endpoint, credentials=new_trust, timeout=20)
    try:
        assert exporter.export(_spans("rotated")) is SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    assert _count(tls_receiver, "rotated") == 2


def test_a_broken_rotation_keeps_the_old_certificate(
    tls_receiver: RunningReceiver, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    # A key that does not match its certificate (half a rotation) is not taken.
    stranger = CertificateAuthority("other").issue("holonograph receiver")
    pki.key_file.write_bytes(stranger.key_pem)
    wait_until(
        lambda: "TLS files changed but cannot be loaded" in caplog.text, what="refused reload"
    )
    tls = tls_receiver.service.tls
    assert tls is not None and tls.generation == 0
    trust = grpc.ssl_channel_credentials(root_certificates=pki.ca.cert_pem)
    assert _grpc_raw(tls_receiver.grpc_endpoint, trust) is grpc.StatusCode.OK
