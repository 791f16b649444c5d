"""Bootstrap: propose a contract surface entry from a surface's traffic.

Every dimension, cohort-tag key and substrate column the surface's events carry in the
window is a candidate, labelled

- `deterministic` when it is on at least `min_presence` of the surface's events, on at
  least `min_count` events, in every part of the window that has events (the window is
  cut in `PARTS` equal parts, so an item that appeared only lately is not "consistent"),
  and, for a dimension, always of one type (`score` when a score is reported, else
  `boolean`);
- `lowConfidence` otherwise, with the reasons.

The draft surface holds the deterministic candidates; substrate columns get the
defaults `operator` / `transparent` / `deployment-state`, to review. The draft
contract is the agent's active contract with this surface added (or replaced), so it
registers as the agent's next version. ClickHouse aggregates; Python labels.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from processors.jobs import Job, JobRequest, NotFound, never_a_finding, saves_nothing
from processors.topology.documents import BootstrapDocument
from schemas.contracts import Contract, Surface
from schemas.events import DEFAULT_TENANT
from schemas.placement import placed_in
from schemas.registry import active_version
from schemas.store import Store
from schemas.tables import EVALUATION_DIMENSIONS, EVALUATION_EVENTS
from schemas.times import Clock, rfc3339, to_store_time
from schemas.utctime import UtcTime

Inference = Literal["deterministic", "lowConfidence"]
PARTS = 4
MIN_COUNT = 20
MIN_PRESENCE = 0.9
MAX_CANDIDATES = 100
COLUMN_DEFAULTS = {
    "control": "operator",
    "visibility": "transparent",
    "semantic": "deployment-state",
}
# What a contract accepts as an id (schemas.contracts.Id): others cannot be declared.
_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:/@+-]{0,127}$")

_SCOPE = """
tenant_id = {tenant:String} AND surface_id = {surface:String}
AND (empty({agent:String}) OR agent_id = {agent:String})
AND timestamp >= {since:DateTime64(9, 'UTC')} AND timestamp < {until:DateTime64(9, 'UTC')}
AND """ + placed_in(since="{since:DateTime64(9, 'UTC')}", until="{until:DateTime64(9, 'UTC')}")
_PART = "least({parts:Int64} - 1, intDiv(toUnixTimestamp64Milli(timestamp) - {since_ms:Int64},"
_PART += " {part_ms:Int64}))"

_EVENTS = f"""
SELECT {_PART} AS part, count() AS events
FROM {EVALUATION_EVENTS.qualified} FINAL
WHERE {_SCOPE}
GROUP BY part
"""
_AGENT = f"""
SELECT agent_id FROM {EVALUATION_EVENTS.qualified} FINAL
WHERE {_SCOPE} AND agent_id != ''
GROUP BY agent_id ORDER BY count() DESC, agent_id LIMIT 1
"""
# Tags and columns: per item, events carrying it, parts it appears in, a few values.
_ITEMS = f"""
SELECT item.1 AS kind, item.2 AS id, count() AS events, uniqExact(part) AS parts,
       arraySort(groupUniqArray(5)(item.3)) AS values
FROM (
    SELECT {_PART} AS part, arrayDistinct(arrayConcat(
        arrayMap(t -> ('tag', splitByChar('=', t)[1],
                       if(position(t, '=') > 0, substring(t, position(t, '=') + 1), '')),
                 cohort_tags),
        arrayMap(k -> ('column', k, substrate[k]), mapKeys(substrate))
    )) AS items
    FROM {EVALUATION_EVENTS.qualified} FINAL
    WHERE {_SCOPE}
)
ARRAY JOIN items AS item
GROUP BY kind, id
ORDER BY events DESC, id
"""
_DIMENSIONS = f"""
SELECT dimension_id, uniqExact(event_id) AS events, uniqExact({_PART}) AS parts,
       countIf(score IS NOT NULL) AS scores, countIf(score IS NULL AND passed IS NOT NULL) AS bools
FROM {EVALUATION_DIMENSIONS.qualified} FINAL
WHERE {_SCOPE}
GROUP BY dimension_id
ORDER BY events DESC, dimension_id
"""


@dataclass(frozen=True)
class Thresholds:
    min_count: int = MIN_COUNT
    min_presence: float = MIN_PRESENCE


@dataclass(frozen=True)
class BootstrapWindow:
    tenant_id: str
    surface_id: str
    since: dt.datetime
    until: dt.datetime
    agent_id: str = ""


def _label(
    events: int, parts: int, total: int, parts_with_events: int, types: dict[str, int],
    item_id: str, limits: Thresholds,
) -> tuple[Inference, list[str], dict[str, Any]]:  # fmt: skip
    share = events / total if total else 0.0
    reasons = []
    if not _ID.match(item_id):
        reasons.append("not an id a contract accepts")
    if events < limits.min_count:
        reasons.append(f"on {events} events, fewer than {limits.min_count}")
    if share < limits.min_presence:
        reasons.append(f"on {share:.0%} of events, under {limits.min_presence:.0%}")
    if parts < parts_with_events:
        reasons.append(
            f"absent from {parts_with_events - parts} of {parts_with_events} window parts"
        )
    seen_types = [t for t, n in types.items() if n]
    if len(seen_types) > 1:
        reasons.append("unstable type: " + " and ".join(seen_types))
    evidence: dict[str, Any] = {
        "count": events,
        "presenceShare": round(share, 6),
        "windowParts": {"present": parts, "withEvents": parts_with_events},
    }
    return ("lowConfidence" if reasons else "deterministic"), reasons, evidence


def propose(
    store: Store, window: BootstrapWindow, limits: Thresholds = Thresholds()
) -> dict[str, Any] | None:
    """The bootstrap report (the Guide's camelCase), None when the surface had no events
    in the window."""
    span_ms = int((window.until - window.since).total_seconds() * 1000)
    params = {
        "tenant": window.tenant_id,
        "surface": window.surface_id,
        "agent": window.agent_id,
        "since": to_store_time(window.since),
        "until": to_store_time(window.until),
        "parts": PARTS,
        "since_ms": int(window.since.timestamp() * 1000),
        "part_ms": max(1, -(-span_ms // PARTS)),
    }
    per_part = store.query(_EVENTS, params).rows
    total = sum(int(n) for _, n in per_part)
    if not total:
        return None
    with_events = len(per_part)
    agent = window.agent_id or next(iter(str(a) for (a,) in store.query(_AGENT, params).rows), "")

    dimensions = []
    for dim_id, events, parts, scores, bools in store.query(_DIMENSIONS, params).rows:
        types = {"score": int(scores), "boolean": int(bools)}
        inference, reasons, evidence = _label(
            int(events), int(parts), total, with_events, types, str(dim_id), limits
        )
        kind = "score" if types["score"] else "boolean"
        stable = sum(1 for n in types.values() if n) == 1
        dimensions.append(
            {"id": str(dim_id), "type": kind if stable else None,
             "inference": inference, "evidence": evidence | {"typesSeen": types},
             "reasons": reasons}
        )  # fmt: skip
    found: dict[str, list[dict[str, Any]]] = {"tag": [], "column": []}
    for kind, item_id, events, parts, values in store.query(_ITEMS, params).rows:
        inference, reasons, evidence = _label(
            int(events), int(parts), total, with_events, {}, str(item_id), limits
        )
        sample = [str(v) for v in values if v]
        found[kind].append(
            {"id": str(item_id), "inference": inference,
             "evidence": evidence | {"valuesSeen": sample}, "reasons": reasons}
        )  # fmt: skip

    surface = Surface.model_validate(
        {
            "id": window.surface_id,
            "dimensions": [
                {"id": d["id"], "type": d["type"]}
                for d in dimensions
                if d["inference"] == "deterministic"
            ],
            "cohortTags": [t["id"] for t in found["tag"] if t["inference"] == "deterministic"],
            "substrateColumns": [
                {"id": c["id"], **COLUMN_DEFAULTS}
                for c in found["column"]
                if c["inference"] == "deterministic"
            ],
        }
    )
    active = active_version(store, window.tenant_id, agent) if _ID.match(agent) else None
    contract = None
    if _ID.match(agent):
        others = [s for s in active.contract.surfaces if s.id != surface.id] if active else []
        contract = Contract(agent_id=agent, surfaces=(*others, surface)).to_json()
    return {
        "surfaceId": window.surface_id,
        "tenantId": window.tenant_id,
        "agentId": agent or None,
        "since": rfc3339(window.since),
        "until": rfc3339(window.until),
        "events": total,
        "thresholds": {
            "minCount": limits.min_count,
            "minPresence": limits.min_presence,
            "windowParts": PARTS,
        },
        "candidates": {
            "dimensions": _capped(dimensions),
            "cohortTags": _capped(found["tag"]),
            "substrateColumns": _capped(found["column"]),
        },
        "surface": surface.to_json(),
        "contract": contract,
        "basedOnVersionId": active.version_id if active else None,
    }


def _capped(items: list[dict[str, Any]]) -> dict[str, Any]:
    """Most frequent first, at most `MAX_CANDIDATES`; `count` says how many there were."""
    return {"count": len(items), "examples": items[:MAX_CANDIDATES]}


# --- the job (processors/jobs.py): POST /lens/topology/bootstrap


class BootstrapRequest(JobRequest):
    """The Guide's bootstrap body (chapter 9): a surface's traffic over [since, until)."""

    named_fields: ClassVar[Mapping[str, str]] = {"surface_id": "surface", "agent_id": "agent"}

    surface_id: str = Field(min_length=1, description="The surface whose traffic is read.")
    since: UtcTime = Field(description="Window start (inclusive).")
    until: UtcTime = Field(description="Window end (exclusive).")
    agent_id: str = Field("", description="Only this agent's events (default: every agent's).")
    min_count: int = Field(
        20, ge=1, description="Fewest events an item must be on to be deterministic."
    )
    min_presence: float = Field(
        0.9, ge=0.0, le=1.0,
        description="Smallest share of the surface's events an item must be on to be"
        " deterministic.",
    )  # fmt: skip

    @model_validator(mode="after")
    def _window(self) -> BootstrapRequest:
        if self.until <= self.since:
            raise ValueError("until must be after since")
        return self


Request = BootstrapRequest


@dataclass(frozen=True)
class Report:
    proposal: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return self.proposal


def run(store: Store, request: BootstrapRequest, clock: Clock) -> Report:
    """The proposal; `NotFound` (`no_events`) when the surface had no events."""
    tenant = request.tenant or DEFAULT_TENANT
    window = BootstrapWindow(
        tenant, request.surface_id, request.since, request.until, request.agent_id
    )
    proposal = propose(store, window, Thresholds(request.min_count, request.min_presence))
    if proposal is None:
        raise NotFound(
            f"surface {request.surface_id} has no events in tenant {tenant}"
            f" from {rfc3339(request.since)} to {rfc3339(request.until)}",
            "no_events",
            details={"surfaceId": request.surface_id},
            hint="widen the window, or check the surface id and --tenant",
        )
    return Report(proposal)


persist = saves_nothing
finding = never_a_finding

JOB = Job(
    name="topology-bootstrap",
    request=BootstrapRequest,
    document=BootstrapDocument,
    run=run,
    persist=persist,
    finding=finding,
)
