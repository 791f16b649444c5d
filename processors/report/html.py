"""The report as one self-contained HTML page: inline CSS, figures as inline SVG, no
script, no font, no link or image that would make a request, so it opens offline in
any browser. Every number a script may check carries `data-metric` (its place in the
`compare --json` / `completeness --json` answer) and is printed with the precision
`fmt` gives."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from html import escape

from processors.conformance.record import summary
from processors.report.gather import (
    ChangeMark,
    HourPoint,
    LessonsState,
    ReportData,
    SurfaceSection,
    Verdict,
)
from processors.report.headline import headline
from schemas.analysis import Interval
from schemas.changes import ChangeEvent
from schemas.compare import CompareReport
from schemas.completeness import CompletenessReport
from schemas.times import rfc3339

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px auto;
       max-width: 1100px; color: #1d2330; background: #fff; padding: 0 16px; }
h1 { font-size: 24px; margin-bottom: 4px; }
h2 { margin-top: 32px; border-bottom: 2px solid #dde3ee; }
h3 { margin-top: 20px; } .muted { color: #5b6475; }
.headline { font-size: 17px; font-weight: 600; }
table { border-collapse: collapse; margin: 8px 0 16px; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #dde3ee; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f2f5fa; } td.num { text-align: right; }
.sig { background: #fff1d6; font-weight: 600; } .bad { color: #b3261e; font-weight: 600; }
.cards { display: flex; gap: 12px; flex-wrap: wrap; }
.card { border: 1px solid #dde3ee; border-radius: 6px; padding: 8px 14px; min-width: 120px; }
.card b { display: block; font-size: 22px; } svg { background: #fbfcfe; border: 1px solid #dde3ee; }
"""


def fmt(value: float | int | None, digits: int = 3) -> str:
    """How every number is printed (and checked): fixed digits, '-' for none."""
    if value is None:
        return "-"
    if isinstance(value, int):  # bool included
        return str(int(value))
    return f"{value:.{digits}f}"


def fmt_interval(value: Interval | None) -> str:
    if value is None:
        return "-"
    return f"{fmt(value.estimate)} [{fmt(value.ci_low)}, {fmt(value.ci_high)}]"


def fmt_p(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _cell(text: str, metric: str | None = None, cls: str = "num") -> str:
    attr = f' data-metric="{escape(metric)}"' if metric else ""
    return f'<td class="{cls}"{attr}>{escape(text)}</td>'


def _table(head: list[str], rows: list[str]) -> str:
    header = "".join(f"<th>{escape(h)}</th>" for h in head)
    return f"<table><thead><tr>{header}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def render(data: ReportData) -> str:
    r = data.request
    tenant = r.tenant_id or "every tenant"
    scope = r.surface_id or f"{len(data.surfaces)} surface(s)"
    body = [
        "<h1>Holonograph report</h1>",
        f'<p class="headline" data-metric="headline">{escape(headline(data))}</p>',
        f'<p class="muted">{escape(rfc3339(r.since))} to {escape(rfc3339(r.until))} · '
        f"{escape(tenant)} · {escape(scope)} · provenance"
        f" {escape(', '.join(r.provenances) or 'any')}"
        f" · stream status as of {escape(rfc3339(data.generated_at))}</p>",
        _health(data.completeness),
        _rejections(data),
        _harness(data),
    ]
    for section in data.surfaces:
        body.append(_surface(data, section))
    if not data.surfaces:
        body.append("<p>No evaluation events in the window.</p>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # Nothing on this page may load anything: no script, no remote or local request.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">"
        f"<title>Holonograph report {escape(rfc3339(r.since))}</title><style>{_CSS}</style>"
        f"</head><body>{''.join(body)}</body></html>\n"
    )


def _health(report: CompletenessReport) -> str:
    t = report.totals
    cards = [  # (label, the JSON key under completeness.totals, value)
        ("Streams", "streams", t.streams),
        ("Expected", "expected", t.expected),
        ("Delivered", "delivered", t.delivered),
        ("Missing (streams' lifetime)", "missing", t.missing),
        ("Missing in range", "missingInRange", t.missing_in_range),
        ("Duplicates", "duplicates", t.duplicates),
        (f"Biased surface windows ({report.bucket})", "biasedSurfaceWindows",
         t.biased_surface_windows),
    ]  # fmt: skip
    html = ['<h2 id="health">Stream health</h2><div class="cards">']
    for label, key, value in cards:
        html.append(
            f'<div class="card">{escape(label)}'
            f'<b data-metric="completeness/totals/{key}">{escape(fmt(value))}</b></div>'
        )
    for status, n in sorted(t.by_status.items()):
        html.append(
            f'<div class="card">Streams {escape(status)}'
            f'<b data-metric="completeness/totals/byStatus/{escape(status)}">{n}</b></div>'
        )
    html.append("</div>")
    rows = []
    for s in report.streams[:25]:
        key = f"completeness/streams/{s.stream}"
        status_cls = "bad" if s.status in ("dead", "closed-lossy") else ""
        rows.append(
            "<tr>"
            + _cell(s.stream, cls="")
            + f'<td class="{status_cls}" data-metric="{escape(key)}/status">{escape(s.status)}</td>'
            + _cell(fmt(s.expected), f"{key}/expected")
            + _cell(fmt(s.delivered), f"{key}/delivered")
            + _cell(fmt(s.missing), f"{key}/missing")
            + _cell(fmt(s.duplicates), f"{key}/duplicates")
            + _cell(rfc3339(s.last_seen_at) if s.last_seen_at else "-", cls="")
            + "</tr>"
        )
    if rows:
        more = len(report.streams) - len(rows)
        html.append(
            _table(
                ["stream", "status", "expected", "delivered", "missing", "duplicates", "last seen"],
                rows,
            )
        )
        if more > 0:
            html.append(f'<p class="muted">{more} more stream(s): holonograph completeness</p>')
    return "".join(html)


def _rejections(data: ReportData) -> str:
    q = data.rejections
    html = [
        '<h2 id="rejections">Rejected spans</h2>',
        f'<p><b data-metric="quarantine/total">{q.total}</b> span(s) rejected in the window.</p>',
    ]
    if q.reasons:
        rows = [
            "<tr>" + _cell(c.reason, cls="") + _cell(str(c.spans), f"quarantine/reasons/{c.reason}")
            + _cell(rfc3339(c.last_received_at), cls="") + "</tr>"
            for c in q.reasons
        ]  # fmt: skip
        html.append(_table(["reason", "spans", "last"], rows))
    return "".join(html)


def _harness(data: ReportData) -> str:
    """The latest harness conformance run of each suite, and its failing cells."""
    if not data.harness:
        return ""
    html = ['<h2 id="harness">Harness conformance</h2>']
    rows = []
    for run in data.harness:
        key = f"harness/{run.suite_id}"
        counts = summary(run.cells)
        failing = "; ".join(
            f"{c.combination_id} x {c.scenario_id}"
            + (f" ({', '.join(sorted(c.failure_classes))})" if c.failure_classes else "")
            + (" (regressed)" if c.regressions else "")
            for c in run.cells
            if c.status == "failed"
        )
        rows.append(
            "<tr>" + _cell(f"{run.suite_id} r{run.suite_revision}", cls="")
            + _cell(run.status, f"{key}/status", cls="") + _cell(rfc3339(run.ran_at), cls="")
            + _cell(str(counts["passed"]), f"{key}/passed")
            + _cell(str(counts["failed"]), f"{key}/failed")
            + _cell(str(counts["skipped"]), f"{key}/skipped") + _cell(failing or "-", cls="")
            + "</tr>"
        )  # fmt: skip
    head = ["suite", "status", "ran", "cells passed", "failed", "skipped", "failing cells"]
    html.append(_table(head, rows))
    return "".join(html)


def _selection(section: SurfaceSection) -> str:
    """Which events the pass rates took, on a multiplexed surface (or on request)."""
    read = section.selection
    if read is None or not (read.multiplexed or read.role != "primary" or read.light_source):
        return ""
    source = f" of {read.light_source}" if read.light_source else ""
    observers = ", ".join(read.observers) or "none"
    key = f"series/{section.surface_id}"
    return (
        f'<p class="muted">Pass rates of the <b data-metric="{escape(key)}/role">'
        f"{escape(read.role)}</b> series{escape(source)}: "
        f'<span data-metric="{escape(key)}/events">{read.events}</span> events,'
        f' <span data-metric="{escape(key)}/leftOut">{read.left_out}</span> other events'
        f" of the multiplexed surface left out (observers: {escape(observers)}).</p>"
    )


def _drift_run_line(section: SurfaceSection) -> str:
    run = section.drift_run
    if run is None:
        return ""
    key = f"drift/{section.surface_id}/stale"
    if not run.stale:
        return f'<p class="muted">Run {escape(run.run_id)} at {escape(rfc3339(run.run_at))}.</p>'
    arrived = rfc3339(run.newest_arrival) if run.newest_arrival else "-"
    return (
        f'<p class="bad" data-metric="{escape(key)}">Stale: run {escape(run.run_id)} at'
        f" {escape(rfc3339(run.run_at))}, {run.behind_seconds:g}s before the newest event of"
        f" the window arrived ({escape(arrived)}); rerun holonograph drift.</p>"
    )


def _reading_window(verdict: Verdict) -> str:
    if verdict.since is None or verdict.until is None:
        return "-"
    return f"{rfc3339(verdict.since)} to {rfc3339(verdict.until)}"


def _surface(data: ReportData, section: SurfaceSection) -> str:
    sid = section.surface_id
    html = [f'<h2 id="surface-{escape(sid)}">Surface {escape(sid)}</h2>']
    html.append(_selection(section))
    for dimension_id, points in section.series.items():
        marks = [m for m in section.marks if m.dimension_id == dimension_id]
        html.append(f"<h3>{escape(dimension_id)}: pass rate and completeness lower bound</h3>")
        html.append(_chart(data, points, marks, section.changes))
    html.append(_changes(section.changes))
    changes = [m for m in section.marks if m.kind == "change_point"]
    brackets = [m for m in section.marks if m.kind != "change_point"]
    html.append("<h3>Change points (latest drift run)</h3>")
    html.append(_drift_run_line(section))
    if changes:
        rows = [
            "<tr>" + _cell(rfc3339(m.at), cls="") + _cell(m.dimension_id, cls="")
            + _cell(m.source + ("" if m.confident else " (not confident)"), cls="")
            + _cell(fmt(m.effect)) + _cell(m.reason, cls="") + "</tr>"
            for m in changes
        ]  # fmt: skip
        html.append(_table(["time", "dimension", "source", "effect", "why"], rows))
    else:
        html.append('<p class="muted">None stored for the window (holonograph drift).</p>')
    if brackets:
        rows = [
            "<tr>" + _cell(rfc3339(m.at), cls="") + _cell(rfc3339(m.until), cls="")
            + _cell(m.dimension_id, cls="") + _cell(m.reason, cls="") + "</tr>"
            for m in brackets
        ]  # fmt: skip
        html.append("<h3>Bracketed windows</h3>")
        html.append(_table(["from", "to", "dimension", "reason"], rows))
    html.append("<h3>Variance verdicts</h3>")
    if section.verdicts:
        rows = [
            "<tr>" + _cell(v.dimension_id, cls="")
            + _cell(v.verdict, f"variance/{sid}/{v.dimension_id}", cls="")
            + _cell(_reading_window(v), cls="") + _cell(rfc3339(v.created_at), cls="") + "</tr>"
            for v in section.verdicts
        ]  # fmt: skip
        html.append(_table(["dimension", "verdict", "reading's window", "evaluated"], rows))
    else:
        html.append('<p class="muted">No verdict stored (holonograph variance evaluate).</p>')
    if section.comparison is not None:
        html.append(_comparison(section.comparison))
    if section.lessons is not None:
        html.append(_lessons(sid, section.lessons))
    return "".join(html)


def _lessons(sid: str, state: LessonsState) -> str:
    counts = [
        ("overrides", "overrides received", state.overrides),
        ("openClusters", "open clusters", state.open_clusters),
        ("draftsAtGate", "drafts waiting at the gate", state.drafts_at_gate),
        ("approvedUnpublished", "approved, not yet published", state.approved_unpublished),
    ]
    items = "".join(
        f'<li><b data-metric="lessons/{escape(sid)}/{key}">{n}</b> {label}</li>'
        for key, label, n in counts
    )
    html = ["<h3>Lessons (holonograph lessons)</h3>", f"<ul>{items}</ul>"]
    if state.published:
        rows = [
            "<tr>" + _cell(p.artifact_id, f"lessons/{sid}/published/{p.artifact_id}", cls="")
            + _cell(str(p.version)) + _cell(p.kind, cls="")
            + _cell(rfc3339(p.published_at), cls="") + "</tr>"
            for p in state.published
        ]  # fmt: skip
        html.append(_table(["artifact", "version", "kind", "published"], rows))
    else:
        html.append('<p class="muted">Nothing published in the window.</p>')
    return "".join(html)


def _changes(changes: list[ChangeEvent]) -> str:
    """The change events of the surface in the window (holonograph changes)."""
    html = ["<h3>Recorded changes</h3>"]
    if not changes:
        html.append('<p class="muted">None recorded (holonograph change record).</p>')
        return "".join(html)
    rows = [
        f'<tr data-change="{escape(c.change_id)}">' + _cell(rfc3339(c.at), cls="")
        + _cell(rfc3339(c.ends_at) if c.ends_at else "-", cls="") + _cell(c.kind, cls="")
        + _cell(c.layer or "-", cls="") + _cell(c.artifact_version or c.artifact_id or "-", cls="")
        + _cell(c.actor or "-", cls="") + _cell(c.description, cls="") + "</tr>"
        for c in changes
    ]  # fmt: skip
    html.append(_table(["at", "until", "kind", "layer", "version", "actor", "what"], rows))
    return "".join(html)


def _annotations(changes: Sequence[ChangeEvent], x: Callable[[dt.datetime], float]) -> list[str]:
    """Recorded changes on the timeline: a dashed grey line labelled by kind at each
    change, an availability interval as a hatched region (open ones to the window's end)."""
    out = []
    top, bottom = _PAD_T, _H - _PAD_B
    for c in changes:
        title = f"<title>{escape(c.kind)} {escape(rfc3339(c.at))}: {escape(c.description)}</title>"
        if c.ends_at is not None:
            width = max(x(c.ends_at) - x(c.at), 1)
            out.append(
                f'<rect data-change="{escape(c.change_id)}" x="{x(c.at):.1f}" y="{top}"'
                f' width="{width:.1f}" height="{bottom - top}" fill="#8f3bb8"'
                f' fill-opacity="0.12">{title}</rect>'
            )
            continue
        out.append(
            f'<g data-change="{escape(c.change_id)}"><line x1="{x(c.at):.1f}" x2="{x(c.at):.1f}"'
            f' y1="{top}" y2="{bottom}" stroke="#5b6475" stroke-width="1.5"'
            f' stroke-dasharray="3 3"/><text x="{x(c.at) + 4:.1f}" y="{bottom - 4}"'
            f' font-size="11" fill="#5b6475">{escape(c.kind)}</text>{title}</g>'
        )
    return out


def _comparison(report: CompareReport) -> str:
    sid = report.surface_id
    html = [
        f"<h3>Vendors head to head (by {escape(report.parameters.by)})</h3>",
        f'<p class="muted">{report.events} events, {report.multiplex_calls} multiplex calls,'
        f" usual primary {escape(report.usual_primary or '-')}. Intervals at 95%; a missing"
        " outcome is counted as missing, never as a failure.</p>",
    ]
    rows = []
    for g in report.groups:
        key = f"compare/{sid}/groups/{g.group}"
        for d in g.dimensions:
            value = d.pass_rate if d.kind == "pass-fail" else d.mean
            rows.append(
                "<tr>" + _cell(g.group, cls="") + _cell(str(g.events), f"{key}/events")
                + _cell(d.dimension_id, cls="")
                + _cell(fmt_interval(value), f"{key}/{d.dimension_id}/"
                        + ("passRate" if d.kind == "pass-fail" else "mean"))
                + _cell(str(d.missing), f"{key}/{d.dimension_id}/missing")
                + _cell(fmt(g.latency_ms.p50, 1), f"{key}/latencyMs/p50")
                + _cell(fmt(g.latency_ms.p95, 1), f"{key}/latencyMs/p95")
                + _cell(fmt(g.cost_per_evaluation_usd, 6), f"{key}/costPerEvaluationUsd")
                + _cell(fmt(g.tokens_per_evaluation, 1), f"{key}/tokensPerEvaluation")
                + _cell(f"{g.as_primary}/{g.fallbacks}", cls="")
                + "</tr>"
            )  # fmt: skip
    html.append(
        _table(
            ["group", "events", "dimension", "pass rate | mean [95%]", "missing", "p50 ms",
             "p95 ms", "cost/eval $", "tokens/eval", "primary/fallback"],
            rows,
        )
    )  # fmt: skip
    if report.paired:
        rows = []
        for p in report.paired:
            key = f"compare/{sid}/paired/{p.dimension_id}/{p.primary}/{p.observer}"
            rows.append(
                f'<tr class="{"sig" if p.significant else ""}">'
                + _cell(p.dimension_id, cls="") + _cell(p.observer, cls="")
                + _cell(p.primary, cls="") + _cell(str(p.paired), f"{key}/paired")
                + _cell(str(p.improved), f"{key}/improved")
                + _cell(str(p.regressed), f"{key}/regressed")
                + _cell(str(p.equal), f"{key}/equal")
                + _cell(str(p.missing.observer), f"{key}/missing/observer")
                + _cell(str(p.missing.primary), f"{key}/missing/primary")
                + _cell(fmt_interval(p.difference), f"{key}/difference")
                + _cell(fmt_p(p.p_value), f"{key}/pValue")
                + _cell(fmt_p(p.adjusted_p_value), f"{key}/adjustedPValue")
                + "</tr>"
            )  # fmt: skip
        html.append("<p>Paired on the same calls (observer minus primary):</p>")
        html.append(
            _table(
                ["dimension", "observer", "primary", "paired", "better", "worse", "equal",
                 "missing (observer)", "missing (primary)", "difference [95%]", "p",
                 "adjusted p"],
                rows,
            )
        )  # fmt: skip
    for note in report.notes:
        html.append(f'<p class="muted">note: {escape(note)}</p>')
    return "".join(html)


_W, _H, _PAD_L, _PAD_R, _PAD_T, _PAD_B = 960, 240, 44, 12, 14, 28


def _chart(
    data: ReportData,
    points: list[HourPoint],
    marks: list[ChangeMark],
    changes: Sequence[ChangeEvent] = (),
) -> str:
    """Pass rate (solid) and completeness lower bound (dashed) per hour, change points as
    red lines labelled by source, bracketed windows shaded, recorded changes as
    annotations (`_annotations`)."""
    since, until = data.request.since, data.request.until
    span = (until - since).total_seconds()

    def x(t: dt.datetime) -> float:
        offset = min(max((t - since).total_seconds(), 0.0), span)
        return _PAD_L + (_W - _PAD_L - _PAD_R) * offset / span

    def y(v: float) -> float:
        return _PAD_T + (_H - _PAD_T - _PAD_B) * (1.0 - v)

    half = dt.timedelta(minutes=30)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_W} {_H}" width="100%"'
        ' role="img" aria-label="pass rate over time">'
    ]
    for m in marks:
        if m.kind != "change_point":
            out.append(
                f'<rect x="{x(m.at):.1f}" y="{_PAD_T}" width="{max(x(m.until) - x(m.at), 1):.1f}"'
                f' height="{_H - _PAD_T - _PAD_B}" fill="#ff9830" fill-opacity="0.18">'
                f"<title>bracketed: {escape(m.reason)}</title></rect>"
            )
    for v in (0.0, 0.5, 1.0):
        out.append(
            f'<line x1="{_PAD_L}" x2="{_W - _PAD_R}" y1="{y(v):.1f}" y2="{y(v):.1f}"'
            ' stroke="#dde3ee"/>'
            f'<text x="{_PAD_L - 6}" y="{y(v) + 4:.1f}" font-size="11" text-anchor="end"'
            f' fill="#5b6475">{v:.1f}</text>'
        )
    out.append(
        f'<text x="{_PAD_L}" y="{_H - 8}" font-size="11" fill="#5b6475">'
        f"{escape(rfc3339(since))}</text>"
        f'<text x="{_W - _PAD_R}" y="{_H - 8}" font-size="11" text-anchor="end"'
        f' fill="#5b6475">{escape(rfc3339(until))}</text>'
    )
    out += _annotations(changes, x)
    bound = [p for p in points if p.completeness_lower_bound is not None]
    if bound:
        coords = " ".join(
            f"{x(p.hour + half):.1f},{y(p.completeness_lower_bound or 0.0):.1f}" for p in bound
        )
        out.append(
            f'<polyline points="{coords}" fill="none" stroke="#ff7f0e" stroke-width="2"'
            ' stroke-dasharray="6 4"/>'
        )
    coords = " ".join(f"{x(p.hour + half):.1f},{y(p.pass_rate):.1f}" for p in points)
    out.append(f'<polyline points="{coords}" fill="none" stroke="#1f60c4" stroke-width="2.5"/>')
    for p in points:
        out.append(
            f'<circle cx="{x(p.hour + half):.1f}" cy="{y(p.pass_rate):.1f}" r="3" fill="#1f60c4">'
            f"<title>{escape(rfc3339(p.hour))}: {fmt(p.pass_rate)} of {p.graded}"
            f" (completeness ≥ {fmt(p.completeness_lower_bound)})</title></circle>"
        )
    for m in marks:
        if m.kind == "change_point":
            out.append(
                f'<line x1="{x(m.at):.1f}" x2="{x(m.at):.1f}" y1="{_PAD_T}" y2="{_H - _PAD_B}"'
                ' stroke="#e02f44" stroke-width="2"/>'
                f'<text x="{x(m.at) + 4:.1f}" y="{_PAD_T + 12}" font-size="12" fill="#e02f44">'
                f"{escape(m.source)}</text>"
            )
    out.append(
        f'<text x="{_W - _PAD_R}" y="{_PAD_T + 12}" font-size="11" text-anchor="end"'
        ' fill="#1d2330">— pass rate   - - completeness lower bound</text></svg>'
    )
    return "".join(out)
