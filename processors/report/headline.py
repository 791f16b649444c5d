"""The report's headline: one sentence saying what changed and what is wrong, read from
the sections the report gathered (never from anything else), worst first."""

from __future__ import annotations

from processors.report.gather import ChangeMark, ReportData
from schemas.times import rfc3339


def headline(data: ReportData) -> str:
    """`On classify-intent, correctness fell by 0.260 at 2026-06-01T12:00:00Z, after a
    change of light source (the model that served the calls); 1 stream lost 31 events
    in the window; 4 spans were rejected, most of them for 'unknown run mode'.` Or,
    when nothing is wrong, a sentence saying that about what was read. Plain words a
    newcomer reads without the Guide: counts agree with their nouns, surface names keep
    their case."""
    clauses = [_changed(data), _lost(data), _rejected(data), _stale(data)]
    said = [c for c in clauses if c]
    if not said:
        if not data.surfaces:
            return "No evaluation events in the window."
        return (
            f"Nothing changed and nothing is wrong on {_n(len(data.surfaces), 'surface')}:"
            " no attributed change point, no delivery loss, no rejected spans."
        )
    text = "; ".join(said)
    return text[0].upper() + text[1:] + "."


# What each attributed layer is, for a reader who has not met the words yet.
_SOURCES = {
    "light source": "a change of light source (the model that served the calls)",
    "lens": "a change of lens (the evaluation configuration)",
    "substrate": "a change of substrate (the deployment state)",
}


def _n(count: int, noun: str, plural: str | None = None) -> str:
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def _changed(data: ReportData) -> str:
    points = [
        (section.surface_id, m)
        for section in data.surfaces
        for m in section.marks
        if m.kind == "change_point" and m.confident and m.source != "noise"
    ]
    if not points:
        return ""
    surface_id, top = max(points, key=lambda p: abs(p[1].effect or 0.0))
    more = f" (and {_n(len(points) - 1, 'more change point')})" if len(points) > 1 else ""
    return f"on {surface_id}, {_moved(top)}{more}"


def _moved(mark: ChangeMark) -> str:
    if mark.effect is None or mark.effect == 0:
        moved = "changed"
    else:
        moved = f"{'rose' if mark.effect > 0 else 'fell'} by {abs(mark.effect):.3f}"
    cause = _SOURCES.get(mark.source, f"a change of {mark.source}")
    return f"{mark.dimension_id} {moved} at {rfc3339(mark.at)}, after {cause}"


def _lost(data: ReportData) -> str:
    report = data.completeness
    t = report.totals
    parts = []
    lost = t.missing_in_range if t.missing_in_range is not None else t.missing
    if lost:
        lossy = sum(1 for n in (report.missing_in_range or {}).values() if n) or sum(
            1 for s in report.streams if s.missing
        )
        parts.append(f"{_n(lossy, 'stream')} lost {_n(lost, 'event')} in the window")
    dead = t.by_status.get("dead", 0)
    if dead:
        parts.append(f"{_n(dead, 'stream')} went silent without closing (dead)")
    rejected = t.by_status.get("all-quarantined", 0)
    if rejected:
        parts.append(f"{_n(rejected, 'stream')} had every evaluation rejected (all-quarantined)")
    return ", ".join(parts)


def _rejected(data: ReportData) -> str:
    q = data.rejections
    if not q.total:
        return ""
    top = max(q.reasons, key=lambda c: c.spans, default=None)
    why = f", most of them for {top.reason!r}" if top is not None else ""
    return f"{_n(q.total, 'span')} {'was' if q.total == 1 else 'were'} rejected{why}"


def _stale(data: ReportData) -> str:
    stale = [s for s in data.surfaces if s.drift_run is not None and s.drift_run.stale]
    if not stale:
        return ""
    names = ", ".join(s.surface_id for s in stale)
    return (
        f"the latest drift run of {names} is older than some events of the window"
        " (run `holonograph drift` again)"
    )
