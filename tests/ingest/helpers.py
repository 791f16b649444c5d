"""Raw OTLP clients for tests that need exact bytes, statuses and trailers."""

from __future__ import annotations

import base64
import gzip as gzip_module
import json
from typing import Any

import grpc
import pytest
import requests
from google.protobuf import json_format
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest as PB2ExportTraceServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse as PB2ExportTraceServiceResponse,
)

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def to_otlp_json(request: PB2ExportTraceServiceRequest) -> bytes:
    """OTLP/JSON: like protobuf JSON but trace/span ids in hex."""
    document = json_format.MessageToDict(request)
    for rs in document.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(document).encode()


class GrpcReply:
    def __init__(
        self, code: grpc.StatusCode, details: str, body: bytes | None, trailers: Any
    ) -> None:
        self.code = code
        self.details = details
        self.body = body
        self.trailers = dict(trailers or ())

    def response(self) -> PB2ExportTraceServiceResponse:
        assert self.body is not None
        return PB2ExportTraceServiceResponse.FromString(self.body)

    def retry_delay(self) -> float | None:
        raw = self.trailers.get("grpc-status-details-bin")
        if raw is None:
            return None
        status = status_pb2.Status.FromString(raw)
        for detail in status.details:
            info = error_details_pb2.RetryInfo()
            if detail.Unpack(info):
                return info.retry_delay.seconds + info.retry_delay.nanos / 1e9
        return None


def grpc_export(endpoint: str, payload: bytes, gzip: bool = False) -> GrpcReply:
    # A channel of its own connection, as a separate client has: grpc-core would
    # otherwise share one connection (and its stream cap) across these channels.
    options = [("grpc.max_send_message_length", 512 * 1024 * 1024)]
    options.append(("grpc.use_local_subchannel_pool", 1))
    with grpc.insecure_channel(endpoint, options=options) as channel:
        call = channel.unary_unary(EXPORT)
        compression = grpc.Compression.Gzip if gzip else grpc.Compression.NoCompression
        try:
            body, state = call.with_call(payload, timeout=30, compression=compression)
            return GrpcReply(grpc.StatusCode.OK, "", body, state.trailing_metadata())
        except grpc.RpcError as err:
            return GrpcReply(err.code(), err.details(), None, err.trailing_metadata())


def http_export(
    base_url: str,
    body: bytes,
    content_type: str = "application/x-protobuf",
    gzip: bool = False,
    method: str = "POST",
    headers: dict[str, str] | None = None,
) -> requests.Response:
    all_headers = {"Content-Type": content_type, **(headers or {})}
    if gzip:
        body = gzip_module.compress(body)
        all_headers["Content-Encoding"] = "gzip"
    return requests.request(
        method, f"{base_url}/v1/traces", data=body, headers=all_headers, timeout=30
    )


def http_response(reply: requests.Response) -> PB2ExportTraceServiceResponse:
    if reply.headers["Content-Type"].startswith("application/json"):
        return json_format.Parse(reply.content, PB2ExportTraceServiceResponse())
    return PB2ExportTraceServiceResponse.FromString(reply.content)


def http_status(reply: requests.Response) -> status_pb2.Status:
    if reply.headers["Content-Type"].startswith("application/json"):
        return json_format.Parse(reply.content, status_pb2.Status(), ignore_unknown_fields=True)
    return status_pb2.Status.FromString(reply.content)


def accept_run_mode_alias(monkeypatch: pytest.MonkeyPatch, alias: str) -> None:
    """The fix replay tests replay after: the run mode `alias` now means `production`."""
    from ingest.export import validate

    original = validate._run_mode

    def fixed(attrs: dict[str, Any]) -> str:
        return "production" if attrs.get("holonograph.run_mode") == alias else original(attrs)

    monkeypatch.setattr(validate, "_run_mode", fixed)
