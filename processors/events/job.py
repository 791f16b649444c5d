"""The Guide's `GET /lens/events` (chapter 3): a tenant's stored evaluation events,
filtered by surface, time, correlation id and provenance, a page at a time.

Paging is keyset paging on an order that never changes once an event is stored:
its **first receipt** (`event_owners`' first claim of the id, `first_ingest_version`,
then the event id for ties). Every page is "the next `limit` events after the
cursor's place", computed in the store, so

- an event re-sent later (a retry, a replay, a new version with another timestamp)
  keeps the place of its first receipt: it is never seen twice nor skipped, and the
  page shows its latest version (`FINAL`, as every read does);
- events that arrive while a client pages land after every place already handed
  out: oldest first (`direction=asc`), a client that pages on sees each of them once;
  newest first (`desc`, the default), they are before the first page and not in it
  (a new query from the top sees them);
- the filters (`since`/`until` on the event's timestamp, `surfaceId`,
  `correlationId`, `provenance`) apply to the latest version at the time of each page.

The cursor (`nextCursor`, opaque) carries the last place handed out, the direction and
a digest of the filters: it is refused with another query. The limit may change from
page to page. Newest first, `nextCursor` is null when no event follows the page; oldest
first, it is null only on an empty page, and the last cursor handed out resumes after
the last event seen: a client follows the stream by asking again with it.

One writer commits in receipt order, so places become visible in order. Several
receivers writing one store commit independently: an event received by one just
before a page was read but committed by it just after can land before that page's
last place (within the receivers' commit delay and clock skew) and be missed by a
client paging oldest first at the live edge.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator, with_config
from typing_extensions import TypedDict

from processors.jobs import Job, JobError, JobRequest, never_a_finding, saves_nothing
from schemas.store import Store
from schemas.tables import EVALUATION_DIMENSIONS, EVALUATION_EVENTS, EVENT_OWNERS
from schemas.times import Clock, from_store_time, rfc3339, to_store_time
from schemas.utctime import UtcTime

MAX_LIMIT = 1000
CURSOR_PREFIX = "cur_"
Direction = Literal["asc", "desc"]
ProvenanceFilter = Literal["production-state", "exploratory-state", "all"]


class EventsRequest(JobRequest):
    """The Guide's `GET /lens/events` query."""

    surface_id: str | None = Field(None, min_length=1, description="Only this surface.")
    since: UtcTime | None = Field(None, description="Event timestamp from, inclusive.")
    until: UtcTime | None = Field(None, description="Event timestamp before, exclusive.")
    correlation_id: str | None = Field(
        None, min_length=1, description="Only the events of this call (a multiplexed call's"
        " events share it).",
    )  # fmt: skip
    provenance: ProvenanceFilter = Field(
        "production-state", description="production-state (default), exploratory-state or all."
    )
    direction: Direction = Field(
        "desc", description="desc: latest received first (default); asc: oldest first."
    )
    limit: int = Field(100, ge=1, le=MAX_LIMIT, description="Events per page.")
    cursor: str | None = Field(
        None, min_length=1, description="The previous page's nextCursor: the page after it."
    )

    @model_validator(mode="after")
    def _window(self) -> EventsRequest:
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise ValueError(f"empty window: since {rfc3339(self.since)} is not before until")
        return self

    def query_digest(self) -> str:
        """What a cursor is bound to: every field but the page's size and place."""
        fields = self.model_dump(mode="json", by_alias=True, exclude={"limit", "cursor"})
        text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


Request = EventsRequest


@dataclass(frozen=True)
class Place:
    """An event's place in the paging order: its first receipt's version, its id."""

    version: int
    event_id: str


def encode_cursor(place: Place, request: EventsRequest) -> str:
    raw = json.dumps(
        [place.version, place.event_id, request.direction, request.query_digest()],
        separators=(",", ":"),
    )
    return CURSOR_PREFIX + base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(request: EventsRequest) -> Place | None:
    """The cursor's place; `JobError` for a cursor that is not one of ours or that was
    issued for another query."""
    text = request.cursor
    if text is None:
        return None
    try:
        if not text.startswith(CURSOR_PREFIX):
            raise ValueError(text)
        body = text[len(CURSOR_PREFIX) :]
        version, event_id, direction, digest = json.loads(
            base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        )
        place = Place(int(version), str(event_id))
    except (ValueError, TypeError, json.JSONDecodeError):
        raise JobError(
            "cursor: not a cursor this collector issued", "invalid_cursor",
            details={"cursor": text}, hint="pass the nextCursor of the previous page as is",
        ) from None  # fmt: skip
    if direction != request.direction or digest != request.query_digest():
        raise JobError(
            "cursor: issued for another query (the filters and direction of every page"
            " must be the first page's)",
            "cursor_mismatch",
            details={"cursor": text},
            hint="repeat the first page's query with the cursor; only limit may change",
        )
    return place


@with_config(ConfigDict(extra="forbid"))
class DimensionDocument(TypedDict):
    dimensionId: str
    passed: bool | None
    score: float | None
    expected: str
    actual: str
    judge: str


@with_config(ConfigDict(extra="forbid"))
class EmissionDocument(TypedDict):
    stream: str
    seq: int
    final: bool


@with_config(ConfigDict(extra="forbid"))
class EventDocument(TypedDict):
    eventId: str
    surfaceId: str
    agentId: str
    correlationId: str
    runMode: str
    provenance: str
    timestamp: dt.datetime
    lensVersion: str
    lightSourceId: str
    lightSourceRequested: str
    substrate: dict[str, str]
    cohortTags: list[str]
    multiplexRole: str
    fixtureId: str
    markers: dict[str, list[str]]
    dimensions: list[DimensionDocument]
    latencyMs: float | None
    costUsd: float | None
    tokensInput: int | None
    tokensOutput: int | None
    emission: EmissionDocument
    traceId: str
    spanId: str
    sdkName: str
    sdkVersion: str
    resourceAttributes: dict[str, Any]
    extras: dict[str, Any]
    contractVersionId: str
    contractFindings: list[str]
    firstReceivedAt: dt.datetime
    ingestedAt: dt.datetime


@with_config(ConfigDict(extra="forbid"))
class EventsDocument(TypedDict):
    events: list[EventDocument]
    count: int
    nextCursor: str | None


@dataclass(frozen=True)
class Report:
    events: tuple[EventDocument, ...]
    next_cursor: str | None

    def to_json(self) -> EventsDocument:
        return {
            "events": list(self.events),
            "count": len(self.events),
            "nextCursor": self.next_cursor,
        }


_COLUMNS = (
    "event_id", "surface_id", "agent_id", "correlation_id", "run_mode", "provenance",
    "timestamp", "lens_version", "light_source_id", "light_source_requested", "substrate",
    "cohort_tags", "multiplex_role", "fixture_id", "markers", "latency_ms", "cost_usd",
    "tokens_input", "tokens_output", "dimension_ids", "emission_stream", "emission_seq",
    "emission_final", "trace_id", "span_id", "sdk_name", "sdk_version",
    "resource_attributes", "extras", "contract_version_id", "contract_findings", "ingested_at",
)  # fmt: skip


def _filters(request: EventsRequest) -> tuple[list[str], dict[str, Any]]:
    clauses = ["tenant_id = {tenant:String}"]
    params: dict[str, Any] = {"tenant": request.tenant or ""}
    if request.surface_id is not None:
        clauses.append("surface_id = {surface:String}")
        params["surface"] = request.surface_id
    if request.correlation_id is not None:
        clauses.append("correlation_id = {correlation:String}")
        params["correlation"] = request.correlation_id
    if request.provenance != "all":
        clauses.append("provenance = {provenance:String}")
        params["provenance"] = request.provenance
    if request.since is not None:
        clauses.append("timestamp >= {since:DateTime64(9, 'UTC')}")
        params["since"] = to_store_time(request.since)
    if request.until is not None:
        clauses.append("timestamp < {until:DateTime64(9, 'UTC')}")
        params["until"] = to_store_time(request.until)
    return clauses, params


def _page_sql(request: EventsRequest, after: Place | None) -> tuple[str, dict[str, Any]]:
    clauses, params = _filters(request)
    order = "ASC" if request.direction == "asc" else "DESC"
    keyset = ""
    if after is not None:
        beyond = ">" if request.direction == "asc" else "<"
        keyset = (
            f"WHERE (place, e.event_id) {beyond} ({{after_version:UInt64}}, {{after_id:String}})"
        )
        params["after_version"] = after.version
        params["after_id"] = after.event_id
    params["fetch"] = request.limit + 1
    columns = ", ".join(f"e.{name} AS {name}" for name in _COLUMNS)
    sql = (
        f"SELECT o.place AS place, o.first_received AS first_received_at, {columns}"
        f" FROM (SELECT tenant_id, {', '.join(_COLUMNS)}"
        f" FROM {EVALUATION_EVENTS.qualified} FINAL WHERE {' AND '.join(clauses)}) AS e"
        " INNER JOIN (SELECT tenant_id, event_id, min(first_ingest_version) AS place,"
        " min(first_received_at) AS first_received"
        f" FROM {EVENT_OWNERS.qualified} WHERE tenant_id = {{tenant:String}}"
        " GROUP BY tenant_id, event_id) AS o"
        " ON e.tenant_id = o.tenant_id AND e.event_id = o.event_id"
        f" {keyset} ORDER BY place {order}, e.event_id {order} LIMIT {{fetch:UInt32}}"
    )
    return sql, params


def _dimensions(
    store: Store, tenant: str, event_ids: list[str]
) -> dict[str, dict[str, DimensionDocument]]:
    if not event_ids:
        return {}
    rows = store.query(
        "SELECT event_id, dimension_id, passed, score, expected, actual, judge"
        f" FROM {EVALUATION_DIMENSIONS.qualified} FINAL"
        " WHERE tenant_id = {tenant:String} AND event_id IN {ids:Array(String)}",
        {"tenant": tenant, "ids": event_ids},
    ).dicts()
    out: dict[str, dict[str, DimensionDocument]] = {}
    for row in rows:
        out.setdefault(row["event_id"], {})[row["dimension_id"]] = {
            "dimensionId": row["dimension_id"],
            "passed": row["passed"],
            "score": row["score"],
            "expected": row["expected"],
            "actual": row["actual"],
            "judge": row["judge"],
        }
    return out


def _object(text: str) -> dict[str, Any]:
    value = json.loads(text) if text else {}
    return value if isinstance(value, dict) else {"value": value}


def _document(row: dict[str, Any], dimensions: dict[str, DimensionDocument]) -> EventDocument:
    # The latest version's dimensions: a grade of a dimension a later re-send dropped
    # stays in its table, but is no longer the event's.
    graded = [dimensions[d] for d in row["dimension_ids"] if d in dimensions]
    return {
        "eventId": row["event_id"],
        "surfaceId": row["surface_id"],
        "agentId": row["agent_id"],
        "correlationId": row["correlation_id"],
        "runMode": row["run_mode"],
        "provenance": row["provenance"],
        "timestamp": from_store_time(row["timestamp"]),
        "lensVersion": row["lens_version"],
        "lightSourceId": row["light_source_id"],
        "lightSourceRequested": row["light_source_requested"],
        "substrate": dict(row["substrate"]),
        "cohortTags": list(row["cohort_tags"]),
        "multiplexRole": row["multiplex_role"],
        "fixtureId": row["fixture_id"],
        "markers": {k: list(v) for k, v in row["markers"].items()},
        "dimensions": graded,
        "latencyMs": row["latency_ms"],
        "costUsd": row["cost_usd"],
        "tokensInput": row["tokens_input"],
        "tokensOutput": row["tokens_output"],
        "emission": {
            "stream": row["emission_stream"],
            "seq": int(row["emission_seq"]),
            "final": bool(row["emission_final"]),
        },
        "traceId": row["trace_id"],
        "spanId": row["span_id"],
        "sdkName": row["sdk_name"],
        "sdkVersion": row["sdk_version"],
        "resourceAttributes": _object(row["resource_attributes"]),
        "extras": _object(row["extras"]),
        "contractVersionId": row["contract_version_id"],
        "contractFindings": list(row["contract_findings"]),
        "firstReceivedAt": from_store_time(row["first_received_at"]),
        "ingestedAt": from_store_time(row["ingested_at"]),
    }


def run(store: Store, request: EventsRequest, clock: Clock) -> Report:
    """One page of the tenant's events after the cursor's place (see the module)."""
    after = decode_cursor(request)
    if request.tenant is None:  # the store holds no tenant yet: nothing to read
        return Report((), None)
    sql, params = _page_sql(request, after)
    rows = store.query(sql, params).dicts()
    page, more = rows[: request.limit], len(rows) > request.limit
    dims = _dimensions(store, request.tenant, [row["event_id"] for row in page])
    events = tuple(_document(row, dims.get(row["event_id"], {})) for row in page)
    cursor = None
    if page and (more or request.direction == "asc"):
        last = page[-1]
        cursor = encode_cursor(Place(int(last["place"]), last["event_id"]), request)
    return Report(events, cursor)


persist = saves_nothing
finding = never_a_finding

JOB = Job(
    name="events",
    request=EventsRequest,
    document=EventsDocument,
    run=run,
    persist=persist,
    finding=finding,
)
