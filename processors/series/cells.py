"""Bucketed series for drift and variance, aggregated in ClickHouse.

Every read goes through `evaluation_dimensions FINAL` (one row per (tenant, event) x
dimension, whatever the event's timestamp), filtered to one tenant or all, and comes
back grouped: one *cell* per (bucket, layer values) with its event count and
pass count (or score sum and sum of squares). A month of hourly traffic is a few
thousand cells however many events it holds; raw events never reach Python. On a
multiplexed surface a series is one role's events (`SELECTION_FILTER`: by default the
primary's, what the agent used), never a blend of vendors unless asked for.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from processors.series.changepoint import BucketSeries
from schemas.analysis import ROLES, Role, SeriesRead
from schemas.placement import placed_in
from schemas.routing import answers_for_sql
from schemas.store import Store
from schemas.tables import EVALUATION_EVENTS
from schemas.times import to_store_time

BUCKETS = {"hour": dt.timedelta(hours=1), "day": dt.timedelta(days=1)}
# Fixed SQL fragments chosen by name (never user text).
BUCKET_SQL = {"hour": "toStartOfHour(timestamp)", "day": "toStartOfDay(timestamp)"}


def _window(other_surfaces: bool = False) -> str:
    """Tenant, surface (or every other surface) and window, with the layout's pruning
    predicate (`schemas.placement.placed_in`: it narrows what is read, not what is
    taken)."""
    op = "!=" if other_surfaces else "="
    return f"""
    ({{tenant:String}} = '' OR tenant_id = {{tenant:String}})
    AND surface_id {op} {{surface:String}}
    AND timestamp >= {{since:DateTime64(3, 'UTC')}} AND timestamp < {{until:DateTime64(3, 'UTC')}}
    AND {placed_in(other_surfaces=other_surfaces)}
"""


_WINDOW = _window()
_FILTERS = """
    AND (empty({provenances:Array(String)}) OR has({provenances:Array(String)}, provenance))
    AND (empty({run_modes:Array(String)}) OR has({run_modes:Array(String)}, run_mode))
"""
SERIES_FILTER = _WINDOW + _FILTERS
# The same over every surface but the query's (the alias series).
OTHER_SURFACES_FILTER = _window(other_surfaces=True) + _FILTERS

_LIGHT_SOURCE = answers_for_sql(
    "{light_source:String}", "light_source_id", "light_source_requested"
)

# Which events a series takes on a multiplexed surface (`SeriesQuery.role`), for a
# query over `evaluation_dimensions` (which has no role column: the role is the event's,
# read from `evaluation_events` as a set in ClickHouse). `primary`: what the agent used,
# the events with role `primary` (a fallback's primary event is the vendor that
# answered) and those without a role; `observer`: the events with role `observer`;
# `all`: every event. `light_source` narrows to the events that answered for one light
# source (`schemas.routing.answers_for`: served as it or a version of it, or requested as
# it). The set holds the events the role leaves out (primary) or takes (observer).
SELECTION_FILTER = f"""
    AND ({{role:String}} = 'all' OR ((tenant_id, event_id) IN (
        SELECT tenant_id, event_id FROM {EVALUATION_EVENTS.qualified} FINAL
        WHERE {_WINDOW}
          AND (multiplex_role = 'observer'
               OR ({{role:String}} = 'primary' AND multiplex_role NOT IN ('', 'primary')))
    )) = ({{role:String}} = 'observer'))
    AND ({{light_source:String}} = '' OR {_LIGHT_SOURCE})
"""

# The role part of the selection on `evaluation_events` itself (a role column of its own).
ROLE_TAKEN = """
    ({role:String} = 'all'
     OR ({role:String} = 'observer' AND multiplex_role = 'observer')
     OR ({role:String} = 'primary' AND multiplex_role IN ('', 'primary')))
"""


@dataclass(frozen=True)
class SeriesQuery:
    """What to read: one surface (and dimension), a UTC window, a bucket width, the
    run-mode / provenance filter (empty tuple = no filter), the tenant (None: every
    tenant) and, on a multiplexed surface, the role and light source of the series."""

    surface_id: str
    since: dt.datetime
    until: dt.datetime
    bucket: str = "hour"
    dimension_id: str | None = None
    provenances: tuple[str, ...] = ("production-state",)
    run_modes: tuple[str, ...] = ()
    tenant_id: str | None = None
    role: Role = "primary"  # on a multiplexed surface: which events (`SELECTION_FILTER`)
    light_source: str = ""  # '' every light source the role takes

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}")

    def params(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant_id or "",
            "surface": self.surface_id,
            "since": to_store_time(self.since),
            "until": to_store_time(self.until),
            "provenances": list(self.provenances),
            "run_modes": list(self.run_modes),
            "dimension": self.dimension_id or "",
            "role": self.role,
            "light_source": self.light_source,
        }


@dataclass(frozen=True)
class Cell:
    """Outcomes of one bucket under one combination of layer values."""

    bucket: dt.datetime
    lens_version: str
    light_source_id: str
    light_source_requested: str
    substrate: tuple[tuple[str, str], ...]
    run_mode: str
    cohort: tuple[str, ...]
    n: float
    y: float
    yy: float

    def layer(self, name: str) -> str:
        """Value of a layer column: 'lens_version', 'light_source_id' or 'substrate:<key>'."""
        if name.startswith("substrate:"):
            return dict(self.substrate).get(name.split(":", 1)[1], "")
        return str(getattr(self, name))

    @property
    def stratum(self) -> tuple[str, tuple[str, ...]]:
        """The population slice: run mode and cohort tags."""
        return (self.run_mode, self.cohort)


def dimension_kinds(store: Store, query: SeriesQuery) -> dict[str, bool]:
    """Dimensions recorded on the surface in the window -> True if pass/fail."""
    sql = f"""
        SELECT dimension_id, countIf(passed IS NOT NULL) AS booleans,
               countIf(score IS NOT NULL) AS scores
        FROM holonograph.evaluation_dimensions FINAL
        WHERE {SERIES_FILTER} {SELECTION_FILTER}
          AND ({{dimension:String}} = '' OR dimension_id = {{dimension:String}})
        GROUP BY dimension_id ORDER BY dimension_id
    """
    rows = store.query(sql, query.params()).rows
    return {str(d): int(b) >= int(s) for d, b, s in rows if int(b) + int(s) > 0}


def fetch_cells(store: Store, query: SeriesQuery, dimension_id: str, binary: bool) -> list[Cell]:
    """One row per (bucket, lens, light source, alias, substrate, run mode, cohort)."""
    outcome = "passed IS NOT NULL" if binary else "score IS NOT NULL"
    sql = f"""
        SELECT {BUCKET_SQL[query.bucket]} AS bucket_start,
               lens_version, light_source_id, light_source_requested,
               mapSort(substrate) AS substrate_sorted, run_mode,
               arraySort(cohort_tags) AS cohort,
               count() AS events,
               {"countIf(passed)" if binary else "sum(score)"} AS y,
               {"countIf(passed)" if binary else "sum(score * score)"} AS yy
        FROM holonograph.evaluation_dimensions FINAL
        WHERE {SERIES_FILTER} {SELECTION_FILTER}
          AND dimension_id = {{dimension:String}} AND {outcome}
        GROUP BY bucket_start, lens_version, light_source_id, light_source_requested,
                 substrate_sorted, run_mode, cohort
        ORDER BY bucket_start
    """
    params = query.params() | {"dimension": dimension_id}
    return [
        Cell(
            bucket=row[0],
            lens_version=row[1],
            light_source_id=row[2],
            light_source_requested=row[3],
            substrate=tuple(sorted(dict(row[4]).items())),
            run_mode=row[5],
            cohort=tuple(row[6]),
            n=float(row[7]),
            y=float(row[8]),
            yy=float(row[9]),
        )
        for row in store.query(sql, params).rows
    ]


def event_count(store: Store, query: SeriesQuery) -> int:
    sql = f"""
        SELECT uniqExact(tenant_id, event_id) FROM holonograph.evaluation_dimensions FINAL
        WHERE {SERIES_FILTER} {SELECTION_FILTER}
          AND ({{dimension:String}} = '' OR dimension_id = {{dimension:String}})
    """
    return int(store.query(sql, query.params()).scalar() or 0)


class SelectionError(ValueError):
    """The series asked for is not one series (several observers, none chosen)."""


def read_selection(store: Store, query: SeriesQuery) -> SeriesRead:
    """Which events the query's series takes on its surface and window (filters as the
    series), what it leaves out, and the observer light sources there are (requested
    id, else served id). `--role observer` on a surface with several observers and no
    `--light-source` would average vendors: SelectionError naming them."""
    source = "light_source_requested != '', light_source_requested, light_source_id"
    sql = f"""
        SELECT countIf({ROLE_TAKEN} AND ({{light_source:String}} = '' OR {_LIGHT_SOURCE})),
               count(), countIf(multiplex_role != ''),
               arraySort(groupUniqArrayIf(if({source}), multiplex_role = 'observer'))
        FROM {EVALUATION_EVENTS.qualified} FINAL
        WHERE {SERIES_FILTER}
    """
    taken, events, with_role, observers = store.query(sql, query.params()).rows[0]
    read = SeriesRead(
        role=query.role,
        light_source=query.light_source or None,
        multiplexed=int(with_role) > 0,
        events=int(taken),
        left_out=int(events) - int(taken),
        observers=[str(o) for o in observers],
    )
    if query.role == "observer" and not query.light_source and len(read.observers) > 1:
        raise SelectionError(
            f"surface {query.surface_id} has {len(read.observers)} observer light sources"
            f" ({', '.join(read.observers)}): each is its own series, choose one with"
            " --light-source"
        )
    return read


def series_light_sources(store: Store, query: SeriesQuery) -> frozenset[str]:
    """The light sources (served and requested ids) of the events the query's series
    takes: on a multiplexed surface the primary's series holds its fallbacks' vendors
    but not an observer that only observed, the observer's series that observer's."""
    sql = f"""
        SELECT arrayFilter(x -> x != '', arrayDistinct(arrayConcat(
                   groupUniqArray(light_source_id), groupUniqArray(light_source_requested))))
        FROM {EVALUATION_EVENTS.qualified}
        WHERE {SERIES_FILTER} AND {ROLE_TAKEN}
          AND ({{light_source:String}} = '' OR {_LIGHT_SOURCE})
    """
    return frozenset(str(s) for s in store.query(sql, query.params()).rows[0][0])


def bucket_grid(since: dt.datetime, until: dt.datetime, bucket: str) -> list[dt.datetime]:
    """Bucket starts (naive UTC) covering [since, until)."""
    step = BUCKETS[bucket]
    start = to_store_time(since)
    start = start.replace(minute=0, second=0, microsecond=0)
    if bucket == "day":
        start = start.replace(hour=0)
    end = to_store_time(until)
    grid = []
    while start < end:
        grid.append(start)
        start += step
    return grid


@dataclass(frozen=True)
class Series:
    """The outcome series on the bucket grid (`index` maps series rows to grid rows;
    empty buckets are left out of the statistics but stay on the grid)."""

    grid: list[dt.datetime]
    n: np.ndarray
    y: np.ndarray
    yy: np.ndarray
    binary: bool
    cells: list[Cell] = field(repr=False)
    cell_index: np.ndarray = field(repr=False)  # grid row of every cell

    @property
    def index(self) -> np.ndarray:
        return np.flatnonzero(self.n > 0)

    def bucket_series(self) -> BucketSeries:
        i = self.index
        return BucketSeries(self.n[i], self.y[i], None if self.binary else self.yy[i])


def build_series(grid: Sequence[dt.datetime], cells: list[Cell], binary: bool) -> Series:
    position = {b: i for i, b in enumerate(grid)}
    n, y, yy = np.zeros(len(grid)), np.zeros(len(grid)), np.zeros(len(grid))
    kept = [c for c in cells if c.bucket in position]
    rows = np.array([position[c.bucket] for c in kept], dtype=np.int64)
    for c, r in zip(kept, rows, strict=True):
        n[r] += c.n
        y[r] += c.y
        yy[r] += c.yy
    return Series(list(grid), n, y, yy, binary, kept, rows)


def fetch_alias_series(
    store: Store, query: SeriesQuery, alias: str
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Pass/fail series of the *other* surfaces served under `alias` (requested alias,
    or served id when no alias is recorded), pooled over their boolean dimensions."""
    sql = f"""
        SELECT surface_id, {BUCKET_SQL[query.bucket]} AS bucket_start,
               count() AS events, countIf(passed) AS passes
        FROM holonograph.evaluation_dimensions FINAL
        WHERE {OTHER_SURFACES_FILTER}
          AND passed IS NOT NULL
          AND if(light_source_requested != '', light_source_requested, light_source_id)
              = {{alias:String}}
        GROUP BY surface_id, bucket_start
    """
    grid = bucket_grid(query.since, query.until, query.bucket)
    position = {b: i for i, b in enumerate(grid)}
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for surface, bucket, events, passes in store.query(sql, query.params() | {"alias": alias}).rows:
        if bucket not in position:
            continue
        n, k = out.setdefault(str(surface), (np.zeros(len(grid)), np.zeros(len(grid))))
        n[position[bucket]] += float(events)
        k[position[bucket]] += float(passes)
    return out


def layer_names(cells: Iterable[Cell]) -> list[str]:
    """The layer columns the cells vary over: lens, light source, each substrate key."""
    keys = sorted({k for c in cells for k, _ in c.substrate})
    return ["lens_version", "light_source_id", *[f"substrate:{k}" for k in keys]]


@dataclass(frozen=True)
class PairedCalls:
    """Per grid row, the multiplex calls of the primary series that observers answered
    too (the same correlation id): how many, and the sums over them of the primary's
    outcome `p`, the observers' mean outcome `o` (and `oo` of its square) and of their
    difference `d` = p - o (and `dd`). A call's row is its primary event's bucket."""

    n: np.ndarray
    p: np.ndarray
    o: np.ndarray
    oo: np.ndarray
    d: np.ndarray
    dd: np.ndarray
    pp: np.ndarray

    @staticmethod
    def unit_variance(n: np.ndarray, y: np.ndarray, yy: np.ndarray) -> float:
        """Pooled within-row variance per call of an outcome from its sums."""
        rows = n > 1
        dof = float(np.sum(n[rows] - 1.0))
        ss = float(np.sum(yy[rows] - y[rows] ** 2 / n[rows]))
        return max(ss / dof, 1e-9) if dof > 0 else 0.25


def fetch_paired_calls(
    store: Store, query: SeriesQuery, dimension_id: str, binary: bool
) -> PairedCalls:
    """The primary series' calls paired with their observers (`PairedCalls`), per
    bucket of the grid, aggregated in ClickHouse: calls first (one row per correlation
    id and side), then buckets."""
    value = "toFloat64(passed)" if binary else "score"
    outcome = "passed IS NOT NULL" if binary else "score IS NOT NULL"
    primary = query if query.role == "primary" else replace(query, role="primary")
    sql = f"""
        SELECT bucket_start, count() AS calls, sum(p), sum(o), sum(o * o), sum(p - o),
               sum((p - o) * (p - o)), sum(p * p)
        FROM (
            SELECT tenant_id, correlation_id, min({BUCKET_SQL[query.bucket]}) AS bucket_start,
                   avg({value}) AS p
            FROM holonograph.evaluation_dimensions FINAL
            WHERE {SERIES_FILTER} {SELECTION_FILTER}
              AND dimension_id = {{dimension:String}} AND {outcome} AND correlation_id != ''
            GROUP BY tenant_id, correlation_id
        ) AS primaries
        INNER JOIN (
            SELECT tenant_id, correlation_id, avg({value}) AS o
            FROM holonograph.evaluation_dimensions FINAL
            WHERE {SERIES_FILTER}
              AND dimension_id = {{dimension:String}} AND {outcome} AND correlation_id != ''
              AND (tenant_id, event_id) IN (
                  SELECT tenant_id, event_id FROM {EVALUATION_EVENTS.qualified} FINAL
                  WHERE {_WINDOW} AND multiplex_role = 'observer')
            GROUP BY tenant_id, correlation_id
        ) AS observers USING (tenant_id, correlation_id)
        GROUP BY bucket_start ORDER BY bucket_start
    """
    grid = bucket_grid(query.since, query.until, query.bucket)
    position = {b: i for i, b in enumerate(grid)}
    sums = np.zeros((7, len(grid)))
    for bucket, *values in store.query(sql, primary.params() | {"dimension": dimension_id}).rows:
        if bucket in position:
            sums[:, position[bucket]] += np.array(values, dtype=np.float64)
    n, p, o, oo, d, dd, pp = sums
    return PairedCalls(n, p, o, oo, d, dd, pp)
