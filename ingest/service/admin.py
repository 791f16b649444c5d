"""Loopback admin endpoint of a process that owns a store (`serve`, `sink`).

chDB lets one process open a data directory, so other commands (`query`, jobs)
reach the store through this endpoint. It binds to 127.0.0.1 only and publishes two
bearer tokens (mode 0600) in `<data-dir>/.holonograph-admin.json`:

- the read token may only `/admin/query`, on a read-only connection
  (`ingest.store.reader`), whatever the request says;
- the write token may also `/admin/command` and `/admin/insert`, and queries on a
  writing connection.

Each request runs on a connection it has to itself (`ingest.store.reader.StoreSessions`),
never the owner's writing or jobs connection, so nothing a request leaves in its
session reaches another request or the owner's periodic jobs. The endpoint also
serves `/healthz`, `/readyz` and `/metrics`.

Requests run on the read executor (`ingest.service.workers.StoreWorkers`, shared
with the HTTP API's analyses): threads of their own, never the ones the commit path or
the periodic jobs use; past its bound a request is answered 503 with a retry delay.
Read-only queries carry the owner's `ReadLimits` (a client may ask for lower ones). A
client that goes away before its answer (Ctrl-C, a timeout, a closed connection)
cancels its statement in the store: every statement is marked
(`ingest.store.reader.Marked`) and killed by that mark.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import secrets
import tempfile
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Literal

from aiohttp import web

from ingest.errors import ListenError
from ingest.redact import redact
from ingest.service.admin_file import ADMIN_FILE
from ingest.service.workers import Sessions, StoreWorkers, WorkersBusy
from ingest.store.limits import LimitRequest, ReadLimitExceeded, ReadLimits
from ingest.store.querygate import StatementRefused
from ingest.store.reader import Marked
from schemas import jsoncodec
from schemas.store import Store

log = logging.getLogger(__name__)

ReadinessCheck = Callable[[], Awaitable[str | None]]
Role = Literal["read", "write"]

# Request bodies up to this size are decoded on the event loop; larger ones on a worker.
_INLINE_JSON_BYTES = 1024 * 1024

__all__ = ["AdminEndpoint", "Sessions", "start_site"]

Opener = Callable[[], AbstractContextManager[Store]]


class AdminEndpoint:
    def __init__(
        self,
        sessions: Sessions | None,
        metrics_exposition: Callable[[], bytes],
        readiness: ReadinessCheck,
        read_token: str | None = None,
        write_token: str | None = None,
        degraded: Callable[[], str | None] = lambda: None,
        workers: int = 4,
        store_workers: StoreWorkers | None = None,
        status: Callable[[], dict[str, Any]] = dict,
    ) -> None:
        """`store_workers`: the read executor to share (default: one of its own, of
        `workers` threads, closed with the endpoint)."""
        self._sessions = sessions
        self._owns_workers = store_workers is None
        self.workers = store_workers or StoreWorkers(sessions, workers)
        self._metrics = metrics_exposition
        self._readiness = readiness
        self._degraded = degraded
        self._status = status
        self.read_token = read_token or secrets.token_urlsafe(24)
        self.write_token = write_token or secrets.token_urlsafe(24)
        if secrets.compare_digest(self.read_token, self.write_token):
            raise ValueError("the read and write tokens must differ")
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
        # handler_cancellation: a client that goes away cancels its handler (`_run`).
        self._runner = web.AppRunner(self.app(), access_log=None, handler_cancellation=True)
        self.port = await start_site(self._runner, "127.0.0.1", port)
        return self.port

    async def start_public(self, host: str, port: int) -> int:
        """A second listener, on `host`, for Prometheus and orchestrator probes (the
        admin routes stay on loopback)."""
        self._public = web.AppRunner(self.public_app(), access_log=None)
        self.metrics_port = await start_site(self._public, host, port)
        return self.metrics_port

    def publish(self, data_dir: Path) -> None:
        """Tell other commands of this user where the owner of `data_dir` listens.

        Written to a new 0600 file and renamed over the old one: a stale file left
        with looser permissions is replaced, never reused, and readers never see
        half a file."""
        path = data_dir / ADMIN_FILE
        info = {
            "url": f"http://127.0.0.1:{self.port}",
            "pid": os.getpid(),
            "read_token": self.read_token,
            "write_token": self.write_token,
        }
        fd, temporary = tempfile.mkstemp(prefix=f"{ADMIN_FILE}.", dir=data_dir)  # mode 0600
        try:
            with os.fdopen(fd, "w") as handle:
                json.dump(info, handle)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
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
        if self._owns_workers:
            self.workers.close()
        if self._sessions is not None:
            await asyncio.to_thread(self._sessions.close)

    # --- handlers -------------------------------------------------------------------

    def _role(self, request: web.Request) -> Role:
        header = request.headers.get("Authorization", "")
        # Both comparisons always run: the time taken says nothing about either token.
        read = secrets.compare_digest(header, f"Bearer {self.read_token}")
        write = secrets.compare_digest(header, f"Bearer {self.write_token}")
        if write:
            return "write"
        if read:
            return "read"
        raise _error(web.HTTPUnauthorized, "bad or missing token")

    def _opener(
        self,
        role: Role,
        *,
        writes: bool,
        tenant: str | None = None,
        limits: LimitRequest | None = None,
    ) -> Opener:
        """How this request's connection is opened: read-only for the read token and
        for a tenant's view, writing only for the write token."""
        sessions = self._sessions
        if sessions is None:
            raise _error(web.HTTPServiceUnavailable, "this process holds no store")
        if writes and role != "write":
            raise _error(web.HTTPForbidden, "refused: the read token cannot write (use --write)")
        if role == "read" or tenant is not None:
            return functools.partial(sessions.reading, tenant, limits)
        if limits is not None:
            raise _error(web.HTTPBadRequest, "read limits apply to read-only queries")
        return sessions.writing

    async def _body(self, request: web.Request) -> dict[str, Any]:
        raw = await request.read()
        try:
            if len(raw) <= _INLINE_JSON_BYTES:
                body = jsoncodec.loads(raw)
            else:  # a large insert: decoded off the event loop, which ingest shares
                body = await self.workers.off_loop(jsoncodec.loads, raw)
        except ValueError as err:
            raise _error(web.HTTPBadRequest, f"bad JSON: {err}") from None
        if not isinstance(body, dict):
            raise _error(web.HTTPBadRequest, "expected a JSON object")
        return body

    async def _run(self, open_session: Opener, work: Callable[[Store], Any]) -> web.Response:
        """`work` on a connection this request has to itself, on the read executor; if
        the client goes away first, its statement is stopped in the store."""

        def run(marker: str) -> str:
            with open_session() as store:
                result = work(Marked(store, marker))
            return jsoncodec.dumps(result)  # here, not on the event loop: results can be large

        try:
            result = await self.workers.run(run)
        except WorkersBusy as err:
            raise _error(
                web.HTTPServiceUnavailable,
                str(err).replace("store requests", "admin requests"),
                headers={"Retry-After": str(err.retry_after)},
            ) from None
        except StatementRefused as err:
            return web.json_response({"error": str(err)}, status=403)
        except ReadLimitExceeded as err:
            return web.json_response({"error": redact(str(err)), "limit": err.limit}, status=422)
        except Exception as err:
            return web.json_response({"error": redact(str(err))}, status=400)
        return web.Response(text=result, content_type="application/json")

    async def _query(self, request: web.Request) -> web.Response:
        role = self._role(request)
        body = await self._body(request)
        sql, params, tenant = (
            str(body.get("sql", "")),
            body.get("parameters") or {},
            body.get("tenant"),
        )
        if tenant is not None and not isinstance(tenant, str):
            raise _error(web.HTTPBadRequest, "tenant must be a string")
        limits = _limits(body.get("limits"))

        def work(store: Store) -> dict[str, Any]:
            result = store.query(sql, params)
            return {"columns": list(result.column_names), "rows": [list(r) for r in result.rows]}

        opener = self._opener(role, writes=False, tenant=tenant, limits=limits)
        return await self._run(opener, work)

    async def _command(self, request: web.Request) -> web.Response:
        open_session = self._opener(self._role(request), writes=True)
        body = await self._body(request)
        sql, params = str(body.get("sql", "")), body.get("parameters") or {}
        return await self._run(open_session, lambda store: store.command(sql, params))

    async def _insert(self, request: web.Request) -> web.Response:
        open_session = self._opener(self._role(request), writes=True)
        body = await self._body(request)
        return await self._run(
            open_session,
            lambda store: store.insert(
                str(body["table"]), body["rows"], body["column_names"], body.get("settings") or {}
            ),
        )

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _readyz(self, request: web.Request) -> web.Response:
        problem = await self._readiness()
        if problem:
            return web.json_response({"status": "not ready", "reason": problem}, status=503)
        # Degraded still takes data (200): a stale report must not stop ingest.
        reason = self._degraded()
        body: dict[str, Any] = (
            {"status": "degraded", "reason": reason} if reason else {"status": "ready"}
        )
        # What the wiring's background services report (the schedules' last runs).
        body.update(self._status())
        return web.json_response(body)

    async def _metrics_handler(self, request: web.Request) -> web.Response:
        return web.Response(body=self._metrics(), content_type="text/plain", charset="utf-8")


async def start_site(runner: web.AppRunner, host: str, port: int) -> int:
    """Set up `runner`, listen on host:port (0 picks a free port), return the port."""
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as err:  # the caller owns `runner` and cleans it up
        raise ListenError(f"cannot listen on {host}:{port}: {err.strerror or err}") from err
    server: Any = site._server
    bound: int = server.sockets[0].getsockname()[1]
    return bound


def _limits(value: Any) -> LimitRequest | None:
    """The read limits a client asks for (lower than the owner's, or they are the
    owner's), from the request's `limits` object."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _error(web.HTTPBadRequest, "limits must be a JSON object")
    try:
        ReadLimits.from_mapping(value)
    except ValueError as err:
        raise _error(web.HTTPBadRequest, str(err)) from None
    return value


def _error(
    kind: type[web.HTTPError], message: str, headers: dict[str, str] | None = None
) -> web.HTTPError:
    return kind(
        text=json.dumps({"error": message}), content_type="application/json", headers=headers
    )
