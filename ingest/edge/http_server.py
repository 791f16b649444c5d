"""OTLP/HTTP transport: `POST /v1/traces` and `POST /v1/logs` with protobuf or JSON,
optionally gzip, translated to the shared edge steps.

Answers in the request's content type; failures carry a `google.rpc.Status` body
and, when retryable, `Retry-After`. Reads are bounded: a connection must send its
request header within the header timeout (aiohttp closes a connection idle for
its keep-alive timeout, which covers a header still incomplete), the body within
the body timeout, and past `max_connections` open connections a new one is answered
503 with `Retry-After` and closed.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from google.protobuf import json_format
from google.protobuf.message import Message

from ingest.edge.admission import JSON_EXPANSION, PROTOBUF_EXPANSION
from ingest.edge.answers import classify
from ingest.edge.change_api import ChangeApi, add_change_routes
from ingest.edge.contract_api import ContractApi, add_contract_routes
from ingest.edge.steps import SIGNALS, TRACES_SIGNAL, Edge, OtlpSignal
from ingest.errors import (
    BodyTooSlow,
    ListenError,
    MalformedHttp,
    PayloadTooLarge,
    ReadTimeout,
    Unauthenticated,
    UnsupportedMediaType,
)
from ingest.export.decode import decode_body

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
TRACES_PATH = TRACES_SIGNAL.http_path
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


@dataclass(eq=False)
class Connection:
    """What the table knows of one open connection."""

    protocol: object
    transport: asyncio.Transport
    address: str
    order: int
    requests: int = 0  # requests that reached a handler
    headed: bool = False  # a complete request header arrived (before a handler runs)
    busy: int = 0  # requests being answered
    authenticated: bool = False  # a request on it passed authentication

    def shedding_rank(self) -> tuple[int, int] | None:
        """Which to shed first (lowest), or None when it is answering a request: one
        that has sent no complete request, then one never authenticated, then an idle
        keep-alive; the oldest first within each."""
        if self.busy or (self.headed and not self.requests):  # its first one is on its way
            return None
        if not self.headed:
            return (0, self.order)
        return (1 if not self.authenticated else 2, self.order)


def _header_waiting(transport: asyncio.Transport) -> bool:
    """Whether a whole request header already waits in the socket (plaintext only):
    a client that connected and sent its request at once is not one that sent
    nothing, even before the event loop read it."""
    raw = transport.get_extra_info("socket")
    if raw is None or transport.get_extra_info("sslcontext") is not None:
        return False
    try:
        with raw.dup() as sock:
            waiting: bytes = sock.recv(1 << 16, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except OSError:
        return False
    return b"\r\n\r\n" in waiting


class ConnectionTable:
    """Open HTTP connections, at most `max_connections` in all and `max_per_client` from
    one client address. A connection arriving past either cap sheds the first of
    `Connection.shedding_rank` (from its own address when that address is at its cap),
    so a client trickling headers on many sockets (slowloris) cannot keep another
    out; when nothing can be shed, the new one is refused."""

    def __init__(self, max_connections: int, max_per_client: int) -> None:
        self.max_connections = max_connections
        self.max_per_client = min(max_per_client, max_connections)
        self._open: dict[object, Connection] = {}
        self._by_transport: dict[asyncio.BaseTransport, Connection] = {}
        self._per_address: dict[str, int] = {}
        self._order = itertools.count()
        self.shed = 0

    def __len__(self) -> int:
        return len(self._open)

    def answering(self) -> int:
        """Connections with a request being answered (none of them can be shed)."""
        return sum(1 for connection in self._open.values() if connection.busy)

    def of(self, transport: asyncio.BaseTransport | None) -> Connection | None:
        return self._by_transport.get(transport) if transport is not None else None

    def admit(self, transport: asyncio.Transport, address: str, protocol: object = None) -> bool:
        """Make room for a new connection from `address` (shedding one if need be);
        False: refuse it."""
        at_client_cap = self._per_address.get(address, 0) >= self.max_per_client
        if at_client_cap and not self._shed_one(address):
            return False
        if len(self._open) >= self.max_connections and not self._shed_one(None):
            return False
        key = protocol if protocol is not None else transport
        connection = Connection(key, transport, address, next(self._order))
        self._open[key] = connection
        self._by_transport[transport] = connection
        self._per_address[address] = self._per_address.get(address, 0) + 1
        return True

    def forget(self, key: object) -> None:
        connection = self._open.pop(key, None)
        if connection is None:
            return
        self._by_transport.pop(connection.transport, None)
        left = self._per_address[connection.address] - 1
        if left:
            self._per_address[connection.address] = left
        else:
            del self._per_address[connection.address]

    def _shed_one(self, address: str | None) -> bool:
        ranked = [
            (rank, connection)
            for connection in self._open.values()
            if (address is None or connection.address == address)
            and (rank := connection.shedding_rank()) is not None
        ]
        for _, victim in sorted(ranked, key=lambda item: item[0]):
            if not victim.headed and _header_waiting(victim.transport):
                victim.headed = True  # its request is in the socket, not yet read: keep it
                continue
            break
        else:
            return False
        self.forget(victim.protocol)
        self.shed += 1
        if victim.requests:
            victim.transport.close()  # an idle keep-alive: a clean close
        else:
            victim.transport.abort()
        return True


class ExportRoute:
    """`POST` of one OTLP signal (`/v1/traces`, `/v1/logs`)."""

    def __init__(
        self, edge: Edge, connections: ConnectionTable, signal: OtlpSignal = TRACES_SIGNAL
    ) -> None:
        self._edge = edge
        self._max_bytes = edge.max_request_bytes
        self._connections = connections
        self._signal = signal

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
            connection = self._connections.of(http_request.transport)
            if connection is not None:
                connection.authenticated = True
            reader = edge.reader(principal, _peer(http_request))
            body = await edge.read(lambda: self._read(http_request), reader)
            payload = decode_body(
                body, http_request.headers.get("Content-Encoding"), self._max_bytes
            )
            signal = self._signal
            if content_type == JSON:
                outcome = await signal.export(
                    edge, principal, payload, signal.parse_json, JSON_EXPANSION
                )
            else:
                outcome = await signal.export(
                    edge, principal, payload, signal.parse_protobuf, PROTOBUF_EXPANSION
                )
        except ReadTimeout as err:
            edge.refused("http", err, _peer(http_request))
            return await _answer_and_close(http_request, _failure_response(err, reply_type))
        except Exception as err:
            edge.refused("http", err, _peer(http_request))
            return _failure_response(err, reply_type)
        return web.Response(
            status=200,
            body=_encode(self._signal.respond(outcome), reply_type),
            content_type=reply_type,
        )

    async def _read(self, http_request: web.Request) -> bytes:
        """Read at most max bytes of (possibly compressed) body without buffering more,
        at the edge's minimum data rate."""
        length = http_request.content_length
        if length is not None and length > self._max_bytes:
            raise PayloadTooLarge(f"request of {length} bytes exceeds {self._max_bytes} bytes")
        rate = self._edge.min_body_rate
        loop = asyncio.get_running_loop()
        started = loop.time()
        chunks = bytearray()
        while True:
            try:
                async with asyncio.timeout_at(rate.deadline(started, len(chunks))):
                    chunk = await http_request.content.readany()
            except TimeoutError:
                raise BodyTooSlow(
                    f"the request body arrived slower than the minimum of {rate.describe()}:"
                    f" {len(chunks)} bytes in {loop.time() - started:.1f}s"
                ) from None
            if not chunk:
                return bytes(chunks)
            chunks += chunk
            if len(chunks) > self._max_bytes:
                raise PayloadTooLarge(f"request exceeds {self._max_bytes} bytes")


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


CONNECTIONS = web.AppKey("connections", ConnectionTable)


def build_http_app(
    edge: Edge,
    contracts: ContractApi | None = None,
    connections: ConnectionTable | None = None,
    changes: ChangeApi | None = None,
    mounts: Sequence[Callable[[web.Application], None]] = (),
    otlp: bool = True,
) -> web.Application:
    """OTLP's traces and logs paths (unless `otlp` is False: an API listener of its
    own), and the contract registry's and change events' paths when their endpoints are
    given, then what each of `mounts` adds (the analyses: routes `ingest` does not know,
    registered by its wiring). `connections` (default: 256, 64
    per client address) is what `CappedSite` admits connections by; every request
    marks its connection as having sent one."""
    table = connections if connections is not None else ConnectionTable(256, 64)

    @web.middleware
    async def mark(request: web.Request, handler: Handler) -> web.StreamResponse:
        connection = table.of(request.transport)
        if connection is None:
            return await handler(request)
        connection.requests += 1
        connection.busy += 1
        try:
            return await handler(request)
        finally:
            connection.busy -= 1

    app = web.Application(client_max_size=edge.max_request_bytes + 1, middlewares=[mark])
    app[CONNECTIONS] = table
    for signal in SIGNALS if otlp else ():
        app.router.add_post(signal.http_path, ExportRoute(edge, table, signal).handle)
    if contracts is not None:
        add_contract_routes(app, contracts)
    if changes is not None:
        add_change_routes(app, changes)
    for mount in mounts:
        mount(app)
    return app


class _Tracked(asyncio.Protocol):
    """aiohttp's protocol for one connection, admitted (or refused) by the table once
    its peer is known, and forgotten when it closes."""

    def __init__(self, inner: asyncio.Protocol, table: ConnectionTable, site: CappedSite) -> None:
        self._inner = inner
        self._table = table
        self._site = site
        self._admitted = False
        self._connection: Connection | None = None
        self._tail = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        peer = transport.get_extra_info("peername")
        address = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
        if not self._table.admit(transport, address, self):
            self._site.refused += 1
            transport.write(_TOO_MANY_CONNECTIONS)
            transport.close()
            return
        self._admitted = True
        self._connection = self._table.of(transport)
        self._inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._admitted:
            self._table.forget(self)
            self._inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if not self._admitted:
            return
        if self._connection is not None and not self._connection.headed:
            # The end of a request header, maybe split across reads: from now on this
            # connection is not one that sent nothing (aiohttp runs its handler later).
            self._tail = (self._tail + data)[-(len(data) + 3) :]
            if b"\r\n\r\n" in self._tail:
                self._connection.headed = True
            self._tail = self._tail[-3:]
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._admitted else None

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


class CappedSite(web.TCPSite):
    """A TCP site that admits connections by its app's `ConnectionTable` (past a cap,
    one that has sent nothing is shed or the new one refused); the TLS handshake must
    finish within `handshake_timeout`."""

    __slots__ = ("_handshake_timeout", "_table", "refused")

    def __init__(
        self,
        runner: web.AppRunner,
        host: str,
        port: int,
        handshake_timeout: float,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__(runner, host, port, ssl_context=ssl_context)
        app = runner.app
        self._table = app[CONNECTIONS] if isinstance(app, web.Application) else None
        self._handshake_timeout = handshake_timeout
        self.refused = 0

    @property
    def shed(self) -> int:
        return self._table.shed if self._table is not None else 0

    async def start(self) -> None:
        self._runner._reg_site(self)
        server = self._runner.server
        assert server is not None
        table = self._table

        def connection() -> asyncio.BaseProtocol:
            inner = server()
            return _Tracked(inner, table, self) if table is not None else inner

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
    handshake_timeout: float,
    ssl_context: ssl.SSLContext | None = None,
    what: str = "OTLP/HTTP",
) -> tuple[CappedSite, int]:
    await runner.setup()
    site = CappedSite(runner, host, port, handshake_timeout, ssl_context)
    try:
        await site.start()
    except OSError as err:  # the caller owns `runner` and cleans it up
        raise ListenError(
            f"cannot listen on {host}:{port} ({what}): {err.strerror or err}"
        ) from err
    return site, site.port
