"""A fake clock, a webhook receiver on a free port, and a store with a finding in it."""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from schemas.store import Store
from schemas.tables import EMISSION_RECEIPTS
from tests.processors.completeness.test_completeness import RECEIPT_COLUMNS, receipt

T0 = dt.datetime(2026, 7, 1, 9, 0, tzinfo=dt.UTC)
SECRET = b"s3cret-signing-key-0123456789abcdef"


class FakeClock:
    def __init__(self, now: dt.datetime) -> None:
        self.now = now

    def __call__(self) -> dt.datetime:
        return self.now


class Sleeps:
    """The backoff waits asked for, returned at once (no sleeping in tests)."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class WebhookServer:
    """Answers each POST with the next status of `answers` (then 200), recording it."""

    answers: list[int] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    url: str = ""
    _runner: web.AppRunner | None = None

    async def _hook(self, request: web.Request) -> web.Response:
        self.received.append(Received(dict(request.headers), await request.read()))
        status = self.answers.pop(0) if self.answers else 200
        return web.Response(status=status, text="ok" if status < 300 else "nope")

    async def start(self) -> WebhookServer:
        app = web.Application()
        app.router.add_post("/hook", self._hook)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}/hook"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


def secret_file(directory: Path, mode: int = 0o600) -> Path:
    path = directory / "webhook.secret"
    path.write_bytes(SECRET + b"\n")
    os.chmod(path, mode)
    return path


def schedule_text(url: str, *, cron: str = "*/5 * * * *", attempts: int = 5) -> str:
    return f"""\
webhooks:
  - name: ops
    url: {url}
    secretFile: webhook.secret
    maxAttempts: {attempts}
schedules:
  - name: loss-check
    cron: "{cron}"
    job: completeness
    request:
      bucket: hour
    labels:
      team: data
      severity: page
    webhooks: [ops]
"""


def seed_a_gap(store: Store) -> None:
    """Stream `a` delivered seq 0 and 2: seq 1 is lost, a completeness finding."""
    store.insert(
        EMISSION_RECEIPTS.qualified,
        [receipt("a", 0, T0 - dt.timedelta(hours=1)), receipt("a", 2, T0 - dt.timedelta(hours=1))],
        RECEIPT_COLUMNS,
    )
