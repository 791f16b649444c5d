"""OTLP/HTTP transport: `POST /v1/traces` with protobuf or JSON, optionally gzip,
translated to the shared edge steps.

Answers in the request's content type; failures carry a `google.rpc.Status` body
and, when retryable, `Retry-After`. Reads are bounded: a connection must send its
request header within the header timeout (aiohttp closes a connection idle for
its keep-alive timeout, which covers a header still incomplete), the body within
the body timeout, and past `max_connections` open connections a new one is answered
503 with `Retry-After` and closed.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from google.protobuf import json_format
from google.protobuf.message import Message

from ingest.edge.admission import JSON_EXPANSION, PROTOBUF_EXPANSION
from ingest.edge.answers import classify, response_for
from ingest.edge.contract_api import ContractApi, add_contract_routes
from ingest.edge.steps import Edge
from ingest.errors import (
    ListenError,
    MalformedHttp,
    PayloadTooLarge,
    ReadTimeout,
    Unauthenticated,
    UnsupportedMediaType,
)
from ingest.export.decode import decode_body, parse_json, parse_protobuf

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
TRACES_PATH = "/v1/traces"
_TOO_MANY_CONNECTIONS = (
    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: text/plain\r\n"
    b"Content-Length: 21\r\nConnection: close\r\n\r\ntoo many connections\n"
)


def _encode(message: Message, content_type: str) -> bytes:
    if content_type == JSON:
        text: str = json_format.MessageToJson(message, indent=None)
        return text.encode()
    body: bytes = message.SerializeToString()
    return body


class TracesHandler:
    def __init__(self, edge: Edge) -> None:
        self._edge = edge
        self._max_bytes = edge.max_request_bytes

    async def handle(self, http_request: web.Request) -> web.Response:
        content_type = http_request.content_type
        reply_type = content_type if content_type in (PROTOBUF, JSON) else PROTOBUF
        edge = self._edge
        try:
            if content_type not in (PROTOBUF, JSON):
                raise UnsupportedMediaType(
                    f"Content-Type {content_type!r} is not supported; use {PROTOBUF} or {JSON}"
                )
            principal = edge.authenticate(http_request.headers.get("Authorization"))
            body = await edge.read(lambda: self._read(http_request))
            payload = decode_body(
                body, http_request.headers.get("Content-Encoding"), self._max_bytes
            )
            if content_type == JSON:
                outcome = await edge.export(principal, payload, parse_json, JSON_EXPANSION)
            else:
                outcome = await edge.export(principal, payload, parse_protobuf, PROTOBUF_EXPANSION)
        except ReadTimeout as err:
            edge.refused("http", err, _peer(http_request))
            return await _answer_and_close(http_request, _failure_response(err, reply_type))
        except Exception as err:
            edge.refused("http", err, _peer(http_request))
            return _failure_response(err, reply_type)
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


def _peer(http_request: web.Request) -> str:
    return http_request.remote or "?"


class ServerLog(logging.Logger):
    """aiohttp's server log for our listener: a request that is not HTTP enough to
    reach a handler (a bad header, a corrupt chunk) is the client's doing, so it is a
    refusal (`Edge.refused`: counted and summarised), never a traceback per request.
    Everything else goes where aiohttp's own log would."""

    def __init__(self, edge: Edge) -> None:
        super().__init__("aiohttp.server")
        self.parent = logging.getLogger("aiohttp.server")
        self._edge = edge

    def exception(self, msg: object, *args: object, **kwargs: Any) -> None:
        error = kwargs.get("exc_info")
        if isinstance(error, HttpProcessingError):
            peer = args[0] if args and isinstance(args[0], str) else "?"
            first_line = (error.message or str(error)).strip().split("\n", 1)[0]
            self._edge.refused("http", MalformedHttp(first_line), peer)
            return
        if isinstance(error, BaseException):
            self._edge.refused("http", error, "?")
            return
        super().exception(msg, *args, **kwargs)


def _failure_response(err: Exception, reply_type: str) -> web.Response:
    failure = classify(err)
    headers = failure.retry_after_header()
    if isinstance(err, Unauthenticated):
        headers["WWW-Authenticate"] = "Bearer"
    response = web.Response(
        status=failure.http_status,
        body=_encode(failure.rpc_status(), reply_type),
        content_type=reply_type,
        headers=headers,
    )
    return response


async def _answer_and_close(http_request: web.Request, response: web.Response) -> web.Response:
    """Send the answer, then drop the connection: what is left of a body that did not
    arrive in time is not worth waiting for (aiohttp would linger to drain it)."""
    response.force_close()
    await response.prepare(http_request)
    await response.write_eof()
    if http_request.transport is not None:
        http_request.transport.close()
    return response


def build_http_app(edge: Edge, contracts: ContractApi | None = None) -> web.Application:
    """OTLP's traces path, and the contract registry's when `contracts` is given."""
    app = web.Application(client_max_size=edge.max_request_bytes + 1)
    handler = TracesHandler(edge)
    app.router.add_post(TRACES_PATH, handler.handle)
    if contracts is not None:
        add_contract_routes(app, contracts)
    return app


class _Refuse(asyncio.Protocol):
    """A connection past the cap: told so, then closed."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.WriteTransport)
        transport.write(_TOO_MANY_CONNECTIONS)
        transport.close()


class CappedSite(web.TCPSite):
    """A TCP site that refuses connections past `max_connections`; the TLS handshake
    must finish within `handshake_timeout`."""

    __slots__ = ("_handshake_timeout", "_max_connections", "refused")

    def __init__(
        self,
        runner: web.AppRunner,
        host: str,
        port: int,
        max_connections: int,
        handshake_timeout: float,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__(runner, host, port, ssl_context=ssl_context)
        self._max_connections = max_connections
        self._handshake_timeout = handshake_timeout
        self.refused = 0

    async def start(self) -> None:
        self._runner._reg_site(self)
        server = self._runner.server
        assert server is not None

        def connection() -> asyncio.BaseProtocol:
            if len(server.connections) >= self._max_connections:
                self.refused += 1
                return _Refuse()
            return server()

        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            connection,
            self._host,
            self._port,
            ssl=self._ssl_context,
            backlog=self._backlog,
            ssl_handshake_timeout=self._handshake_timeout if self._ssl_context else None,
        )
        self._bound_port = self._server.sockets[0].getsockname()[1]


async def start_http_site(
    runner: web.AppRunner,
    host: str,
    port: int,
    max_connections: int,
    handshake_timeout: float,
    ssl_context: ssl.SSLContext | None = None,
) -> tuple[CappedSite, int]:
    await runner.setup()
    site = CappedSite(runner, host, port, max_connections, handshake_timeout, ssl_context)
    try:
        await site.start()
    except OSError as err:  # the caller owns `runner` and cleans it up
        raise ListenError(
            f"cannot listen on {host}:{port} (OTLP/HTTP): {err.strerror or err}"
        ) from err
    return site, site.port
