"""The topology scan: per surface, the set difference of declared (the agent's active
contract), observed (its events in a window) and inventoried (its latest structural
inventories), for four kinds of item: dimensions, cohort-tag keys, substrate columns
and light sources.

ClickHouse aggregates: one pass over the events before `until` yields, per (surface,
kind, item), the events carrying it in the window (count, first and last seen) and the
last time before it (for retirement candidates); a second the per-surface event
counts. Python only compares those small aggregates with the contract.

How events map to items: a dimension is an id in `dimension_ids`; a substrate column a
key of `substrate`, or a cohort tag `column=value` whose column the surface declares
(the Guide's diagnostic columns are set that way); any other cohort tag counts by its
key (the part before `=`, or the whole bare tag); a light source is the declared routing
entry the event answered for (`schemas.routing`: its served id, a version of it, or its
requested id; the most specific entry when several match), else its served id, so an
alias routing (`openai/gpt-5`) is observed in events served as `openai/gpt-5/2026-05` or
requested as `openai/gpt-5`. An event belongs to the agent by its agent id, or, without
one, when its surface is one the agent's contract declares. A routing with
`activeRunModes` declares its light sources only for the run modes the surface's events
in the window carry (an observer routed in eval and production is not missing from a
window of test traffic, and is undeclared there if it answers).

A gap is an item declared and not observed, observed and not declared, a quiet
declared or inventoried surface, an undeclared observed surface, or an inventoried
surface the contract does not declare. Without a threshold a scan passes when it has
no gap; with `fail_under` when overall coverage (declared items observed / declared
items) reaches it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, model_validator

from processors.analysis_events import record_event
from processors.jobs import Job, JobRequest
from processors.topology.documents import ScanDocument
from processors.topology.inventory import LatestInventory, latest_inventories
from schemas.contracts import ContractVersion, Surface
from schemas.events import DEFAULT_TENANT
from schemas.placement import placed_in
from schemas.registry import active_version
from schemas.routing import entry_answered
from schemas.store import Store
from schemas.tables import EVALUATION_EVENTS
from schemas.times import Clock, from_store_time, rfc3339, to_store_time
from schemas.utctime import UtcTime

Kind = Literal["dimension", "tag", "column", "lightSource"]
KINDS: tuple[Kind, ...] = ("dimension", "tag", "column", "lightSource")
# The report's name for each kind's lattice.
FIELD: dict[Kind, str] = {
    "dimension": "dimensions",
    "tag": "cohortTags",
    "column": "substrateColumns",
    "lightSource": "lightSources",
}
SCAN_KIND = "topology-scan"
DEFAULT_EXAMPLES = 10

# The layout's pruning predicate over the agent's surfaces (`schemas.placement`).
_PLACED = placed_in(
    surface=None, since="{since:DateTime64(9, 'UTC')}", until="{until:DateTime64(9, 'UTC')}"
)
_AGENT_EVENTS = """
tenant_id = {tenant:String}
AND (agent_id = {agent:String} OR (agent_id = '' AND has({declared:Array(String)}, surface_id)))
"""

# Per (surface, kind, item) of the declared surfaces: events in [since, until) carrying
# it, first/last seen there, and the last time before `since`.
_ITEMS = f"""
SELECT surface_id, item.1 AS kind, item.2 AS id,
       countIf(timestamp >= {{since:DateTime64(9, 'UTC')}}) AS events,
       minIfOrNull(timestamp, timestamp >= {{since:DateTime64(9, 'UTC')}}) AS first_seen,
       maxIfOrNull(timestamp, timestamp >= {{since:DateTime64(9, 'UTC')}}) AS last_seen,
       maxIfOrNull(timestamp, timestamp < {{since:DateTime64(9, 'UTC')}}) AS last_before,
       countIf(timestamp < {{since:DateTime64(9, 'UTC')}}) AS events_before
FROM (
    SELECT surface_id, timestamp, arrayDistinct(arrayConcat(
        arrayMap(d -> ('dimension', d), dimension_ids),
        arrayMap(k -> ('column', k), mapKeys(substrate)),
        arrayMap(t -> (
            if(position(t, '=') > 0 AND has({{columns:Array(String)}},
                                            concat(surface_id, '\\x1f', splitByChar('=', t)[1])),
               'column', 'tag'),
            splitByChar('=', t)[1]), cohort_tags),
        if(light_source_id = '', [],
           [('lightSource', concat(light_source_id, '\\x1f', light_source_requested))])
    )) AS items
    FROM {EVALUATION_EVENTS.qualified} FINAL
    WHERE {_AGENT_EVENTS}
      AND has({{declared:Array(String)}}, surface_id)
      AND timestamp < {{until:DateTime64(9, 'UTC')}}
)
ARRAY JOIN items AS item
GROUP BY surface_id, kind, id
ORDER BY surface_id, kind, id
"""

# Per surface of the agent: its events in [since, until) and their run modes.
_SURFACES = f"""
SELECT surface_id, count() AS events, min(timestamp) AS first_seen, max(timestamp) AS last_seen,
       groupUniqArray(run_mode) AS run_modes
FROM {EVALUATION_EVENTS.qualified} FINAL
WHERE {_AGENT_EVENTS}
  AND timestamp >= {{since:DateTime64(9, 'UTC')}} AND timestamp < {{until:DateTime64(9, 'UTC')}}
  AND {_PLACED}
GROUP BY surface_id
ORDER BY surface_id
"""


@dataclass(frozen=True)
class Seen:
    """An item's (or a surface's) events in the window, and before it."""

    events: int
    first_seen: dt.datetime | None
    last_seen: dt.datetime | None
    events_before: int = 0
    last_before: dt.datetime | None = None
    run_modes: frozenset[str] = frozenset()  # a surface's, in the window


@dataclass(frozen=True)
class ScanWindow:
    tenant_id: str
    agent_id: str
    since: dt.datetime
    until: dt.datetime


@dataclass
class ScanReport:
    """The report (`to_json`: the Guide's camelCase shape) and what gates on it."""

    window: ScanWindow
    scanned_at: dt.datetime
    scan_id: str
    contract_version_id: str | None
    inventories: list[LatestInventory]
    surfaces: list[dict[str, Any]]
    quiet: list[str]
    undeclared: list[tuple[str, Seen]]
    inventory_only: list[str]
    declared_not_inventoried: list[str]
    declared_items: int
    observed_items: int
    gaps: int
    retirement_candidates: int
    examples: int = DEFAULT_EXAMPLES
    fail_under: float | None = None
    recorded: bool = False
    reasons: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float | None:
        return _ratio(self.observed_items, self.declared_items)

    @property
    def passed(self) -> bool:
        return not self.reasons

    def to_json(self) -> dict[str, Any]:
        n = self.examples
        return {
            "scanId": self.scan_id,
            "agentId": self.window.agent_id,
            "tenantId": self.window.tenant_id,
            "since": rfc3339(self.window.since),
            "until": rfc3339(self.window.until),
            "scannedAt": rfc3339(self.scanned_at),
            "contractVersionId": self.contract_version_id,
            "inventories": [
                {
                    "inventoryId": i.inventory_id,
                    "consumerId": i.consumer_id,
                    "capturedAt": rfc3339(i.captured_at),
                }
                for i in self.inventories
            ],
            "coverage": _coverage(self.declared_items, self.observed_items),
            "gaps": self.gaps,
            "retirementCandidates": self.retirement_candidates,
            "surfaces": self.surfaces,
            "quietSurfaces": _capped(self.quiet, n),
            "undeclaredSurfaces": _capped(
                [{"id": s, **_seen_json(seen)} for s, seen in self.undeclared], n
            ),
            "inventoryOnlySurfaces": _capped(self.inventory_only, n),
            "declaredNotInventoried": _capped(self.declared_not_inventoried, n),
            "gate": {
                "failUnder": self.fail_under,
                "passed": self.passed,
                "reasons": self.reasons,
            },
            "recorded": self.recorded,
        }


def _ratio(observed: int, declared: int) -> float | None:
    return round(observed / declared, 6) if declared else None


def _coverage(declared: int, observed: int) -> dict[str, Any]:
    return {"declared": declared, "observed": observed, "ratio": _ratio(observed, declared)}


def _time(value: dt.datetime | None) -> str | None:
    return rfc3339(value) if value is not None else None


def _seen_json(seen: Seen) -> dict[str, Any]:
    return {
        "count": seen.events,
        "firstSeen": _time(seen.first_seen),
        "lastSeen": _time(seen.last_seen),
    }


def _capped(items: list[Any], n: int) -> dict[str, Any]:
    """`count` and at most `n` examples: reports stay compact whatever the traffic."""
    return {"count": len(items), "examples": items[:n]}


def declared_items(
    surface: Surface, run_modes: frozenset[str] | None = None
) -> dict[Kind, set[str]]:
    """What the contract declares of one surface, per kind; light sources only of the
    routings active in one of `run_modes` (None: every routing)."""
    routings = [
        r for r in surface.routings if run_modes is None or any(r.active_in(m) for m in run_modes)
    ]
    return {
        "dimension": {d.id for d in surface.dimensions},
        "tag": {t.id for t in surface.cohort_tags},
        "column": {c.id for c in surface.substrate_columns},
        "lightSource": {ls for r in routings for ls in r.light_sources},
    }


def by_entry(entries: set[str], seen: dict[str, Seen]) -> dict[str, Seen]:
    """Observed light sources (keyed served id, U+001F, requested id) under the declared
    entry each answered for, the most specific first; one matching none stays under its
    served id."""
    ordered = sorted(entries, key=lambda e: (-len(e), e))
    out: dict[str, Seen] = {}
    for key, s in seen.items():
        served, _, requested = key.partition("\x1f")
        item = entry_answered(ordered, served, requested) or served
        out[item] = _merged(out[item], s) if item in out else s
    return out


def _merged(a: Seen, b: Seen) -> Seen:
    def first(x: dt.datetime | None, y: dt.datetime | None) -> dt.datetime | None:
        return min(x, y) if x and y else x or y

    def last(x: dt.datetime | None, y: dt.datetime | None) -> dt.datetime | None:
        return max(x, y) if x and y else x or y

    return Seen(
        a.events + b.events,
        first(a.first_seen, b.first_seen),
        last(a.last_seen, b.last_seen),
        a.events_before + b.events_before,
        last(a.last_before, b.last_before),
    )


def _when(value: Any) -> dt.datetime | None:
    """A store time; None where an `-IfOrNull` aggregate had no rows."""
    return None if value is None else from_store_time(value)


def _read_items(store: Store, params: dict[str, Any]) -> dict[str, dict[Kind, dict[str, Seen]]]:
    found: dict[str, dict[Kind, dict[str, Seen]]] = {}
    for surface, kind, item, n, first, last, before, n_before in store.query(_ITEMS, params).rows:
        found.setdefault(str(surface), {k: {} for k in KINDS})[kind][str(item)] = Seen(
            int(n), _when(first), _when(last), int(n_before), _when(before)
        )
    return found


def _read_surfaces(store: Store, params: dict[str, Any]) -> dict[str, Seen]:
    return {
        str(surface): Seen(int(n), _when(first), _when(last), run_modes=frozenset(modes))
        for surface, n, first, last, modes in store.query(_SURFACES, params).rows
    }


@dataclass
class _Tally:
    declared: int = 0
    observed: int = 0
    gaps: int = 0
    retirements: int = 0


def _lattice(
    declared: set[str], seen: dict[str, Seen], n: int, tally: _Tally
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One kind's set difference on one surface, and its retirement candidates."""
    in_window = {item: s for item, s in seen.items() if s.events}
    not_observed = sorted(declared - in_window.keys())
    undeclared = sorted(in_window.keys() - declared)
    both = sorted(declared & in_window.keys())
    retired = [
        {
            "id": item,
            "lastSeen": _time(seen[item].last_before),
            "countBefore": seen[item].events_before,
        }
        for item in not_observed
        if item in seen and seen[item].events_before
    ]
    tally.declared += len(declared)
    tally.observed += len(both)
    tally.gaps += len(not_observed) + len(undeclared)
    tally.retirements += len(retired)
    lattice = {
        "declaredNotObserved": _capped(not_observed, n),
        "observedNotDeclared": _capped(
            [{"id": item, **_seen_json(in_window[item])} for item in undeclared], n
        ),
        "declaredAndObserved": _capped(
            [{"id": item, "count": in_window[item].events} for item in both], n
        ),
    }
    return lattice, retired


def scan_id(window: ScanWindow, scanned_at: dt.datetime) -> str:
    key = "\x1f".join(
        (window.tenant_id, window.agent_id, rfc3339(window.since), rfc3339(window.until),
         scanned_at.isoformat())
    )  # fmt: skip
    return "tsc_" + hashlib.sha256(key.encode()).hexdigest()[:24]


def run_scan(
    store: Store,
    window: ScanWindow,
    scanned_at: dt.datetime,
    *,
    fail_under: float | None = None,
    examples: int = DEFAULT_EXAMPLES,
) -> ScanReport:
    """Scan the agent's surfaces over the window (nothing is written)."""
    version: ContractVersion | None = active_version(store, window.tenant_id, window.agent_id)
    contract_surfaces = list(version.contract.surfaces) if version else []
    declared_ids = [s.id for s in contract_surfaces]
    columns = [f"{s.id}\x1f{c.id}" for s in contract_surfaces for c in s.substrate_columns]
    params = {
        "tenant": window.tenant_id,
        "agent": window.agent_id,
        "declared": declared_ids,
        "columns": columns,
        "since": to_store_time(window.since),
        "until": to_store_time(window.until),
    }
    items = _read_items(store, params) if declared_ids else {}
    observed = _read_surfaces(store, params)
    inventories = latest_inventories(store, window.tenant_id, window.agent_id)
    inventoried = {s for inv in inventories for s in inv.surfaces}

    tally = _Tally()
    surfaces = []
    for surface in contract_surfaces:
        surfaces.append(
            _surface_entry(surface, items.get(surface.id, {}), observed.get(surface.id),
                           inventoried if inventories else None, examples, tally)
        )  # fmt: skip
    declared_set = set(declared_ids)
    quiet = sorted((declared_set | inventoried) - observed.keys())
    undeclared = [(s, seen) for s, seen in sorted(observed.items()) if s not in declared_set]
    inventory_only = sorted(inventoried - declared_set)
    not_inventoried = sorted(declared_set - inventoried) if inventories else []
    gaps = tally.gaps + len(quiet) + len(undeclared) + len(inventory_only)
    report = ScanReport(
        window=window,
        scanned_at=scanned_at,
        scan_id=scan_id(window, scanned_at),
        contract_version_id=version.version_id if version else None,
        inventories=inventories,
        surfaces=surfaces,
        quiet=quiet,
        undeclared=undeclared,
        inventory_only=inventory_only,
        declared_not_inventoried=not_inventoried,
        declared_items=tally.declared,
        observed_items=tally.observed,
        gaps=gaps,
        retirement_candidates=tally.retirements,
        examples=examples,
        fail_under=fail_under,
    )
    report.reasons = _gate(report)
    return report


def _surface_entry(
    surface: Surface,
    seen: dict[Kind, dict[str, Seen]],
    events: Seen | None,
    inventoried: set[str] | None,
    examples: int,
    tally: _Tally,
) -> dict[str, Any]:
    own = _Tally()
    entry: dict[str, Any] = {
        "id": surface.id,
        "observed": events is not None,
        "inventoried": None if inventoried is None else surface.id in inventoried,
        "events": _seen_json(events or Seen(0, None, None)),
    }
    retirements: list[dict[str, Any]] = []
    declared = declared_items(surface, events.run_modes if events is not None else None)
    seen = {**seen, "lightSource": by_entry(declared["lightSource"], seen.get("lightSource", {}))}
    for kind in KINDS:
        lattice, retired = _lattice(declared[kind], seen.get(kind, {}), examples, own)
        entry[FIELD[kind]] = lattice
        retirements += [{"kind": kind, **r} for r in retired]
    entry["coverage"] = _coverage(own.declared, own.observed)
    entry["retirementCandidates"] = _capped(retirements, examples)
    tally.declared += own.declared
    tally.observed += own.observed
    tally.gaps += own.gaps
    tally.retirements += own.retirements
    return entry


def _gate(report: ScanReport) -> list[str]:
    """Why the scan fails its gate (empty: it passes)."""
    if report.contract_version_id is None:
        return [
            f"agent {report.window.agent_id} has no contract in tenant {report.window.tenant_id}"
        ]
    if report.fail_under is None:
        return [f"{report.gaps} gap{'s' if report.gaps != 1 else ''}"] if report.gaps else []
    ratio = report.ratio
    if ratio is None or ratio < report.fail_under:
        shown = "none (nothing declared)" if ratio is None else f"{ratio:.3f}"
        return [f"coverage {shown} is below {report.fail_under}"]
    return []


def record_scan(store: Store, report: ScanReport) -> None:
    """Store the report as one `topology-scan` analysis event of the scan's tenant."""
    report.recorded = True
    payload = json.dumps(report.to_json(), separators=(",", ":"))
    record_event(
        store,
        report.scan_id,
        SCAN_KIND,
        "",
        "",
        report.scanned_at,
        payload,
        tenant_id=report.window.tenant_id,
        verdict="pass" if report.passed else "fail",
    )


# --- the job (processors/jobs.py): POST /lens/topology/scan


class ScanRequest(JobRequest):
    """The Guide's scan body (chapter 9): an agent's contract against its events over
    [since, until) and its latest inventories; `record` stores the report."""

    agent_id: str = Field(min_length=1, description="The agent whose contract is scanned.")
    since: UtcTime = Field(description="Window start (inclusive).")
    until: UtcTime = Field(description="Window end (exclusive).")
    record: bool = Field(False, description="Store the report as a topology-scan analysis event.")
    fail_under: float | None = Field(
        None, ge=0.0, le=1.0,
        description="Gate on coverage alone: a finding when it is below this ratio"
        " (default: any gap is one).",
    )  # fmt: skip
    examples: int = Field(DEFAULT_EXAMPLES, ge=0, le=1000, description="Items per list.")

    @model_validator(mode="after")
    def _window(self) -> ScanRequest:
        if self.until <= self.since:
            raise ValueError("until must be after since")
        return self

    def persists(self) -> bool:
        return self.record


Request = ScanRequest
Report = ScanReport


def run(store: Store, request: ScanRequest, clock: Clock) -> ScanReport:
    """The scan (nothing is written; `persist` records it)."""
    window = ScanWindow(
        request.tenant or DEFAULT_TENANT, request.agent_id, request.since, request.until
    )
    return run_scan(
        store, window, clock(), fail_under=request.fail_under, examples=request.examples
    )


def persist(store: Store, report: ScanReport) -> ScanReport:
    record_scan(store, report)
    return report


def finding(report: ScanReport) -> bool:
    """The gate failed: a gap, or coverage below `failUnder`, or no contract."""
    return not report.passed


JOB = Job(
    name="topology-scan",
    request=ScanRequest,
    document=ScanDocument,
    run=run,
    persist=persist,
    finding=finding,
    owner_tenant=True,
)
