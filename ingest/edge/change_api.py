"""Change events on the OTLP/HTTP port (docs/changes.md), behind the same TLS and bearer
auth as OTLP and the contract registry:

    POST /holonograph/changes        record a deploy, prompt, config, lens, model or
                                     vendor change (`ChangeRecord`; `id`: idempotent)
    GET  /holonograph/changes        list them (surfaceId, agentId, since, until, kind)
    POST /holonograph/availability   the Guide's availability mark, single or paired

A token's tenant owns what it records and is all it reads. Recording a change needs
the `govern` scope, an availability mark `write` (the Guide's SDK marks them) or
`govern`, listing `read` or `govern`. A token restricted to
agents records, marks and reads only as one of them: it names the `agentId`, which it
must be allowed to write, and reads that agent's changes and the tenant-wide ones.
`x-holonograph-run-mode` is required, fail-closed, as for contracts. Errors answer the
Guide's envelope; an id recorded with other content is 409 `change_conflict`. A
receiver that holds no store (`serve --kafka`) answers 501 `not_wired`: record changes
with `holonograph change record --store URL` against the store the sink writes.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Protocol

from aiohttp import web
from pydantic import ValidationError

from ingest.edge.auth import Authenticator
from ingest.edge.json_api import ApiError, JsonApi, read_json, require_agent, require_scope
from ingest.export.principal import Principal
from schemas.changelog import ChangeConflict, ChangeQuery
from schemas.changes import KINDS, AvailabilityMark, ChangeEvent, ChangeRecord, mark_answer
from schemas.contracts import problems
from schemas.times import parse_utc

CHANGES_PATH = "/holonograph/changes"
AVAILABILITY_PATH = "/holonograph/availability"
MAX_CHANGE_BYTES = 64 * 1024


class ChangeLog(Protocol):
    """Where changes are written and read (`ingest.service.changes`)."""

    async def record(self, tenant_id: str, record: ChangeRecord) -> tuple[ChangeEvent, bool]:
        """The stored change and whether it is new; `ChangeConflict` for a known id."""
        ...

    async def mark(self, tenant_id: str, mark: AvailabilityMark) -> tuple[ChangeEvent, bool]: ...

    async def changes(self, query: ChangeQuery) -> list[ChangeEvent]: ...


def _as_agent(principal: Principal, agent_id: str | None) -> None:
    """A restricted token acts only as an agent it may write, named in the request."""
    if principal.agents is None:
        return
    if agent_id is None:
        raise ApiError(
            403, "agent_required",
            "this token may write only some agents: name the agentId the change is of",
            {"agents": sorted(principal.agents)},
        )  # fmt: skip
    require_agent(principal, agent_id)


def _time(request: web.Request, name: str) -> dt.datetime | None:
    """RFC 3339 with an offset, or the Guide's date (`2026-06-01`: midnight UTC), as
    every endpoint takes its times."""
    text = request.query.get(name)
    if text is None:
        return None
    try:
        return parse_utc(text)
    except ValueError as err:
        raise ApiError(
            400, "invalid_time",
            f"{name}: {err}; give an RFC 3339 time with an offset or a date (2026-06-01)",
            {"parameter": name},
        ) from None  # fmt: skip


class ChangeApi(JsonApi):
    def __init__(self, authenticator: Authenticator, log: ChangeLog | None) -> None:
        super().__init__(authenticator)
        self._log = log

    def _wired(self) -> ChangeLog:
        if self._log is None:
            raise ApiError(
                501, "not_wired",
                "this receiver holds no store (serve --kafka): record changes with"
                " `holonograph change record --store URL` against the sink's store",
            )  # fmt: skip
        return self._log

    async def post_change(self, request: web.Request) -> web.Response:
        return await self.answer(request, self._record)

    async def get_changes(self, request: web.Request) -> web.Response:
        return await self.answer(request, self._list)

    async def post_availability(self, request: web.Request) -> web.Response:
        return await self.answer(request, self._mark)

    async def _write(
        self,
        request: web.Request,
        principal: Principal,
        model: type[ChangeRecord] | type[AvailabilityMark],
    ) -> tuple[ChangeEvent, bool]:
        """Validate the body as `model`, check the token may act as its agent, store it."""
        log = self._wired()
        document = await read_json(request, MAX_CHANGE_BYTES, "a change")
        if isinstance(document, dict) and "actor" not in document and principal.name:
            document = {**document, "actor": principal.name}
        try:
            change = model.model_validate(document)
        except ValidationError as err:
            raise ApiError(
                400, "invalid_change", "the change is invalid; nothing was recorded",
                {"problems": problems(err)},
            ) from None  # fmt: skip
        _as_agent(principal, change.agent_id)
        try:
            if isinstance(change, ChangeRecord):
                return await log.record(principal.tenant_id, change)
            return await log.mark(principal.tenant_id, change)
        except ChangeConflict as err:
            raise ApiError(409, "change_conflict", str(err), {"id": change.id}) from None

    async def _record(self, request: web.Request, principal: Principal) -> dict[str, Any]:
        require_scope(principal, "govern")
        event, created = await self._write(request, principal, ChangeRecord)
        return event.to_json() | {"created": created}

    async def _mark(self, request: web.Request, principal: Principal) -> dict[str, Any]:
        require_scope(principal, "write", "govern")  # the Guide's SDK marks availability
        return mark_answer(*await self._write(request, principal, AvailabilityMark))

    async def _list(self, request: web.Request, principal: Principal) -> dict[str, Any]:
        require_scope(principal, "read", "govern")
        log = self._wired()
        agent = request.query.get("agentId") or None
        _as_agent(principal, agent)
        kinds = tuple(request.query.getall("kind", []))
        unknown = sorted(set(kinds) - set(KINDS))
        if unknown:
            raise ApiError(
                400, "kind_unknown", f"unknown kind {', '.join(unknown)}",
                {"kinds": unknown, "allowed": list(KINDS)},
            )  # fmt: skip
        query = ChangeQuery(
            tenant_id=principal.tenant_id,
            since=_time(request, "since"),
            until=_time(request, "until"),
            surface_id=request.query.get("surfaceId") or None,
            agent_id=agent,
            kinds=kinds,
        )
        found = await log.changes(query)
        return {"tenantId": principal.tenant_id, "changes": [e.to_json() for e in found]}


def add_change_routes(app: web.Application, api: ChangeApi) -> None:
    app.router.add_post(CHANGES_PATH, api.post_change)
    app.router.add_get(CHANGES_PATH, api.get_changes)
    app.router.add_post(AVAILABILITY_PATH, api.post_availability)
