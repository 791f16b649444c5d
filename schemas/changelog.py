"""The change-event log in the store: the one Python writer of
`holonograph.change_events` (operator records and availability marks; governance rows
are derived by the store itself, migration 0008) and the reads every consumer shares
(the CLI, the receiver's HTTP API, drift attribution, the report).

An operator row with an `id` of the operator's is idempotent: recording it again with
the same content answers the stored row (`created` false), with other content it is a
`ChangeConflict` and nothing is written. Without an id each record is a new change.
Every read is of one tenant (or every tenant, `tenant_id` None).
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass
from typing import Any

from schemas.changes import (
    AVAILABILITY,
    OPERATOR,
    AvailabilityMark,
    ChangeEvent,
    ChangeRecord,
    serves,
    store_moment,
)
from schemas.store import Store
from schemas.tables import CHANGE_EVENTS, EVALUATION_EVENTS
from schemas.times import from_store_time, rfc3339, to_store_time

FAR_PAST = dt.datetime(1900, 1, 1, tzinfo=dt.UTC)
FAR_FUTURE = dt.datetime(2262, 4, 11, tzinfo=dt.UTC)


class ChangeConflict(ValueError):
    """The id names a change already recorded with other content."""


def new_change_id() -> str:
    return f"chg_{uuid.uuid4().hex}"


def record_change(
    store: Store, tenant_id: str, record: ChangeRecord, now: dt.datetime
) -> tuple[ChangeEvent, bool]:
    """Store the operator's change of `tenant_id`; the stored row and whether it is new."""
    event = ChangeEvent(
        tenant_id=tenant_id,
        origin=OPERATOR,
        change_id=record.id or new_change_id(),
        kind=record.kind,
        at=record.at,
        description=record.description,
        surface_id=record.surface_id,
        agent_id=record.agent_id,
        artifact_id=record.artifact_id,
        artifact_version=record.artifact_version,
        actor=record.actor,
        recorded_at=store_moment(now),
    )
    return _keep(store, event, explicit=record.id is not None)


def mark_availability(
    store: Store, tenant_id: str, mark: AvailabilityMark, now: dt.datetime
) -> tuple[ChangeEvent, bool]:
    """Store an availability mark of `tenant_id`: one row, a transition at `at` (single)
    or the interval [at, endsAt) (paired)."""
    paired = mark.mode == "paired"
    start = mark.unreachable_from if paired else (mark.at or store_moment(now))
    assert start is not None  # the mark's validation
    what = mark.light_source_id or f"surface {mark.surface_id}"
    if paired:
        assert mark.unreachable_until is not None
        text = f"{what} unreachable until {rfc3339(mark.unreachable_until)}"
    else:
        text = f"{what} {'came back' if mark.transition == 'available' else 'became unavailable'}"
    details: dict[str, Any] = {"mode": mark.mode}
    if mark.transition is not None:
        details["transition"] = mark.transition
    if mark.reason is not None:
        details["reason"] = mark.reason
        text += f": {mark.reason}"
    event = ChangeEvent(
        tenant_id=tenant_id,
        origin=OPERATOR,
        change_id=mark.id or new_change_id(),
        kind=AVAILABILITY,
        at=start,
        ends_at=mark.unreachable_until,
        description=text,
        surface_id=mark.surface_id,
        agent_id=mark.agent_id,
        light_source_id=mark.light_source_id,
        actor=mark.actor,
        details=details,
        recorded_at=store_moment(now),
    )
    return _keep(store, event, explicit=mark.id is not None)


def _content(event: ChangeEvent) -> dict[str, Any]:
    """What makes two records of one id the same change (not who sent it, or when)."""
    return event.model_dump(exclude={"actor", "recorded_at"})


def _keep(store: Store, event: ChangeEvent, explicit: bool) -> tuple[ChangeEvent, bool]:
    if explicit:
        stored = find_change(store, event.tenant_id, OPERATOR, event.change_id)
        if stored is not None:
            if _content(stored) != _content(event):
                raise ChangeConflict(
                    f"change {event.change_id} is already recorded with other content"
                    f" ({stored.kind} at {rfc3339(stored.at)}: {stored.description});"
                    " nothing was recorded"
                )
            return stored, False
    store.insert(CHANGE_EVENTS.qualified, [_row(event)], CHANGE_EVENTS.columns)
    return event, True


def _row(event: ChangeEvent) -> list[Any]:
    values = {
        "tenant_id": event.tenant_id,
        "origin": event.origin,
        "change_id": event.change_id,
        "agent_id": event.agent_id or "",
        "surface_id": event.surface_id or "",
        "kind": event.kind,
        "artifact_id": event.artifact_id or "",
        "artifact_version": event.artifact_version or "",
        "at": to_store_time(event.at),
        "ends_at": None if event.ends_at is None else to_store_time(event.ends_at),
        "light_source_id": event.light_source_id or "",
        "actor": event.actor or "",
        "description": event.description,
        "details": json.dumps(event.details, sort_keys=True, separators=(",", ":")),
        "recorded_at": to_store_time(event.recorded_at),
    }
    return [values[c] for c in CHANGE_EVENTS.columns]


def _event(row: dict[str, Any]) -> ChangeEvent:
    def text(name: str) -> str | None:
        return str(row[name]) or None

    details = json.loads(row["details"] or "{}")
    return ChangeEvent(
        tenant_id=str(row["tenant_id"]),
        origin=str(row["origin"]),
        change_id=str(row["change_id"]),
        kind=str(row["kind"]),
        at=from_store_time(row["at"]),
        description=str(row["description"]),
        surface_id=text("surface_id"),
        agent_id=text("agent_id"),
        artifact_id=text("artifact_id"),
        artifact_version=text("artifact_version"),
        ends_at=None if row["ends_at"] is None else from_store_time(row["ends_at"]),
        light_source_id=text("light_source_id"),
        actor=text("actor"),
        details=details if isinstance(details, dict) else {},
        recorded_at=from_store_time(row["recorded_at"]),
    )


_SELECT = f"SELECT {CHANGE_EVENTS.column_list()} FROM {CHANGE_EVENTS.qualified} FINAL"


def find_change(store: Store, tenant_id: str, origin: str, change_id: str) -> ChangeEvent | None:
    rows = store.query(
        f"{_SELECT} WHERE tenant_id = {{tenant:String}} AND origin = {{origin:String}}"
        " AND change_id = {id:String}",
        {"tenant": tenant_id, "origin": origin, "id": change_id},
    ).dicts()
    return _event(rows[0]) if rows else None


@dataclass(frozen=True)
class SurfaceScope:
    """Who a surface's events say serves it over a window: the agents that own it and
    the light sources (served and requested ids) that answered it. Read without FINAL
    (a set of values needs no deduplication): an event re-sent with another agent or
    light source may add its old value too until the versions merge."""

    agents: tuple[str, ...]
    light_sources: frozenset[str]


def surface_scope(
    store: Store, tenant_id: str | None, surface_id: str, since: dt.datetime, until: dt.datetime
) -> SurfaceScope:
    row = store.query(
        f"""
        SELECT groupUniqArrayIf(agent_id, agent_id != ''),
               arrayFilter(x -> x != '', arrayDistinct(arrayConcat(
                   groupUniqArray(light_source_id), groupUniqArray(light_source_requested))))
        FROM {EVALUATION_EVENTS.qualified}
        WHERE ({{tenant:String}} = '' OR tenant_id = {{tenant:String}})
          AND surface_id = {{surface:String}}
          AND timestamp >= {{since:DateTime64(3, 'UTC')}}
          AND timestamp < {{until:DateTime64(3, 'UTC')}}
        """,
        {
            "tenant": tenant_id or "",
            "surface": surface_id,
            "since": to_store_time(since),
            "until": to_store_time(until),
        },
    ).rows[0]
    return SurfaceScope(tuple(sorted(str(a) for a in row[0])), frozenset(str(s) for s in row[1]))


@dataclass(frozen=True)
class ChangeQuery:
    """Changes of one tenant (None: every tenant) in [since, until) (an interval: one
    that overlaps it); of one surface (its own, its agents' agent-wide ones and the
    tenant-wide ones, marks only of light sources that served it) or one agent (its own
    and the tenant-wide ones); of some kinds (empty: every kind)."""

    tenant_id: str | None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    surface_id: str | None = None
    agent_id: str | None = None
    kinds: tuple[str, ...] = ()


def list_changes(
    store: Store, query: ChangeQuery, scope: SurfaceScope | None = None
) -> list[ChangeEvent]:
    """The changes `query` selects, oldest first; of a surface, by its `scope` over the
    query's window (read when not given)."""
    since, until = query.since or FAR_PAST, query.until or FAR_FUTURE
    if query.surface_id and scope is None:
        scope = surface_scope(store, query.tenant_id, query.surface_id, since, until)
    elif not query.surface_id:
        scope = None
    rows = store.query(
        f"""{_SELECT}
        WHERE ({{tenant:String}} = '' OR tenant_id = {{tenant:String}})
          AND at < {{until:DateTime64(3, 'UTC')}}
          AND ifNull(ends_at, at) >= {{since:DateTime64(3, 'UTC')}}
          AND ({{surface:String}} = '' OR surface_id = {{surface:String}}
               OR (surface_id = '' AND (agent_id = '' OR has({{agents:Array(String)}}, agent_id))))
          AND ({{agent:String}} = '' OR agent_id = {{agent:String}}
               OR (agent_id = '' AND surface_id = ''))
          AND (empty({{kinds:Array(String)}}) OR has({{kinds:Array(String)}}, kind))
        ORDER BY at, change_id
        """,
        {
            "tenant": query.tenant_id or "",
            "since": to_store_time(since),
            "until": to_store_time(until),
            "surface": query.surface_id or "",
            "agents": list(scope.agents) if scope else [],
            "agent": query.agent_id or "",
            "kinds": list(query.kinds),
        },
    ).dicts()
    events = [_event(row) for row in rows]
    if scope is None:
        return events
    return [
        e
        for e in events
        if e.light_source_id is None
        or e.surface_id is not None
        or serves(e.light_source_id, set(scope.light_sources))
    ]


@dataclass(frozen=True)
class Unavailability:
    """An interval a light source (or surface) was marked unavailable: a paired mark,
    or a single `unavailable` mark to the next `available` one of the same scope
    (`end` None: not marked back yet)."""

    start: dt.datetime
    end: dt.datetime | None
    marks: tuple[ChangeEvent, ...]

    @property
    def reason(self) -> str:
        reasons = [str(m.details["reason"]) for m in self.marks if m.details.get("reason")]
        return "; ".join(dict.fromkeys(reasons))

    @property
    def subject(self) -> str:
        first = self.marks[0]
        return first.light_source_id or f"surface {first.surface_id}"


def unavailability(marks: list[ChangeEvent]) -> list[Unavailability]:
    """The intervals `marks` (availability changes, any order) describe, by start. A
    `came back` mark with no open interval before it closes nothing."""
    out: list[Unavailability] = []
    open_: dict[tuple[str | None, str | None, str | None], ChangeEvent] = {}
    for mark in sorted(marks, key=lambda m: (m.at, m.change_id)):
        if mark.kind != AVAILABILITY:
            continue
        if mark.ends_at is not None:
            out.append(Unavailability(mark.at, mark.ends_at, (mark,)))
            continue
        scope = (mark.light_source_id, mark.surface_id, mark.agent_id)
        if mark.transition == "unavailable":
            open_.setdefault(scope, mark)
        elif scope in open_:
            began = open_.pop(scope)
            out.append(Unavailability(began.at, mark.at, (began, mark)))
    out += [Unavailability(m.at, None, (m,)) for m in open_.values()]
    return sorted(out, key=lambda u: u.start)
