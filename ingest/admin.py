"""Loopback admin endpoint of a process that owns a store (`serve`, `sink`).

chDB lets one process open a data directory, so other commands (`query`, jobs)
reach the store through this endpoint. It binds to 127.0.0.1 only, requires the
bearer token published (mode 0600) in `<data-dir>/.holonograph-admin.json`, and
runs queries read-only unless the caller asks to write. It also serves
`/healthz`, `/readyz` and Prometheus `/metrics`.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from ingest.admin_file import ADMIN_FILE
from ingest.listen import start_site
from ingest.store import ClickHouseStore
from schemas import jsoncodec

ReadinessCheck = Callable[[], Awaitable[str | None]]


class AdminEndpoint:
    def __init__(
        self,
        store: ClickHouseStore | None,
        metrics_exposition: Callable[[], bytes],
        readiness: ReadinessCheck,
        token: str | None = None,
        degraded: Callable[[], str | None] = lambda: None,
    ) -> None:
        self._store = store
        self._metrics = metrics_exposition
        self._readiness = readiness
        self._degraded = degraded
        self.token = token or secrets.token_urlsafe(24)
        self._runner: web.AppRunner | None = None
        self._public: web.AppRunner | None = None
        self._published: Path | None = None
        self.port = 0
        self.metrics_port = 0

    def app(self) -> web.Application:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_post("/admin/query", self._query)
        app.router.add_post("/admin/command", self._command)
        app.router.add_post("/admin/insert", self._insert)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics_handler)
        return app

    def public_app(self) -> web.Application:
        """Only `/healthz`, `/readyz` and `/metrics`: safe to expose to a scraper."""
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics_handler)
        return app

    async def start(self, port: int = 0) -> int:
        self._runner = web.AppRunner(self.app(), access_log=None)
        self.port = await start_site(self._runner, "127.0.0.1", port)
        return self.port

    async def start_public(self, host: str, port: int) -> int:
        """A second listener, on `host`, for Prometheus and orchestrator probes (the
        admin routes stay on loopback)."""
        self._public = web.AppRunner(self.public_app(), access_log=None)
        self.metrics_port = await start_site(self._public, host, port)
        return self.metrics_port

    def publish(self, data_dir: Path) -> None:
        """Tell other commands on this machine where the owner of `data_dir` listens."""
        path = data_dir / ADMIN_FILE
        info = {"url": f"http://127.0.0.1:{self.port}", "pid": os.getpid(), "token": self.token}
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(info, handle)
        self._published = path

    async def stop(self) -> None:
        if self._published is not None:
            self._published.unlink(missing_ok=True)
            self._published = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._public is not None:
            await self._public.cleanup()
            self._public = None

    # --- handlers -------------------------------------------------------------------

    def _authorized(self, request: web.Request) -> bool:
        header = request.headers.get("Authorization", "")
        return secrets.compare_digest(header, f"Bearer {self.token}")

    async def _body(self, request: web.Request) -> dict[str, Any]:
        if not self._authorized(request):
            raise web.HTTPUnauthorized(text=json.dumps({"error": "bad or missing token"}))
        try:
            body = jsoncodec.loads(await request.read())
        except ValueError as err:
            raise web.HTTPBadRequest(text=json.dumps({"error": f"bad JSON: {err}"})) from None
        if not isinstance(body, dict):
            raise web.HTTPBadRequest(text=json.dumps({"error": "expected a JSON object"}))
        return body

    async def _run(self, call: Callable[[], Any]) -> web.Response:
        if self._store is None:
            return web.json_response({"error": "this process holds no store"}, status=503)
        try:
            result = await asyncio.to_thread(call)
        except Exception as err:
            return web.json_response({"error": str(err)}, status=400)
        return web.Response(text=jsoncodec.dumps(result), content_type="application/json")

    async def _query(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        sql, params, write = (
            str(body.get("sql", "")),
            body.get("parameters") or {},
            bool(body.get("write")),
        )

        def run() -> dict[str, Any]:
            assert self._store is not None
            result = self._store.query_as(sql, params, readonly=not write)
            return {"columns": list(result.column_names), "rows": [list(r) for r in result.rows]}

        return await self._run(run)

    async def _command(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        return await self._run(
            lambda: self._held().command(str(body.get("sql", "")), body.get("parameters") or {})
        )

    async def _insert(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        return await self._run(
            lambda: self._held().insert(
                str(body["table"]), body["rows"], body["column_names"], body.get("settings") or {}
            )
        )

    def _held(self) -> ClickHouseStore:
        assert self._store is not None
        return self._store

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _readyz(self, request: web.Request) -> web.Response:
        problem = await self._readiness()
        if problem:
            return web.json_response({"status": "not ready", "reason": problem}, status=503)
        # Degraded still takes data (200): a stale report must not stop ingest.
        reason = self._degraded()
        if reason:
            return web.json_response({"status": "degraded", "reason": reason})
        return web.json_response({"status": "ready"})

    async def _metrics_handler(self, request: web.Request) -> web.Response:
        return web.Response(body=self._metrics(), content_type="text/plain", charset="utf-8")
