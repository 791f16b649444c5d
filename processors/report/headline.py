"""The report's headline: one sentence saying what changed and what is wrong, read from
the sections the report gathered (never from anything else), worst first."""

from __future__ import annotations

from processors.report.gather import ChangeMark, ReportData
from schemas.times import rfc3339


def headline(data: ReportData) -> str:
    """`classify-intent correctness moved -0.260 at 2026-06-01T12:00:00Z (light source);
    1 stream lost 31 events in the window; 4 spans were rejected.` Or, when nothing is
    wrong, a sentence saying that about what was read."""
    clauses = [_changed(data), _lost(data), _rejected(data), _stale(data)]
    said = [c for c in clauses if c]
    if not said:
        if not data.surfaces:
            return "No evaluation events in the window."
        return (
            f"Nothing changed and nothing is wrong on {len(data.surfaces)} surface(s):"
            " no attributed change point, no delivery loss, no rejected spans."
        )
    text = "; ".join(said)
    return text[0].upper() + text[1:] + "."


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
    more = f" (and {len(points) - 1} more change point(s))" if len(points) > 1 else ""
    return f"{surface_id} {_moved(top)}{more}"


def _moved(mark: ChangeMark) -> str:
    effect = "" if mark.effect is None else f" {mark.effect:+.3f}"
    return f"{mark.dimension_id} moved{effect} at {rfc3339(mark.at)} ({mark.source})"


def _lost(data: ReportData) -> str:
    report = data.completeness
    t = report.totals
    bad = {s: n for s, n in t.by_status.items() if s in ("dead", "all-quarantined")}
    parts = []
    lost = t.missing_in_range if t.missing_in_range is not None else t.missing
    if lost:
        lossy = sum(1 for n in (report.missing_in_range or {}).values() if n) or sum(
            1 for s in report.streams if s.missing
        )
        parts.append(f"{lossy} stream(s) lost {lost} event(s) in the window")
    parts += [f"{n} stream(s) {state}" for state, n in sorted(bad.items())]
    return ", ".join(parts)


def _rejected(data: ReportData) -> str:
    q = data.rejections
    if not q.total:
        return ""
    top = max(q.reasons, key=lambda c: c.spans, default=None)
    why = f", most for {top.reason!r}" if top is not None else ""
    return f"{q.total} span(s) were rejected{why}"


def _stale(data: ReportData) -> str:
    stale = [s for s in data.surfaces if s.drift_run is not None and s.drift_run.stale]
    if not stale:
        return ""
    names = ", ".join(s.surface_id for s in stale)
    return f"the latest drift run of {names} predates events of the window (rerun drift)"
