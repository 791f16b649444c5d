"""Check fixtures against the events in the store over a window.

The whole evaluation runs in ClickHouse: each assertion compiles to a verdict-rank
expression (see `eval.SqlBuilder`), one query counts events per verdict
and another pages through the per-event breakdown. The top-level verdict is the
strongest event verdict (fail > pass > requires-judge > unevaluable > not-applicable);
because one pass outweighs any number of unevaluable events, the result also carries
counts per verdict and the share of applicable events that were evaluable (pass or
fail). An empty window is `unevaluable`: there is no evidence either way. Each check
is persisted as one row per fixture in `conformance_results`. A check reads one
tenant's events and runs that tenant's fixtures.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NotRequired

from pydantic import ConfigDict, Field, model_validator, with_config
from typing_extensions import TypedDict

from processors.conformance.approve import fixture_digest, live_fixture, live_fixtures
from processors.conformance.eval import VERDICT_SQL, SqlBuilder
from processors.jobs import Job, JobError, JobRequest, NotFound
from schemas.conformance import (
    RANK_VERDICT,
    VERDICT_ORDER,
    VERDICT_RANK,
    Enforceability,
    Fixture,
    Id,
    Verdict,
)
from schemas.events import DEFAULT_TENANT, RunMode
from schemas.placement import placed_in
from schemas.store import Store
from schemas.tables import CONFORMANCE_RESULTS, EVALUATION_DIMENSIONS, EVALUATION_EVENTS
from schemas.times import Clock, from_store_time, utc_now
from schemas.utctime import UtcTime

DEFAULT_WINDOW = dt.timedelta(hours=24)
MAX_PAGE_SIZE = 1000
FAILING_SAMPLE = 20


class FixtureNotFound(NotFound):
    """No live (approved) fixture with that id."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "fixture_not_found")


@dataclass(frozen=True)
class Window:
    since: dt.datetime
    until: dt.datetime

    @classmethod
    def resolve(
        cls, since: dt.datetime | None, until: dt.datetime | None, clock: Callable[[], dt.datetime]
    ) -> Window:
        """Half-open [since, until) in UTC; defaults: until now, since a day earlier."""
        end = (until or clock()).astimezone(dt.UTC)
        start = since.astimezone(dt.UTC) if since else end - DEFAULT_WINDOW
        if start >= end:
            raise ValueError(f"empty window: since {start.isoformat()} is not before until")
        return cls(start, end)


@dataclass(frozen=True)
class EventRow:
    event_id: str
    timestamp: dt.datetime
    verdict: Verdict
    when: tuple[Verdict, ...]
    assertions: tuple[Verdict, ...]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "eventId": self.event_id,
            "timestamp": self.timestamp,
            "verdict": self.verdict,
        }
        if self.when:
            out["when"] = list(self.when)
        out["assertions"] = list(self.assertions)
        return out


@dataclass(frozen=True)
class CheckResult:
    check_id: str
    fixture: Fixture
    fixture_version: int
    surface_id: str
    window: Window
    checked_at: dt.datetime
    run_modes: tuple[str, ...]
    counts: dict[Verdict, int]
    failing_event_ids: tuple[str, ...]
    events: tuple[EventRow, ...] = ()
    page_offset: int = 0
    page_size: int = 0
    page_verdicts: tuple[Verdict, ...] = ()
    persisted: bool = field(default=False, compare=False)
    tenant_id: str = DEFAULT_TENANT

    @property
    def events_checked(self) -> int:
        return sum(self.counts.values())

    @property
    def applicable(self) -> int:
        return self.events_checked - self.counts["not-applicable"]

    @property
    def evaluable(self) -> int:
        return self.counts["pass"] + self.counts["fail"]

    @property
    def evaluable_share(self) -> float | None:
        return self.evaluable / self.applicable if self.applicable else None

    @property
    def verdict(self) -> Verdict:
        for verdict in VERDICT_ORDER:
            if self.counts[verdict]:
                return verdict
        return "unevaluable"

    def to_json(self) -> dict[str, Any]:
        return {
            "checkId": self.check_id,
            "tenantId": self.tenant_id,
            "fixtureId": self.fixture.fixture_id,
            "fixtureVersion": self.fixture_version or None,
            "fixtureDigest": fixture_digest(self.fixture),
            "ruleId": self.fixture.rule_id,
            "surfaceId": self.surface_id,
            "enforceability": self.fixture.enforceability,
            "verdict": self.verdict,
            "eventsChecked": self.events_checked,
            "counts": dict(self.counts),
            "applicableEvents": self.applicable,
            "evaluableEvents": self.evaluable,
            "evaluableShare": self.evaluable_share,
            "window": {"since": self.window.since, "until": self.window.until},
            "runModes": list(self.run_modes) or None,
            "checkedAt": self.checked_at,
            "failingEventIds": list(self.failing_event_ids),
            "events": [e.to_json() for e in self.events],
            "page": {
                "offset": self.page_offset,
                "size": self.page_size,
                "returned": len(self.events),
                "verdicts": list(self.page_verdicts) or None,
            },
        }


def _verdicts_sql(fixture: Fixture, run_modes: Sequence[str]) -> tuple[str, dict[str, Any]]:
    """A subquery with one row per event in the window: event_id, ts, g, a, v."""
    sql_builder = SqlBuilder()
    guard = sql_builder.array(fixture.when or [], fixture.rule_id)
    checks = sql_builder.array(fixture.checks(), fixture.rule_id)
    filters = (
        "tenant_id = {tenant:String} AND surface_id = {surface:String}"
        " AND timestamp >= {since:DateTime64(6, 'UTC')}"
        " AND timestamp < {until:DateTime64(6, 'UTC')} AND "
        + placed_in(since="{since:DateTime64(6, 'UTC')}", until="{until:DateTime64(6, 'UTC')}")
    )
    event_filters = filters + (" AND run_mode IN {run_modes:Array(String)}" if run_modes else "")
    sql = f"""
        SELECT event_id, ts, g, a, {VERDICT_SQL} AS v FROM (
            SELECT e.event_id AS event_id, e.timestamp AS ts,
                   {guard} AS g, {checks} AS a
            FROM (
                SELECT event_id, timestamp, markers, cohort_tags, latency_ms, cost_usd
                FROM {EVALUATION_EVENTS.qualified} FINAL WHERE {event_filters}
            ) AS e
            LEFT JOIN (
                SELECT event_id, groupArray(tuple(dimension_id, passed, score, judge)) AS dims
                FROM {EVALUATION_DIMENSIONS.qualified} FINAL WHERE {filters}
                GROUP BY event_id
            ) AS d ON e.event_id = d.event_id
        )"""
    return sql, sql_builder.parameters


def _count(store: Store, sql: str, parameters: dict[str, Any]) -> dict[Verdict, int]:
    counts: dict[Verdict, int] = dict.fromkeys(VERDICT_ORDER, 0)
    for rank, n in store.query(f"SELECT v, count() FROM ({sql}) GROUP BY v", parameters).rows:
        counts[RANK_VERDICT[int(rank)]] = int(n)
    return counts


def _page(
    store: Store,
    sql: str,
    parameters: dict[str, Any],
    offset: int,
    size: int,
    verdicts: Sequence[Verdict],
) -> list[EventRow]:
    where = "WHERE v IN {page_verdicts:Array(UInt8)}" if verdicts else ""
    params = {
        **parameters,
        "page_offset": offset,
        "page_size": size,
        "page_verdicts": [VERDICT_RANK[v] for v in verdicts],
    }
    rows = store.query(
        f"SELECT event_id, ts, v, g, a FROM ({sql}) {where} ORDER BY ts, event_id"
        " LIMIT {page_size:UInt32} OFFSET {page_offset:UInt64}",
        params,
    ).rows
    return [
        EventRow(
            event_id=event_id,
            timestamp=from_store_time(ts),
            verdict=RANK_VERDICT[int(v)],
            when=tuple(RANK_VERDICT[int(x)] for x in g),
            assertions=tuple(RANK_VERDICT[int(x)] for x in a),
        )
        for event_id, ts, v, g, a in rows
    ]


def check_fixture(
    store: Store,
    fixture: Fixture,
    *,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    surface_id: str | None = None,
    run_modes: Sequence[str] = (),
    fixture_version: int = 0,
    page_offset: int = 0,
    page_size: int = 100,
    page_verdicts: Sequence[Verdict] = (),
    persist: bool = True,
    clock: Callable[[], dt.datetime] = utc_now,
    check_id: str | None = None,
    tenant_id: str = DEFAULT_TENANT,
) -> CheckResult:
    """Run one fixture (stored: pass its version; inline: version 0) over a window of
    the tenant's events."""
    if surface_id is not None and surface_id != fixture.surface_id:
        raise ValueError(
            f"fixture {fixture.fixture_id} applies to {fixture.surface_id}, not {surface_id}"
        )
    if not 0 <= page_size <= MAX_PAGE_SIZE or page_offset < 0:
        raise ValueError(f"page size must be 0..{MAX_PAGE_SIZE} and offset >= 0")
    window = Window.resolve(since, until, clock)
    sql, parameters = _verdicts_sql(fixture, run_modes)
    parameters.update(
        tenant=tenant_id,
        surface=fixture.surface_id,
        since=window.since,
        until=window.until,
        run_modes=list(run_modes),
    )
    counts = _count(store, sql, parameters)
    failing: list[EventRow] = []
    if counts["fail"]:
        failing = _page(store, sql, parameters, 0, FAILING_SAMPLE, ["fail"])
    events: list[EventRow] = []
    if page_size and sum(counts.values()) > page_offset:
        events = _page(store, sql, parameters, page_offset, page_size, page_verdicts)
    result = CheckResult(
        check_id=check_id or f"chk_{uuid.uuid4().hex}",
        fixture=fixture,
        fixture_version=fixture_version,
        surface_id=fixture.surface_id,
        window=window,
        checked_at=clock().astimezone(dt.UTC),
        run_modes=tuple(run_modes),
        counts=counts,
        failing_event_ids=tuple(r.event_id for r in failing),
        events=tuple(events),
        page_offset=page_offset,
        page_size=page_size,
        page_verdicts=tuple(page_verdicts),
        tenant_id=tenant_id,
    )
    if persist:
        persist_result(store, result)
    return result


def check_stored(store: Store, fixture_id: str, **options: Any) -> CheckResult:
    """Run the live version of an approved fixture of the tenant (`tenant_id` option)."""
    record = live_fixture(store, fixture_id, options.get("tenant_id", DEFAULT_TENANT))
    if record is None:
        raise FixtureNotFound(f"no approved fixture {fixture_id!r} is live")
    return check_fixture(store, record.fixture, fixture_version=record.version, **options)


def check_surface(store: Store, surface_id: str, **options: Any) -> list[CheckResult]:
    """Run every live fixture of a surface over the same window (one clock reading),
    under one check id; `options` are those of `check_fixture`."""
    now = options.pop("clock", utc_now)()
    options.setdefault("check_id", f"chk_{uuid.uuid4().hex}")
    return [
        check_fixture(store, r.fixture, fixture_version=r.version, clock=lambda: now, **options)
        for r in live_fixtures(store, surface_id, options.get("tenant_id", DEFAULT_TENANT))
    ]


def persist_result(store: Store, result: CheckResult) -> None:
    counts = [result.counts[v] for v in VERDICT_ORDER]
    row = [
        result.tenant_id,
        result.check_id,
        result.fixture.fixture_id,
        result.fixture_version,
        fixture_digest(result.fixture),
        result.fixture.rule_id,
        result.surface_id,
        result.fixture.enforceability,
        result.window.since,
        result.window.until,
        result.checked_at,
        list(result.run_modes),
        result.verdict,
        result.events_checked,
        *counts,
        result.evaluable_share,
        list(result.failing_event_ids),
    ]
    store.insert(CONFORMANCE_RESULTS.qualified, [row], CONFORMANCE_RESULTS.columns)


def _results_where(
    tenant_id: str,
    surface_id: str | None,
    fixture_id: str | None,
    since: dt.datetime | None,
    until: dt.datetime | None,
    judged_since: dt.datetime | None,
    judged_until: dt.datetime | None,
) -> tuple[str, dict[str, Any]]:
    filters: list[str] = ["tenant_id = {tenant:String}"]
    parameters: dict[str, Any] = {"tenant": tenant_id}
    for column, name, value, type_name in (
        ("surface_id", "surface", surface_id, "String"),
        ("fixture_id", "fixture", fixture_id, "String"),
    ):
        if value is not None:
            filters.append(f"{column} = {{{name}:{type_name}}}")
            parameters[name] = value
    bounds: tuple[tuple[str, str, dt.datetime | None], ...] = (
        ("checked_at >= {since:DateTime64(3, 'UTC')}", "since", since),
        ("checked_at < {until:DateTime64(3, 'UTC')}", "until", until),
        ("window_end > {judged_since:DateTime64(3, 'UTC')}", "judged_since", judged_since),
        ("window_start < {judged_until:DateTime64(3, 'UTC')}", "judged_until", judged_until),
    )
    for clause, name, bound in bounds:
        if bound is not None:
            filters.append(clause)
            parameters[name] = bound
    return " AND ".join(filters), parameters


def list_results(
    store: Store,
    *,
    surface_id: str | None = None,
    fixture_id: str | None = None,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    limit: int = 100,
    tenant_id: str = DEFAULT_TENANT,
    judged_since: dt.datetime | None = None,
    judged_until: dt.datetime | None = None,
    offset: int = 0,
) -> list[dict[str, Any]]:
    """Persisted check results of a tenant, newest first: conformance over time for one
    surface or fixture (checked_at in [since, until); `judged_*`: only checks whose
    events' window overlaps [judged_since, judged_until)), `limit` from `offset`."""
    where, parameters = _results_where(
        tenant_id, surface_id, fixture_id, since, until, judged_since, judged_until
    )
    rows = store.query(
        f"SELECT {CONFORMANCE_RESULTS.column_list()} FROM {CONFORMANCE_RESULTS.qualified} FINAL"
        f" WHERE {where} ORDER BY checked_at DESC, fixture_id, check_id"
        " LIMIT {limit:UInt32} OFFSET {offset:UInt64}",
        {**parameters, "limit": limit, "offset": offset},
    ).dicts()
    return [_result_json(row) for row in rows]


def count_results(
    store: Store,
    *,
    surface_id: str | None = None,
    fixture_id: str | None = None,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    tenant_id: str = DEFAULT_TENANT,
    judged_since: dt.datetime | None = None,
    judged_until: dt.datetime | None = None,
) -> int:
    """How many results `list_results` pages through for the same selection."""
    where, parameters = _results_where(
        tenant_id, surface_id, fixture_id, since, until, judged_since, judged_until
    )
    sql = f"SELECT count() FROM {CONFORMANCE_RESULTS.qualified} FINAL WHERE {where}"
    return int(store.query(sql, parameters).scalar() or 0)


def _result_json(row: dict[str, Any]) -> dict[str, Any]:
    utc = {k: from_store_time(v) for k, v in row.items() if isinstance(v, dt.datetime)}
    row = {**row, **utc}
    return {
        "checkId": row["check_id"],
        "tenantId": row["tenant_id"],
        "fixtureId": row["fixture_id"],
        "fixtureVersion": row["fixture_version"] or None,
        "fixtureDigest": row["fixture_digest"],
        "ruleId": row["rule_id"],
        "surfaceId": row["surface_id"],
        "enforceability": row["enforceability"],
        "verdict": row["verdict"],
        "eventsChecked": row["events_checked"],
        "counts": {v: row[f"count_{v.replace('-', '_')}"] for v in VERDICT_ORDER},
        "evaluableShare": row["evaluable_share"],
        "window": {"since": row["window_start"], "until": row["window_end"]},
        "runModes": row["run_modes"] or None,
        "checkedAt": row["checked_at"],
        "failingEventIds": row["failing_event_ids"],
    }


# --- the job (processors.jobs): POST /lens/conformance/check -----------------------------


class CheckRequest(JobRequest):
    """The Guide's POST /lens/conformance/check body: a live fixture (`fixtureId`), an
    inline one (`fixture`), or every live fixture of `surfaceId`, over [since, until)."""

    fixture_id: Id | None = Field(None, description="A live (approved) fixture.")
    fixture: Fixture | None = Field(None, description="An inline fixture (not yet approved).")
    surface_id: Id | None = Field(
        None, description="Every live fixture of this surface (or a surface filter)."
    )
    since: UtcTime | None = Field(
        None, description="Window start, inclusive (default until - 24h)."
    )
    until: UtcTime | None = Field(None, description="Window end, exclusive (default now).")
    run_modes: tuple[RunMode, ...] = Field((), description="Only these modes.")
    offset: int = Field(0, ge=0, description="First event of the per-event breakdown.")
    limit: int = Field(50, ge=0, le=MAX_PAGE_SIZE, description="Events in the breakdown.")
    verdicts: tuple[Verdict, ...] = Field((), description="Breakdown shows only these verdicts.")
    persist: bool = Field(True, description="Record the result (conformance_results).")

    @model_validator(mode="after")
    def _what(self) -> CheckRequest:
        if self.fixture_id is not None and self.fixture is not None:
            raise ValueError("give fixtureId (a live fixture) or fixture (inline), not both")
        if self.fixture_id is None and self.fixture is None and self.surface_id is None:
            raise ValueError("give fixtureId (a live fixture), fixture (inline) or surfaceId")
        return self

    def persists(self) -> bool:
        return self.persist


Request = CheckRequest


@dataclass(frozen=True)
class Report:
    """One result per fixture checked; `single` (a fixture was named or given): the
    document is that result, else the list."""

    results: tuple[CheckResult, ...]
    single: bool

    def to_json(self) -> Any:
        if self.single:
            return self.results[0].to_json()
        return [r.to_json() for r in self.results]


def run(store: Store, request: Request, clock: Clock) -> Report:
    """Check the fixture(s) over the window, read-only (`persist` records them). An
    empty window is the request's mistake whatever the store holds: refused before any
    fixture is looked up."""
    try:
        Window.resolve(request.since, request.until, clock)
    except ValueError as err:
        raise JobError(str(err)) from None
    options: dict[str, Any] = {
        "since": request.since,
        "until": request.until,
        "run_modes": request.run_modes,
        "page_offset": request.offset,
        "page_size": request.limit,
        "page_verdicts": request.verdicts,
        "persist": False,
        "clock": clock,
        "tenant_id": request.tenant or DEFAULT_TENANT,
    }
    try:
        if request.fixture is not None:
            results = [
                check_fixture(store, request.fixture, surface_id=request.surface_id, **options)
            ]
        elif request.fixture_id is not None:
            results = [
                check_stored(store, request.fixture_id, surface_id=request.surface_id, **options)
            ]
        else:
            assert request.surface_id is not None
            results = check_surface(store, request.surface_id, **options)
    except ValueError as err:
        raise JobError(str(err)) from None
    if not results:  # a gate that checked nothing must not pass
        raise NotFound(
            f"no live fixture for surface {request.surface_id}: nothing was checked",
            "no_live_fixture",
            details={"surfaceId": request.surface_id},
            hint="approve one with `holonograph conformance approve`; see them with"
            " `holonograph conformance list --surface`",
        )
    single = request.fixture is not None or request.fixture_id is not None
    return Report(tuple(results), single)


def persist(store: Store, report: Report) -> Report:
    """One row per fixture checked in `conformance_results`."""
    for result in report.results:
        persist_result(store, result)
    saved = tuple(dataclasses.replace(r, persisted=True) for r in report.results)
    return dataclasses.replace(report, results=saved)


def finding(report: Report) -> bool:
    """A fixture's top-level verdict is fail."""
    return any(r.verdict == "fail" for r in report.results)


@with_config(ConfigDict(extra="forbid"))
class WindowDocument(TypedDict):
    since: dt.datetime
    until: dt.datetime


@with_config(ConfigDict(extra="forbid"))
class PageDocument(TypedDict):
    offset: int
    size: int
    returned: int
    verdicts: list[Verdict] | None


@with_config(ConfigDict(extra="forbid"))
class EventDocument(TypedDict):
    eventId: str
    timestamp: dt.datetime
    verdict: Verdict
    when: NotRequired[list[Verdict]]
    assertions: list[Verdict]


@with_config(ConfigDict(extra="forbid"))
class CheckDocument(TypedDict):
    """`CheckResult.to_json()`: the verdict, counts per verdict, the window used and a
    page of the per-event breakdown."""

    checkId: str
    tenantId: str
    fixtureId: str
    fixtureVersion: int | None
    fixtureDigest: str
    ruleId: str
    surfaceId: str
    enforceability: Enforceability
    verdict: Verdict
    eventsChecked: int
    counts: dict[Verdict, int]
    applicableEvents: int
    evaluableEvents: int
    evaluableShare: float | None
    window: WindowDocument
    runModes: list[str] | None
    checkedAt: dt.datetime
    failingEventIds: list[str]
    events: list[EventDocument]
    page: PageDocument


JOB = Job(
    "conformance.check",
    Request,
    CheckDocument | list[CheckDocument],
    run,
    persist,
    finding,
    owner_tenant=True,
)
