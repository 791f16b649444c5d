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

    async def visit(self, url: str, expression: str | None = None, width: int = 1200) -> Visit:
        """Open `url` in a new tab, wait for its load event, then screenshot the whole
        page and evaluate `expression` (returned by value)."""
        tab = await self.open(url, width, 1600)
        visit = Visit(screenshot=await tab.screenshot())
        if expression is not None:
            visit.value = await tab.evaluate(expression)
        visit.requests = [request["url"] for request in tab.requests()]
        await tab.close()
        return visit

    async def open(self, url: str, width: int = 1280, height: int = 1000) -> Tab:
        """A new tab at `url`, loaded, whose console, requests and answers are recorded
        from the start."""
        target = await self.call("Target.createTarget", {"url": "about:blank"})
        attached = await self.call(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
        )
        tab = Tab(self, target["targetId"], attached["sessionId"])
        for domain in ("Network", "Page", "Runtime", "Log"):
            await tab.call(f"{domain}.enable")
        await tab.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        await tab.goto(url)
        return tab

    def events_of(self, session: str, method: str) -> list[dict[str, Any]]:
        return [
            e for e in self._events if e.get("sessionId") == session and e.get("method") == method
        ]

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.call("Browser.close")
        self._reader.cancel()


# Keys as the DevTools protocol types them (Input.dispatchKeyEvent).
_KEYS: dict[str, dict[str, Any]] = {
    "Tab": {"key": "Tab", "code": "Tab", "windowsVirtualKeyCode": 9},
    "Enter": {"key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13, "text": "\r"},
    "ArrowUp": {"key": "ArrowUp", "code": "ArrowUp", "windowsVirtualKeyCode": 38},
    "ArrowDown": {"key": "ArrowDown", "code": "ArrowDown", "windowsVirtualKeyCode": 40},
}


class Tab:
    """One open page: evaluate in it, wait for a condition it reaches, type keys, and
    read what it logged, requested and was answered."""

    def __init__(self, browser: Browser, target: str, session: str) -> None:
        self._browser = browser
        self._target = target
        self.session = session

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self._browser.call(method, params, self.session)

    async def goto(self, url: str) -> None:
        loads = len(self._browser.events_of(self.session, "Page.loadEventFired"))
        await self.call("Page.navigate", {"url": url})
        async with asyncio.timeout(60):
            while len(self._browser.events_of(self.session, "Page.loadEventFired")) <= loads:
                self._browser._changed.clear()
                await self._browser._changed.wait()

    async def evaluate(self, expression: str) -> Any:
        """The expression's value (a promise awaited), or RuntimeError with the page's
        exception."""
        done = await self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in done:
            raise RuntimeError(f"{expression}: {done['exceptionDetails']}")
        return done["result"].get("value")

    async def wait_for(self, condition: str, timeout_ms: int = 45_000) -> Any:
        """The first truthy value of the JavaScript `condition`, checked by the page on
        each of its animation frames (or a timer when hidden) until `timeout_ms`."""
        script = (
            "new Promise((resolve, reject) => { const t0 = Date.now(); const check = () => {"
            f" let v; try {{ v = ({condition}); }} catch (e) {{ v = undefined; }}"
            " if (v) resolve(v);"
            f" else if (Date.now() - t0 > {timeout_ms}) reject(new Error('timed out: ' +"
            f" {json.dumps(condition)}));"
            " else setTimeout(check, 20); }; check(); })"
        )
        return await self.evaluate(script)

    async def press(self, key: str) -> None:
        """One key: `Tab`, `Enter`, `ArrowUp`, `ArrowDown`, or a printable character."""
        fields = _KEYS.get(key) or {"key": key, "text": key, "code": f"Key{key.upper()}"}
        down = {"type": "keyDown", **fields}
        await self.call("Input.dispatchKeyEvent", down)
        await self.call(
            "Input.dispatchKeyEvent",
            {"type": "keyUp", **{k: v for k, v in fields.items() if k != "text"}},
        )

    async def screenshot(self) -> bytes:
        shot = await self.call(
            "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}
        )
        return base64.b64decode(shot["data"])

    def errors(self) -> list[str]:
        """What the page logged as an error: uncaught exceptions, console.error, and the
        browser's own error entries (a failed load, a refused policy)."""
        out = [
            str(e["params"]["exceptionDetails"].get("exception", {}).get("description")
                or e["params"]["exceptionDetails"].get("text"))
            for e in self._browser.events_of(self.session, "Runtime.exceptionThrown")
        ]  # fmt: skip
        out += [
            " ".join(str(a.get("value", a.get("description", ""))) for a in e["params"]["args"])
            for e in self._browser.events_of(self.session, "Runtime.consoleAPICalled")
            if e["params"]["type"] in ("error", "assert")
        ]
        out += [
            f"{e['params']['entry'].get('url', '')}: {e['params']['entry']['text']}"
            for e in self._browser.events_of(self.session, "Log.entryAdded")
            if e["params"]["entry"]["level"] == "error"
        ]
        return out

    def requests(self) -> list[dict[str, Any]]:
        """The requests the page sent (`url`, `method`, `headers`, `postData`), in order."""
        return [
            e["params"]["request"]
            for e in self._browser.events_of(self.session, "Network.requestWillBeSent")
        ]

    def responses(self) -> list[tuple[str, int]]:
        return [
            (e["params"]["response"]["url"], e["params"]["response"]["status"])
            for e in self._browser.events_of(self.session, "Network.responseReceived")
        ]

    async def close(self) -> None:
        await self._browser.call("Target.closeTarget", {"targetId": self._target})


@contextlib.asynccontextmanager
async def chromium(
    profile: Path, proxy_port: int, loopback_direct: bool = False
) -> AsyncIterator[Browser]:
    """A headless Chromium with a fresh profile in `profile`, every connection sent to
    the proxy on `proxy_port` (`loopback_direct`: but those to loopback, where the
    server under test listens)."""
    if CHROMIUM is None:
        raise FileNotFoundError("chromium is not installed")
    process = await asyncio.create_subprocess_exec(
        CHROMIUM, *_FLAGS, f"--user-data-dir={profile}",
        f"--proxy-server=http://127.0.0.1:{proxy_port}",
        *(() if loopback_direct else ("--proxy-bypass-list=<-loopback>",)), "about:blank",
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
