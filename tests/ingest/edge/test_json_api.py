"""What every JSON endpoint shares, on a bare aiohttp app: a body that does not arrive
within its timeout is 408 in the envelope, a client that leaves mid-body ends the
request without an error logged as a bug, and a step that fails unexpectedly answers
500 `internal` in the envelope."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from ingest.edge.auth import Authenticator
from ingest.edge.json_api import JsonApi, read_json
from ingest.export.principal import Principal

HEADERS = "x-holonograph-run-mode: production\r\nContent-Type: application/json\r\n"


def _app(seen: list[str]) -> web.Application:
    api = JsonApi(Authenticator(None))

    async def echo(request: web.Request, principal: Principal) -> Any:
        try:
            return {"body": await read_json(request, 1024, "a body", timeout=0.3)}
        finally:
            seen.append("done")

    async def broken(request: web.Request, principal: Principal) -> Any:
        raise RuntimeError("a bug\nsecond line")

    async def handle_echo(request: web.Request) -> web.Response:
        return await api.answer(request, echo)

    async def handle_broken(request: web.Request) -> web.Response:
        return await api.answer(request, broken)

    app = web.Application()
    app.router.add_post("/echo", handle_echo)
    app.router.add_post("/broken", handle_broken)
    return app


async def _raw(server: TestServer, text: str, close: bool = False) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(text.encode())
    await writer.drain()
    if close:
        writer.close()
        return b""
    answer = await asyncio.wait_for(reader.read(4096), 10)
    writer.close()
    return answer


def test_slow_bodies_clients_that_leave_and_bugs(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[str] = []

    async def run() -> tuple[bytes, bytes, bytes]:
        async with TestServer(_app(seen)) as server:
            partial = f"POST /echo HTTP/1.1\r\nHost: x\r\n{HEADERS}Content-Length: 50\r\n\r\n{{"
            slow = await _raw(server, partial)
            await _raw(server, partial, close=True)
            for _ in range(100):
                if len(seen) == 2:
                    break
                await asyncio.sleep(0.05)
            whole = await _raw(
                server, f"POST /echo HTTP/1.1\r\nHost: x\r\n{HEADERS}Content-Length: 2\r\n\r\n{{}}"
            )
            bug = await _raw(
                server,
                f"POST /broken HTTP/1.1\r\nHost: x\r\n{HEADERS}Content-Length: 2\r\n\r\n{{}}",
            )
            return slow, whole, bug

    with caplog.at_level(logging.ERROR, logger="ingest.edge.json_api"):
        slow, whole, bug = asyncio.run(run())
    assert slow.startswith(b"HTTP/1.1 408") and b'"code": "body_timeout"' in slow
    assert whole.startswith(b"HTTP/1.1 200") and b'"body": {}' in whole
    assert bug.startswith(b"HTTP/1.1 500") and b'"error": "internal error: a bug"' in bug
    assert seen == ["done", "done", "done"]  # the client that left ended its request
    assert [r.getMessage() for r in caplog.records] == ["POST /broken failed"]
