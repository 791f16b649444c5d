"""The runner's HTTP caller: one handler per `Endpoint`, on the receiver's HTTP port.

    authenticate (401) -> x-holonograph-run-mode (400) -> the endpoint's scope (403)
    -> the body, validated into the job's Request (400 invalid_request, every problem)
    -> the token's tenant -> `holonograph.runner.execute` on the read executor, on
       connections of this request's own (read-only and scoped to the tenant for run)
    -> 200 with `report.to_json()`, the CLI's --json document, and
       `x-holonograph-finding: true|false` (what the CLI's exit 1 says)

A request the job refuses answers its `JobError` in the envelope (invalid 400,
not-found 404, conflict 409); a read limit 422; a full read executor 503 with
`Retry-After`; a client that goes away (its connection closed, its timeout) stops
the job's statements in the store. The Guide's other paths answer 501.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

from aiohttp import web
from pydantic import ValidationError

from holonograph.api.endpoints import Endpoint, NotServed
from holonograph.limits import JobOverLimit
from holonograph.runner import execute
from ingest.edge.json_api import (
    ApiError,
    ClientGone,
    JsonApi,
    read_json,
    require_agent,
    require_scope,
)
from ingest.export.principal import Principal
from ingest.service.routes import ApiContext
from ingest.service.workers import Sessions, WorkersBusy
from ingest.store.limits import LimitRequest, ReadLimitExceeded
from ingest.store.reader import Marked
from processors.jobs import Job, JobError, Report
from schemas import jsoncodec, times
from schemas.contracts import problems
from schemas.store import Store

T = TypeVar("T")

FINDING_HEADER = "x-holonograph-finding"
# A request is a person's or a pipeline's document (a surface of 500 rules, a fixture).
MAX_BODY_BYTES = 4 * 1024 * 1024
# How often a running analysis checks that its client is still there.
_WATCH_SECONDS = 0.1
_STATUS = {"invalid": 400, "not-found": 404, "conflict": 409}
# A page the API answers loads nothing: its styles are inline, its figures inline SVG.
PAGE_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def wants_html(accept: str) -> bool:
    """Whether `Accept` prefers text/html to JSON (by q-value; JSON on a tie, by
    default and for `*/*`)."""
    weights: dict[str, float] = {}
    for part in accept.split(","):
        kind, *params = (p.strip() for p in part.split(";"))
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        kind = kind.lower()
        weights[kind] = max(weights.get(kind, 0.0), q)
    html = weights.get("text/html", 0.0)
    json_ = max(weights.get("application/json", 0.0), weights.get("application/*", 0.0))
    return html > 0.0 and html > json_


class MarkedSessions:
    """The runner's `StoreAccess` over the receiver's sessions: every statement carries
    this request's marker, so a client that goes away stops them all."""

    def __init__(self, sessions: Sessions, marker: str) -> None:
        self._sessions = sessions
        self._marker = marker

    @contextlib.contextmanager
    def reading(self, tenant: str | None, limits: LimitRequest | None = None) -> Iterator[Store]:
        with self._sessions.reading(tenant, limits) as store:
            yield Marked(store, self._marker)

    @contextlib.contextmanager
    def writing(self) -> Iterator[Store]:
        with self._sessions.writing() as store:
            yield Marked(store, self._marker)


async def until_gone(request: web.Request, work: Awaitable[T]) -> T:
    """`work`, cancelled (and with it its statements in the store) once the client's
    connection closes."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait([task], timeout=_WATCH_SECONDS)
            if done:
                return task.result()
            transport = request.transport
            if transport is None or transport.is_closing():
                raise ClientGone()
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def _job_error(err: JobError) -> ApiError:
    return ApiError(_STATUS[err.kind], err.code, str(err), err.details)


class JobApi(JsonApi):
    """The job endpoints and the 501s, behind the receiver's tokens."""

    def __init__(self, context: ApiContext) -> None:
        super().__init__(context.authenticator)
        self._workers = context.workers
        self._clock = context.clock

    def handler(self, endpoint: Endpoint) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def step(request: web.Request, principal: Principal) -> Any:
            return await self._answer(endpoint, request, principal)

        async def handle(request: web.Request) -> web.Response:
            return await self.answer(request, step)

        return handle

    def not_served(self, path: NotServed) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def step(request: web.Request, principal: Principal) -> Any:
            instead = f": use `{path.instead}`" if path.instead else ""
            raise ApiError(
                501,
                "not_implemented",
                f"{path.method} {path.path} is not served by this collector yet{instead}",
                {"method": path.method, "path": path.path, "instead": path.instead or None},
            )

        async def handle(request: web.Request) -> web.Response:
            return await self.answer(request, step)

        return handle

    async def _answer(
        self, endpoint: Endpoint, request: web.Request, principal: Principal
    ) -> web.Response:
        require_scope(principal, endpoint.scope)
        job = endpoint.job
        if endpoint.method == "GET":
            body: Any = _query_of(request)
        else:
            body = await read_json(request, MAX_BODY_BYTES, "a request")
        job_request = _request_of(job, body, self._clock()).for_tenant(principal.tenant_id)
        if endpoint.agent_field is not None:
            require_agent(principal, getattr(job_request, endpoint.agent_field))
        if job_request.persists() and endpoint.persist_scope is not None:
            require_scope(principal, endpoint.persist_scope)
        sessions = self._workers.sessions
        if job.uses_store and sessions is None:
            raise ApiError(
                501,
                "not_wired",
                "this receiver holds no store (serve --kafka): run"
                f" `{endpoint.cli} --store URL` against the store the sink writes",
            )

        def work(marker: str) -> Report:
            access = MarkedSessions(sessions, marker) if sessions is not None else _NoSessions()
            report: Report = execute(job, job_request, access, self._clock)
            return report

        try:
            report = await until_gone(request, self._workers.run(work))
        except JobError as err:
            raise _job_error(err) from None
        except JobOverLimit as err:
            raise ApiError(422, "read_limit_exceeded", str(err), err.details()) from None
        except ReadLimitExceeded as err:
            raise ApiError(
                422, "read_limit_exceeded", f"stopped by the read limit {err.limit}: {err}",
                {"limit": err.limit},
            ) from None  # fmt: skip
        except WorkersBusy as err:
            raise ApiError(
                503, "busy", str(err), headers={"Retry-After": str(err.retry_after)}
            ) from None
        finding = "true" if job.finding(report) else "false"
        if endpoint.html is not None and wants_html(request.headers.get("Accept", "")):
            return web.Response(
                text=endpoint.html(report),
                content_type="text/html",
                headers={FINDING_HEADER: finding, "Content-Security-Policy": PAGE_POLICY},
            )
        return web.json_response(
            jsoncodec.plain(report.to_json()), headers={FINDING_HEADER: finding}
        )


def _query_of(request: web.Request) -> dict[str, str]:
    """A GET endpoint's request: its query parameters by their JSON names, each once."""
    repeated = sorted({name for name in request.query if len(request.query.getall(name)) > 1})
    if repeated:
        raise ApiError(
            400, "invalid_request", f"give each query parameter once: {', '.join(repeated)}",
            {"problems": [f"{name}: given more than once" for name in repeated]},
        )  # fmt: skip
    return dict(request.query)


def _request_of(job: Job[Any, Any], body: Any, now: dt.datetime) -> Any:
    """The job's Request from a JSON body: an object of its fields by their JSON names;
    the tenant is the token's, never the body's. Its times may be relative to `now`
    (`"since": "24h"`), as on the CLI's flags."""
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_request", "the body must be a JSON object")
    if "tenant" in body:
        raise ApiError(
            400, "invalid_request", "the tenant is the token's: leave tenant out of the body",
            {"problems": ["tenant: the token decides the tenant"]},
        )  # fmt: skip
    try:
        return job.request.model_validate(
            body, by_alias=True, by_name=False, context={times.NOW: now}
        )
    except ValidationError as err:
        raise ApiError(
            400, "invalid_request", f"the {job.name} request is invalid; nothing was run",
            {"problems": problems(err)},
        ) from None  # fmt: skip


class _NoSessions:
    """A job that uses no store runs without one (`serve --kafka` answers it too)."""

    def reading(
        self, tenant: str | None, limits: LimitRequest | None = None
    ) -> contextlib.AbstractContextManager[Store]:
        raise RuntimeError("no store")

    def writing(self) -> contextlib.AbstractContextManager[Store]:
        raise RuntimeError("no store")
