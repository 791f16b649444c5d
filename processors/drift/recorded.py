"""Recorded changes as evidence (docs/changes.md): the change events of a surface over
a drift run's window (`schemas.changelog`: its own, its agents' agent-wide ones, the
tenant-wide ones, availability marks of the light sources that served the series read:
on a multiplexed surface, one role's), which of them a change point's window holds, and
whether the shift starts at each.

The timing test of a change at time t against a change point:

1. *inside*: t's bucket (either bucket, when t falls inside one: the shift may show
   from the next), or one `TIMING_SLACK` bucket either side of it (a deploy takes
   minutes, clocks differ), is in the change point's 95% confidence set of times, the
   splits whose likelihood gain is within the bootstrap-calibrated threshold of the
   best;
2. *placebo*: of every time the change point's segment could have been split at (the
   placebo times a change recorded at random would fall on), the share fitting the
   shift at least as well as t (gain no lower): the chance that a change unrelated to
   the shift lands this close to it, read at t's own bucket. It must be at most
   `TIMING_LEVEL`.

Both, and the shift starts at the change. A change point's window cites the changes
in it and within `TIMING_SLACK` of it. A window wide enough to hold a change a week
away holds most placebo times as well, so such a change fails the second test; a
change a week away from a narrow window is not in it at all. An availability interval
is tested at its start (the drop) and its end (the recovery).
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from processors.series.cells import Series, SeriesQuery, series_light_sources
from processors.series.changepoint import ChangePoint as RawChangePoint
from schemas.analysis import BracketedWindow, ChangeEvidence, Timing
from schemas.changelog import (
    ChangeQuery,
    Unavailability,
    list_changes,
    surface_scope,
    unavailability,
)
from schemas.changes import AVAILABILITY, ChangeEvent
from schemas.migrations import table_exists
from schemas.store import Store
from schemas.tables import CHANGE_EVENTS
from schemas.times import to_store_time

TIMING_LEVEL = 0.05
TIMING_SLACK = 1  # buckets
Cite = Callable[[Series, RawChangePoint, dt.datetime, dt.datetime], list[ChangeEvidence]]


def no_citations(
    series: Series, raw: RawChangePoint, start: dt.datetime, end: dt.datetime
) -> list[ChangeEvidence]:
    return []


@dataclass(frozen=True)
class Recorded:
    """A surface's recorded changes in a run's window, and its availability intervals
    (marks before the window included: an outage may have begun earlier)."""

    changes: list[ChangeEvent]
    unavailable: list[Unavailability]

    def cite(
        self, series: Series, raw: RawChangePoint, start: dt.datetime, end: dt.datetime
    ) -> list[ChangeEvidence]:
        """The changes in [start, end) (naive UTC, as the grid) widened by
        `TIMING_SLACK` buckets, intervals overlapping it, each with its timing test, by
        time."""
        step = series.grid[1] - series.grid[0] if len(series.grid) > 1 else dt.timedelta(hours=1)
        start, end = start - TIMING_SLACK * step, end + TIMING_SLACK * step
        found = []
        for change in self.changes:
            if change.kind != AVAILABILITY and start <= to_store_time(change.at) < end:
                found.append(evidence(change, change.at, None, timing(series, raw, change.at)))
        for interval in self.unavailable:
            first, last = interval.start, interval.end
            if to_store_time(first) >= end or (last is not None and to_store_time(last) <= start):
                continue
            moments = [first] if last is None else [first, last]
            best = min((timing(series, raw, m) for m in moments), key=lambda t: t.p_value)
            found.append(evidence(interval.marks[0], first, last, best))
        return sorted(found, key=lambda e: e.at)


def fetch_recorded(store: Store, query: SeriesQuery) -> Recorded | None:
    """The surface's changes over the query's window; None when the store has no
    change events table (a server not migrated this far)."""
    if not table_exists(store, CHANGE_EVENTS):
        return None
    tenant, surface = query.tenant_id, query.surface_id
    scope = surface_scope(store, tenant, surface, query.since, query.until)
    # Marks of the light sources that served the series read: on a multiplexed surface
    # an observer's outage does not touch the primary's series.
    scope = dataclasses.replace(scope, light_sources=series_light_sources(store, query))
    changes = list_changes(store, ChangeQuery(tenant, query.since, query.until, surface), scope)
    marks = list_changes(
        store,
        ChangeQuery(tenant, until=query.until, surface_id=surface, kinds=(AVAILABILITY,)),
        scope,
    )
    return Recorded(
        [c for c in changes if c.kind != AVAILABILITY],
        [u for u in unavailability(marks) if u.end is None or u.end > query.since],
    )


def availability_brackets(recorded: Recorded, query: SeriesQuery) -> list[BracketedWindow]:
    """Each availability interval, clipped to the window, as a bracketed window."""
    out = []
    for interval in recorded.unavailable:
        since, until = to_store_time(query.since), to_store_time(query.until)
        start = max(to_store_time(interval.start), since)
        end = min(to_store_time(interval.end or query.until), until)
        if start >= end:
            continue
        why = f"{interval.subject} marked unavailable"
        if interval.end is None:
            why += " (not marked back)"
        if interval.reason:
            why += f": {interval.reason}"
        out.append(BracketedWindow.of(start, end, "availability", why))
    return out


def evidence(
    change: ChangeEvent, at: dt.datetime, ends_at: dt.datetime | None, result: Timing
) -> ChangeEvidence:
    shared = change.model_dump(include=set(ChangeEvidence.model_fields) - {"at", "ends_at"})
    return ChangeEvidence(**shared, layer=change.layer, at=at, ends_at=ends_at, timing=result)


def timing(series: Series, raw: RawChangePoint, moment: dt.datetime) -> Timing:
    """The timing test of a change at `moment` against the change point `raw` (both
    parts, see the module's docstring), on its best-fitting candidate bucket."""
    a, b = raw.segment
    profile = raw.profile
    placebos = profile[np.isfinite(profile)]
    if profile.size == 0 or placebos.size == 0:
        return Timing(moment=moment, inside=False, p_value=1.0, starts_here=False)
    own = _positions(series, moment)
    near = {p + d for p in own for d in range(-TIMING_SLACK, TIMING_SLACK + 1)}
    inside = any(raw.plausible(p) for p in near)
    gains = [float(profile[p - a]) for p in own if a < p < b and np.isfinite(profile[p - a])]
    if not gains:
        return Timing(moment=moment, inside=inside, p_value=1.0, starts_here=False)
    p_value = float(np.sum(placebos >= max(gains)) / placebos.size)
    return Timing(
        moment=moment,
        inside=bool(inside),
        p_value=p_value,
        starts_here=bool(inside and p_value <= TIMING_LEVEL),
    )


def _positions(series: Series, moment: dt.datetime) -> list[int]:
    """Series positions (buckets with outcomes) a change at `moment` would start the
    new level at: its own bucket's, and the next one's when it falls inside a bucket."""
    at = to_store_time(moment)
    row = bisect.bisect_right(series.grid, at) - 1
    rows = [row] if row >= 0 and series.grid[row] == at else [row, row + 1]
    index = series.index
    found = {int(np.searchsorted(index, r)) for r in rows if 0 <= r < len(series.grid)}
    return sorted(p for p in found if p < len(index))
