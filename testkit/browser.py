"""Headless Chromium (Debian's `chromium`) driven over the DevTools protocol, for tests
that open a page and check what it drew, what it requested and what it says.

The browser runs with the flags the machine notes prescribe (no sandbox, no GPU, no
background networking, no component updates or sync, a fresh profile) and every
outgoing connection, loopback included, sent to a proxy of the caller's: a page's own
requests are read from the protocol's `Network` events, which the browser's own
housekeeping traffic does not appear in.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import re
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

CHROMIUM = shutil.which("chromium")
_LISTENING = re.compile(r"DevTools listening on (ws://\S+)")
_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
    "--no-default-browser-check", "--remote-debugging-port=0",
)  # fmt: skip


@dataclass
class Visit:
    """One page load: the URLs the page requested, its screenshot (PNG bytes) and the
    value of an expression evaluated in it."""

    requests: list[str] = field(default_factory=list)
    screenshot: bytes = b""
    value: Any = None


class Browser:
    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws = ws
        self._next = 0
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._events: list[dict[str, Any]] = []
        self._changed = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self._ws:
            data = json.loads(message.data)
            if "id" in data and data["id"] in self._pending:
                self._pending.pop(data["id"]).set_result(data)
            else:
                self._events.append(data)
                self._changed.set()

    async def call(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        self._next += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[self._next] = future
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        await self._ws.send_str(json.dumps(message))
        reply = await asyncio.wait_for(future, 60)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        result: dict[str, Any] = reply.get("result", {})
        return result

    async def _event(self, method: str, session: str, timeout: float = 60) -> None:
        """Until the event has arrived (polled on each new event, with a deadline)."""
        async with asyncio.timeout(timeout):
            while not any(
                e.get("method") == method and e.get("sessionId") == session for e in self._events
            ):
                self._changed.clear()
                await self._changed.wait()

    async def visit(self, url: str, expression: str | None = None, width: int = 1200) -> Visit:
        """Open `url` in a new tab, wait for its load event, then screenshot the whole
        page and evaluate `expression` (returned by value)."""
        target = await self.call("Target.createTarget", {"url": "about:blank"})
        attached = await self.call(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
        )
        session = attached["sessionId"]
        await self.call("Network.enable", session=session)
        await self.call("Page.enable", session=session)
        await self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": 1600, "deviceScaleFactor": 1, "mobile": False},
            session,
        )
        await self.call("Page.navigate", {"url": url}, session)
        await self._event("Page.loadEventFired", session)
        visit = Visit()
        shot = await self.call(
            "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session
        )
        visit.screenshot = base64.b64decode(shot["data"])
        if expression is not None:
            evaluated = await self.call(
                "Runtime.evaluate", {"expression": expression, "returnByValue": True}, session
            )
            visit.value = evaluated["result"].get("value")
        visit.requests = [
            e["params"]["request"]["url"]
            for e in self._events
            if e.get("method") == "Network.requestWillBeSent" and e.get("sessionId") == session
        ]
        await self.call("Target.closeTarget", {"targetId": target["targetId"]})
        return visit

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.call("Browser.close")
        self._reader.cancel()


@contextlib.asynccontextmanager
async def chromium(profile: Path, proxy_port: int) -> AsyncIterator[Browser]:
    """A headless Chromium with a fresh profile in `profile`, every connection sent to
    the proxy on `proxy_port`."""
    if CHROMIUM is None:
        raise FileNotFoundError("chromium is not installed")
    process = await asyncio.create_subprocess_exec(
        CHROMIUM, *_FLAGS, f"--user-data-dir={profile}",
        f"--proxy-server=http://127.0.0.1:{proxy_port}", "--proxy-bypass-list=<-loopback>",
        "about:blank",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stderr is not None
    drain: asyncio.Task[None] | None = None
    try:
        async with asyncio.timeout(60):
            while True:
                line = (await process.stderr.readline()).decode(errors="replace")
                if not line:
                    raise RuntimeError("chromium exited before its DevTools endpoint opened")
                found = _LISTENING.search(line)
                if found:
                    break
        drain = asyncio.create_task(_drain(process.stderr))
        async with (
            aiohttp.ClientSession() as http,
            http.ws_connect(found[1], max_msg_size=0) as ws,
        ):
            browser = Browser(ws)
            try:
                yield browser
            finally:
                await browser.close()
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()
        if drain is not None:
            drain.cancel()


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.readline():
        pass
