"""OTLP/HTTP transport: `POST /v1/traces` with protobuf or JSON, optionally gzip.

Answers in the request's content type; failures carry a `google.rpc.Status` body
and, when retryable, `Retry-After`.
"""

from __future__ import annotations

from aiohttp import web
from google.protobuf import json_format
from google.protobuf.message import Message

from ingest.decode import decode_body, parse_json, parse_protobuf
from ingest.errors import PayloadTooLarge, UnsupportedMediaType
from ingest.export import Exporter
from ingest.grpc_server import response_for
from ingest.status import classify

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
TRACES_PATH = "/v1/traces"


def _encode(message: Message, content_type: str) -> bytes:
    if content_type == JSON:
        text: str = json_format.MessageToJson(message, indent=None)
        return text.encode()
    body: bytes = message.SerializeToString()
    return body


class TracesHandler:
    def __init__(self, exporter: Exporter, max_request_bytes: int) -> None:
        self._exporter = exporter
        self._max_bytes = max_request_bytes

    async def handle(self, http_request: web.Request) -> web.Response:
        content_type = http_request.content_type
        reply_type = content_type if content_type in (PROTOBUF, JSON) else PROTOBUF
        try:
            if content_type not in (PROTOBUF, JSON):
                raise UnsupportedMediaType(
                    f"Content-Type {content_type!r} is not supported; use {PROTOBUF} or {JSON}"
                )
            body = await self._read(http_request)
            payload = decode_body(
                body, http_request.headers.get("Content-Encoding"), self._max_bytes
            )
            with self._exporter.admission.admit(len(payload)):
                request = parse_json(payload) if content_type == JSON else parse_protobuf(payload)
                outcome = await self._exporter.export(request, len(payload))
        except Exception as err:
            failure = classify(err)
            return web.Response(
                status=failure.http_status,
                body=_encode(failure.rpc_status(), reply_type),
                content_type=reply_type,
                headers=failure.retry_after_header(),
            )
        return web.Response(
            status=200, body=_encode(response_for(outcome), reply_type), content_type=reply_type
        )

    async def _read(self, http_request: web.Request) -> bytes:
        """Read at most max bytes of (possibly compressed) body without buffering more."""
        length = http_request.content_length
        if length is not None and length > self._max_bytes:
            raise PayloadTooLarge(f"request of {length} bytes exceeds {self._max_bytes} bytes")
        chunks = bytearray()
        async for chunk in http_request.content.iter_chunked(1 << 16):
            chunks += chunk
            if len(chunks) > self._max_bytes:
                raise PayloadTooLarge(f"request exceeds {self._max_bytes} bytes")
        return bytes(chunks)


def build_http_app(exporter: Exporter, max_request_bytes: int) -> web.Application:
    app = web.Application(client_max_size=max_request_bytes + 1)
    handler = TracesHandler(exporter, max_request_bytes)
    app.router.add_post(TRACES_PATH, handler.handle)
    return app
