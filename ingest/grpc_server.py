"""OTLP/gRPC transport: `TraceService/Export`, translated to the shared export path.

The handler receives raw bytes (no deserializer) so the size limit and the decode
error message are ours. grpc-core inflates gzip-compressed messages itself and
enforces `grpc.max_receive_message_length` on the inflated size.
"""

from __future__ import annotations

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess as PB2ExportTracePartialSuccess,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse as PB2ExportTraceServiceResponse,
)

from ingest.decode import parse_protobuf
from ingest.errors import PayloadTooLarge
from ingest.export import Exporter, ExportOutcome
from ingest.listen import ListenError
from ingest.status import classify

EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def response_for(outcome: ExportOutcome) -> PB2ExportTraceServiceResponse:
    response = PB2ExportTraceServiceResponse()
    if outcome.rejected_spans:
        response.partial_success.CopyFrom(
            PB2ExportTracePartialSuccess(
                rejected_spans=outcome.rejected_spans, error_message=outcome.error_message
            )
        )
    return response


class _TraceService(grpc.GenericRpcHandler):  # type: ignore[misc]
    def __init__(self, exporter: Exporter, max_request_bytes: int) -> None:
        self._exporter = exporter
        self._max_bytes = max_request_bytes
        self._handler = grpc.unary_unary_rpc_method_handler(self._export)

    def service(
        self, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler | None:
        if handler_call_details.method == EXPORT_METHOD:
            return self._handler
        return None

    async def _export(self, payload: bytes, context: grpc.aio.ServicerContext) -> bytes:
        try:
            if len(payload) > self._max_bytes:
                raise PayloadTooLarge(
                    f"request of {len(payload)} bytes exceeds {self._max_bytes} bytes"
                )
            with self._exporter.admission.admit(len(payload)):
                request = parse_protobuf(payload)
                outcome = await self._exporter.export(request, len(payload))
        except Exception as err:
            failure = classify(err)
            await context.abort(
                failure.grpc_code,
                failure.message,
                trailing_metadata=(
                    ("grpc-status-details-bin", failure.rpc_status().SerializeToString()),
                ),
            )
            raise AssertionError("unreachable") from None
        body: bytes = response_for(outcome).SerializeToString()
        return body


async def start_grpc_server(
    exporter: Exporter, host: str, port: int, max_request_bytes: int
) -> tuple[grpc.aio.Server, int]:
    """Start serving; returns the server and the bound port (port 0 picks a free one)."""
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", max_request_bytes + 1),
            ("grpc.max_send_message_length", 16 * 1024 * 1024),
            ("grpc.so_reuseport", 0),
        ],
    )
    server.add_generic_rpc_handlers((_TraceService(exporter, max_request_bytes),))
    try:
        bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError:  # grpcio raises where older versions returned 0
        bound = 0
    if bound == 0:
        raise ListenError(f"cannot listen on {host}:{port} (OTLP/gRPC): in use or not available")
    await server.start()
    return server, bound
