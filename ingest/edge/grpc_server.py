"""OTLP/gRPC transport: `TraceService/Export` and `LogsService/Export`, translated to
the shared edge steps.

The handler receives raw bytes (no deserializer) so the size limit and the decode
error message are ours. grpc-core inflates gzip-compressed messages itself and
enforces `grpc.max_receive_message_length` on the inflated size.

Export is registered as a stream-unary method (a unary call is the same on the
wire): the handler authenticates from the metadata and then reads the one message
when its principal's reading turn comes. Until then the transport holds no more of
it than the stream's flow-control window (`grpc.http2.lookahead_bytes`, with the
window growth of BDP probing off), so waiting calls cost almost no memory, and a
connection holds at most `max_streams_per_connection` such windows. grpcio shows a
message only once it arrived whole, so a gRPC body is bounded by the body timeout
(the minimum data rate needs the progress only HTTP shows).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

import grpc

from ingest.edge.admission import PROTOBUF_EXPANSION
from ingest.edge.answers import classify
from ingest.edge.steps import SIGNALS, TRACES_SIGNAL, Edge, OtlpSignal
from ingest.errors import DecodeError, ListenError, PayloadTooLarge
from ingest.export.handler import ExportOutcome

EXPORT_METHOD = TRACES_SIGNAL.grpc_method


_NOTHING_REJECTED = ExportOutcome(0, 0, 0, "")

# Bytes a call's stream may hold in the transport before its message is read.
STREAM_WINDOW_BYTES = 64 * 1024


class _ExportService(grpc.GenericRpcHandler):  # type: ignore[misc]
    """Every OTLP signal's Export method (traces, logs) on one server."""

    def __init__(self, edge: Edge) -> None:
        self._edge = edge
        self._handlers = {
            signal.grpc_method: grpc.stream_unary_rpc_method_handler(self._method(signal))
            for signal in SIGNALS
        }
        # What a request with nothing rejected is answered (an empty response), built
        # and serialized once per signal, not once per request.
        self._accepted: dict[str, bytes] = {
            signal.name: signal.respond(_NOTHING_REJECTED).SerializeToString() for signal in SIGNALS
        }

    def service(
        self, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler | None:
        return self._handlers.get(handler_call_details.method)

    def _method(
        self, signal: OtlpSignal
    ) -> Callable[[object, grpc.aio.ServicerContext], Awaitable[bytes]]:
        """`signal`'s handler: a coroutine function of its own (grpc.aio inspects it on
        every call, which a `functools.partial` makes slower)."""

        async def export(requests: object, context: grpc.aio.ServicerContext) -> bytes:
            return await self._export(signal, context)

        return export

    async def _export(self, signal: OtlpSignal, context: grpc.aio.ServicerContext) -> bytes:
        try:
            return await self._answer(signal, context)
        except Exception as err:
            failure = classify(err)
            self._edge.refused("grpc", err, context.peer())
        # Aborting outside the `except` block: the error (and with it the frames holding
        # the request's bytes) is released now, not at the next garbage collection.
        await context.abort(
            failure.grpc_code,
            failure.message,
            trailing_metadata=(
                ("grpc-status-details-bin", failure.rpc_status().SerializeToString()),
            ),
        )
        raise AssertionError("unreachable")

    async def _answer(self, signal: OtlpSignal, context: grpc.aio.ServicerContext) -> bytes:
        edge = self._edge
        principal = edge.authenticate(_authorization(context))
        reader = edge.reader(principal, peer_address(context.peer()))
        payload = await edge.read(lambda: _one_message(context, signal), reader)
        if len(payload) > edge.max_request_bytes:
            raise PayloadTooLarge(
                f"request of {len(payload)} bytes exceeds {edge.max_request_bytes} bytes"
            )
        outcome = await signal.export(
            edge, principal, payload, signal.parse_protobuf, PROTOBUF_EXPANSION
        )
        if not outcome.rejected_spans:
            return self._accepted[signal.name]
        body: bytes = signal.respond(outcome).SerializeToString()
        return body


@functools.lru_cache(maxsize=4096)
def peer_address(peer: str) -> str:
    """`ipv4:10.0.0.7:5123` -> `10.0.0.7`, `ipv6:[::1]:5123` -> `::1`: the client's
    address as the HTTP listener sees it, so one client is one principal on both."""
    kind, _, rest = peer.partition(":")
    if kind not in ("ipv4", "ipv6") or ":" not in rest:
        return peer
    return rest.rsplit(":", 1)[0].strip("[]")


def _authorization(context: grpc.aio.ServicerContext) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key == "authorization" and isinstance(value, str):
            return value
    return None


async def _one_message(context: grpc.aio.ServicerContext, signal: OtlpSignal) -> bytes:
    message = await context.read()
    if message is grpc.aio.EOF:
        raise DecodeError(f"the call carried no export request message ({signal.name})")
    body: bytes = message
    return body


async def start_grpc_server(
    edge: Edge,
    host: str,
    port: int,
    max_concurrent_rpcs: int,
    credentials: grpc.ServerCredentials | None = None,
    max_streams_per_connection: int = 16,
) -> tuple[grpc.aio.Server, int]:
    """Start serving; returns the server and the bound port (port 0 picks a free one).
    With `credentials` the port speaks TLS only. A connection may open at most
    `max_streams_per_connection` calls at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS:
    clients queue the rest), so what it can make the transport hold before its calls
    get a reading turn is that many stream windows."""
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", edge.max_request_bytes + 1),
            ("grpc.max_send_message_length", 16 * 1024 * 1024),
            ("grpc.so_reuseport", 0),
            ("grpc.http2.lookahead_bytes", STREAM_WINDOW_BYTES),
            ("grpc.http2.bdp_probe", 0),
            ("grpc.max_concurrent_streams", max_streams_per_connection),
        ],
        maximum_concurrent_rpcs=max_concurrent_rpcs,
    )
    server.add_generic_rpc_handlers((_ExportService(edge),))
    address = f"{host}:{port}"
    try:
        if credentials is None:
            bound = server.add_insecure_port(address)
        else:
            bound = server.add_secure_port(address, credentials)
    except RuntimeError:  # grpcio raises where older versions returned 0
        bound = 0
    if bound == 0:
        raise ListenError(f"cannot listen on {host}:{port} (OTLP/gRPC): in use or not available")
    await server.start()
    return server, bound
