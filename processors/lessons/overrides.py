"""Overrides: a human's correction of one call, stored as ground truth.

An override names the agent, the surface and the call (`correlationId`, shared with
the evaluation events of that call), what the system produced, what the human sent
instead, why, and tags (`fix_tier=...`). It arrives as `POST /hil/override` (this
job) or as the OTLP span `holonograph.override` (schemas/WIRE.md); either way it is
one row of `lesson_overrides` under its `eventId`. The event id is the idempotency
key: a re-send (same id, same content) is answered with the stored override and
writes nothing; the same id with other content is refused (409). Without an
`eventId` the id is a function of the content, so a plain retry is a re-send too.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, replace
from typing import Any

from pydantic import ConfigDict, JsonValue, with_config
from typing_extensions import TypedDict

from processors.jobs import Job, JobError, JobRequest, never_a_finding
from schemas.events import DEFAULT_TENANT
from schemas.overrides import (
    Override,
    OverrideFields,
    Source,
    override_event,
    stored_override,
)
from schemas.store import Store
from schemas.tables import EVENT_OWNERS, LESSON_OVERRIDES
from schemas.times import Clock, from_store_time


class OverrideRequest(JobRequest, OverrideFields):
    """The Guide's POST /hil/override body (ch. 12): a human's correction of one call
    (its fields and their domains: `schemas.overrides.OverrideFields`, which a
    `holonograph.override` span is read into too)."""

    def persists(self) -> bool:
        return True


def override_of(request: OverrideRequest, tenant: str, now: dt.datetime) -> Override:
    return stored_override(override_event(request, now), tenant, "http", now)


def _from_row(row: dict[str, Any]) -> Override:
    return Override(
        tenant_id=row["tenant_id"],
        event_id=row["event_id"],
        agent_id=row["agent_id"],
        surface_id=row["surface_id"],
        correlation_id=row["correlation_id"],
        run_mode=row["run_mode"],
        original_output=json.loads(row["original_output"]),
        corrected_output=json.loads(row["corrected_output"]),
        rationale=row["rationale"],
        tags=tuple(row["tags"]),
        source=row["source"],
        emission_stream=row["emission_stream"],
        emission_seq=int(row["emission_seq"]),
        content_digest=row["content_digest"],
        occurred_at=from_store_time(row["occurred_at"]),
        recorded_at=from_store_time(row["recorded_at"]),
    )


def _select(
    store: Store, tenant: str, where: str, parameters: dict[str, Any], limit: int | None = None
) -> list[Override]:
    sql = (
        f"SELECT {LESSON_OVERRIDES.column_list()} FROM {LESSON_OVERRIDES.qualified} FINAL"
        f" WHERE tenant_id = {{tenant:String}} AND {where}"
        " ORDER BY occurred_at, event_id"
    )
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    rows = store.query(sql, {**parameters, "tenant": tenant}).dicts()
    return [_from_row(row) for row in rows]


def stored(store: Store, tenant: str, event_id: str) -> Override | None:
    found = _select(store, tenant, "event_id = {id:String}", {"id": event_id})
    return found[0] if found else None


def in_window(
    store: Store, tenant: str, surface_id: str, since: dt.datetime, until: dt.datetime,
    limit: int | None = None,
) -> list[Override]:  # fmt: skip
    """A surface's overrides with `since <= at < until`, oldest first."""
    where = (
        "surface_id = {surface:String} AND occurred_at >= {since:DateTime64(3, 'UTC')}"
        " AND occurred_at < {until:DateTime64(3, 'UTC')}"
    )
    parameters = {"surface": surface_id, "since": since, "until": until}
    return _select(store, tenant, where, parameters, limit)


class ConflictingOverride(JobError):
    kind = "conflict"


@dataclass(frozen=True)
class Recorded:
    """The answer to an override: the override in force and whether this call wrote it."""

    override: Override
    created: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "eventId": self.override.event_id,
            "created": self.created,
            **self.override.to_json(),
        }


def plan(store: Store, candidate: Override) -> Recorded:
    """The stored override when `candidate` is a re-send of it, else `candidate` to write;
    the same event id with other content is refused."""
    previous = stored(store, candidate.tenant_id, candidate.event_id)
    if previous is None:
        owner = _owner(store, candidate.tenant_id, candidate.event_id)
        if owner not in (None, candidate.agent_id):
            raise ConflictingOverride(
                f"event id {candidate.event_id} belongs to agent {owner!r} (an evaluation"
                " of its); an override of agent"
                f" {candidate.agent_id!r} cannot take it",
                "event_id_owned",
                details={"eventId": candidate.event_id, "owner": owner},
            )
        return Recorded(candidate, created=True)
    if previous.content_digest != candidate.content_digest:
        raise ConflictingOverride(
            f"override {candidate.event_id} is already stored with other content;"
            " a correction of a correction is a new override (a new eventId)",
            "event_id_conflict",
            details={"eventId": candidate.event_id, "stored": previous.content_digest},
        )
    return Recorded(replace(previous), created=False)


def _owner(store: Store, tenant: str, event_id: str) -> str | None:
    """The agent an event id belongs to (its first claim: docs/security.md, "Event ids
    and streams have owners"), None for an id nobody claimed."""
    found = store.query(
        f"SELECT argMin(agent_id, _block_number) FROM {EVENT_OWNERS.qualified}"
        " WHERE tenant_id = {tenant:String} AND event_id = {id:String} HAVING count() > 0",
        {"tenant": tenant, "id": event_id},
    ).rows
    return str(found[0][0]) if found else None


def write(store: Store, overrides: list[Override]) -> None:
    """The rows, after their ids' claims (as the receiver claims a span's)."""
    if overrides:
        claims = [
            [o.tenant_id, o.event_id, o.agent_id, o.recorded_at,
             int(o.recorded_at.timestamp()) * 1_000_000_000]
            for o in overrides
        ]  # fmt: skip
        # No placement: an override is not an event row (`schemas.placement`).
        store.insert(EVENT_OWNERS.qualified, claims, EVENT_OWNERS.columns[:5])
        store.insert(
            LESSON_OVERRIDES.qualified, [o.row() for o in overrides], LESSON_OVERRIDES.columns
        )


# --- the job: POST /hil/override ------------------------------------------------------

Request = OverrideRequest
Report = Recorded


def run(store: Store, request: Request, clock: Clock) -> Recorded:
    return plan(store, override_of(request, request.tenant or DEFAULT_TENANT, clock()))


def persist(store: Store, report: Recorded) -> Recorded:
    if report.created:
        write(store, [report.override])
    return report


finding = never_a_finding


@with_config(ConfigDict(extra="forbid"))
class OverrideDocument(TypedDict):
    """`Recorded.to_json()`: the Guide's `eventId`, and the override as stored."""

    eventId: str
    created: bool
    agentId: str
    surfaceId: str
    correlationId: str
    runMode: str
    originalOutput: JsonValue
    correctedOutput: JsonValue
    rationale: str
    tags: list[str]
    source: Source
    contentDigest: str
    at: dt.datetime
    recordedAt: dt.datetime


JOB = Job(
    "lessons.override", Request, OverrideDocument, run, persist, finding,
    owner_tenant=True,
)  # fmt: skip
