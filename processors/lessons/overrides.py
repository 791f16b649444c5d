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
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, JsonValue, StringConstraints, field_validator, with_config
from typing_extensions import TypedDict

from processors.jobs import Job, JobError, JobRequest, never_a_finding
from processors.lessons.common import canonical, digest, short_id, to_millisecond
from schemas.changes import store_moment
from schemas.contracts import Id
from schemas.events import DEFAULT_TENANT, RunMode
from schemas.store import Store
from schemas.tables import LESSON_OVERRIDES
from schemas.times import Clock, UtcTime, from_store_time

# What one override may hold: the store takes any String, the limits keep one person's
# paste from becoming every reader's problem (checked at the door, named in the error).
MAX_OUTPUT_CHARS = 64 * 1024
MAX_TAGS = 50
Tag = Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f]+$")]
Rationale = Annotated[str, StringConstraints(strip_whitespace=True, max_length=4000)]
Source = Literal["http", "otlp"]


class OverrideRequest(JobRequest):
    """The Guide's POST /hil/override body (ch. 12): a human's correction of one call."""

    agent_id: Id = Field(description="The agent whose output was corrected.")
    surface_id: Id = Field(description="The surface of the corrected call.")
    correlation_id: Id = Field(description="The call's correlationId (its evaluation events').")
    original_output: JsonValue = Field(description="What the system produced.")
    corrected_output: JsonValue = Field(description="What the human sent instead.")
    rationale: Rationale = Field("", description="Why the human corrected it.")
    tags: tuple[Tag, ...] = Field(
        (), max_length=MAX_TAGS, description="e.g. fix_tier=tool-input-schema."
    )
    event_id: Id | None = Field(
        None, description="The idempotency key (default: a function of the content)."
    )
    run_mode: RunMode = Field("production", description="The run mode of the corrected call.")
    at: UtcTime | None = Field(None, description="When the human corrected it (default: now).")

    @field_validator("original_output", "corrected_output")
    @classmethod
    def _bounded(cls, value: JsonValue) -> JsonValue:
        if len(canonical(value)) > MAX_OUTPUT_CHARS:
            raise ValueError(f"longer than {MAX_OUTPUT_CHARS} characters as JSON")
        return value

    @field_validator("at")
    @classmethod
    def _moment(cls, value: dt.datetime | None) -> dt.datetime | None:
        return None if value is None else store_moment(value)

    @field_validator("tags")
    @classmethod
    def _distinct(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(sorted(set(value)))

    def persists(self) -> bool:
        return True


@dataclass(frozen=True)
class Override:
    """One stored override (a row of `lesson_overrides`)."""

    tenant_id: str
    event_id: str
    agent_id: str
    surface_id: str
    correlation_id: str
    run_mode: str
    original_output: Any
    corrected_output: Any
    rationale: str
    tags: tuple[str, ...]
    source: Source
    emission_stream: str
    emission_seq: int
    content_digest: str
    occurred_at: dt.datetime
    recorded_at: dt.datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "eventId": self.event_id,
            "agentId": self.agent_id,
            "surfaceId": self.surface_id,
            "correlationId": self.correlation_id,
            "runMode": self.run_mode,
            "originalOutput": self.original_output,
            "correctedOutput": self.corrected_output,
            "rationale": self.rationale,
            "tags": list(self.tags),
            "source": self.source,
            "contentDigest": self.content_digest,
            "at": self.occurred_at,
            "recordedAt": self.recorded_at,
        }

    def row(self) -> list[Any]:
        values = {
            **self.__dict__,
            "original_output": canonical(self.original_output),
            "corrected_output": canonical(self.corrected_output),
            "tags": list(self.tags),
        }
        return [values[column] for column in LESSON_OVERRIDES.columns]


def content_of(
    agent_id: str, surface_id: str, correlation_id: str, run_mode: str,
    original: Any, corrected: Any, rationale: str, tags: tuple[str, ...],
) -> dict[str, Any]:  # fmt: skip
    """What a re-send repeats: the digest and the default event id are of this."""
    return {
        "agentId": agent_id, "surfaceId": surface_id, "correlationId": correlation_id,
        "runMode": run_mode, "originalOutput": original, "correctedOutput": corrected,
        "rationale": rationale, "tags": sorted(tags),
    }  # fmt: skip


def override_of(
    request: OverrideRequest, tenant: str, now: dt.datetime, source: Source = "http",
    emission_stream: str = "", emission_seq: int = 0,
) -> Override:  # fmt: skip
    content = content_of(
        request.agent_id, request.surface_id, request.correlation_id, request.run_mode,
        request.original_output, request.corrected_output, request.rationale, request.tags,
    )  # fmt: skip
    moment = to_millisecond(now)
    return Override(
        tenant_id=tenant,
        event_id=request.event_id or short_id("ovr", content),
        agent_id=request.agent_id,
        surface_id=request.surface_id,
        correlation_id=request.correlation_id,
        run_mode=request.run_mode,
        original_output=request.original_output,
        corrected_output=request.corrected_output,
        rationale=request.rationale,
        tags=request.tags,
        source=source,
        emission_stream=emission_stream,
        emission_seq=emission_seq,
        content_digest=digest(content),
        occurred_at=to_millisecond(request.at) if request.at else moment,
        recorded_at=moment,
    )


def _from_row(row: dict[str, Any]) -> Override:
    import json

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
        return Recorded(candidate, created=True)
    if previous.content_digest != candidate.content_digest:
        raise ConflictingOverride(
            f"override {candidate.event_id} is already stored with other content;"
            " a correction of a correction is a new override (a new eventId)",
            "event_id_conflict",
            details={"eventId": candidate.event_id, "stored": previous.content_digest},
        )
    return Recorded(replace(previous), created=False)


def write(store: Store, overrides: list[Override]) -> None:
    if overrides:
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
