"""`holonograph completeness`: which streams lost events, which seqs, and which
surface buckets are therefore biased. Computed live from the stored receipts
(read-only, so it works while `serve` holds the store); `--refresh` also rewrites
the `stream_status` and `completeness_windows` tables."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import click

from holonograph.cli.jobs import (
    Rendering,
    job_limit_options,
    request_from,
    request_option,
    run_command,
)
from holonograph.cli.options import format_table, store_options
from holonograph.cli.tenants import tenant_option
from processors.completeness.job import JOB, Report, Request
from schemas import jsoncodec
from schemas.completeness import CompletenessReport, GapRange, StreamAccounting
from schemas.times import from_store_time


def format_gaps(gaps: Sequence[GapRange], limit: int = 4) -> str:
    """`3-5, 9, 12-14 (+7 more)`: the first ranges of a stream's missing seqs."""
    shown = [
        str(g.seq_from) if g.seq_from == g.seq_to else f"{g.seq_from}-{g.seq_to}"
        for g in gaps[:limit]
    ]
    extra = f" (+{len(gaps) - limit} more)" if len(gaps) > limit else ""
    return ", ".join(shown) + extra


def _stream_row(s: StreamAccounting) -> list[object]:
    loss = s.loss
    reported = f"{loss.reported_dropped}" if loss.reported_windows else "-"
    after = f"{loss.lost_after_client}{' !' if loss.mismatch else ''}"
    return [
        s.stream,
        s.status,
        s.expected,
        s.delivered,
        s.missing,
        s.duplicates,
        s.last_seen_at,
        reported,
        after if loss.reported_windows else "-",
        format_gaps(s.missing_ranges),
    ]


def _range_text(report: CompletenessReport) -> str:
    since = jsoncodec.plain(report.since) if report.since else "the beginning"
    until = jsoncodec.plain(report.until) if report.until else "now"
    return f"[{since}, {until})"


def render_text(report: CompletenessReport, limit: int) -> str:
    t = report.totals
    states = ", ".join(f"{n} {state}" for state, n in sorted(t.by_status.items()))
    lines = [
        f"{t.streams} stream(s) ({states or 'none'}): expected {t.expected}, "
        f"delivered {t.delivered}, missing {t.missing}, duplicates {t.duplicates}",
        "",
    ]
    if t.missing_in_range is not None:
        lines.insert(1, f"missing in {_range_text(report)}: {t.missing_in_range}")
    shown = report.streams[:limit] if limit else report.streams
    columns = [
        "stream",
        "status",
        "expected",
        "delivered",
        "missing",
        "dups",
        "last seen",
        "client dropped",
        "lost after client",
        "missing seqs",
    ]
    rows = [_stream_row(s) for s in shown]
    if report.missing_in_range is not None:
        columns.insert(5, "in range")
        for row, s in zip(rows, shown, strict=True):
            row.insert(5, report.missing_in_range.get(s.stream, 0))
    lines.append(format_table(columns, rows))
    if len(shown) < len(report.streams):
        lines.append(f"... {len(report.streams) - len(shown)} more (--limit 0 or --json)")
    biased = [w for w in report.windows if w.scope == "surface" and w.bias_flag]
    lines += ["", f"Biased surface windows ({report.bucket}): {t.biased_surface_windows}"]
    if biased:
        rows = [
            [
                w.surface_id,
                w.bucket_start,
                w.offered,
                w.delivered,
                w.missing,
                f"{w.completeness_lower_bound:.3f}",
                f"{w.lossy_streams}/{w.streams}",
            ]
            for w in (biased[:limit] if limit else biased)
        ]
        cols = [
            "surface",
            "bucket start",
            "offered",
            "delivered",
            "missing",
            "lower bound",
            "lossy",
        ]
        lines.append(format_table(cols, rows))
        if limit and len(biased) > limit:
            lines.append(f"... {len(biased) - limit} more (--limit 0 or --json)")
    return "\n".join(lines)


def without_ordinals_text(report: CompletenessReport, limit: int) -> str:
    """The surfaces whose completeness is unknown (events without emission ordinals)."""
    surfaces = report.surfaces_without_ordinals
    if not surfaces:
        return ""
    shown = surfaces[:limit] if limit else surfaces
    rows = [
        [s.surface_id, s.status, s.events, s.without_ordinals, f"{s.share_without_ordinals:.1%}"]
        for s in shown
    ]
    lines = [
        f"Surfaces whose delivery loss cannot be measured: {len(surfaces)}",
        format_table(["surface", "completeness", "events", "without ordinals", "share"], rows),
    ]
    if len(shown) < len(surfaces):
        lines.append(f"... {len(surfaces) - len(shown)} more (--limit 0 or --json)")
    return "\n".join(lines)


def refreshed_line(report: CompletenessReport) -> str:
    return f"tables stream_status, completeness_windows refreshed {_when(report)}"


def _when(report: CompletenessReport) -> str:
    if report.tables_refreshed_at is None:
        return "never"
    age = int((report.as_of - from_store_time(report.tables_refreshed_at)).total_seconds())
    ago = f"{age // 3600}h {age % 3600 // 60}m" if age >= 3600 else f"{age // 60}m {age % 60}s"
    return f"{jsoncodec.plain(report.tables_refreshed_at)} ({ago} ago)"


def stale_warning(report: CompletenessReport, refresh_seconds: float) -> str:
    """Why dashboards and drift may be reading old numbers, and where to look."""
    if report.tables_refreshed_at is None:
        return (
            "tables stream_status, completeness_windows were never refreshed (this report"
            " is live): `holonograph serve`/`sink` refresh them while running,"
            " `--refresh` does it now"
        )
    return (
        f"tables stream_status, completeness_windows refreshed {_when(report)}, not within"
        f" two refresh periods ({2 * refresh_seconds:g}s): dashboards and drift read stale"
        " numbers (this report is live); is `holonograph serve`/`sink` running? its"
        " /readyz says why a refresh fails; `--refresh` rewrites them now"
    )


def _text(limit: int) -> Callable[[Report], str]:
    def text(run: Report) -> str:
        report = run.completeness
        body = (
            render_text(report, limit) if report.streams else "no emission streams in the selection"
        )
        unknown = without_ordinals_text(report, limit)
        if unknown:
            body = f"{body}\n\n{unknown}"
        if report.retention is not None:
            body = f"{body}\n\n{report.retention.line()}"
        return body if report.tables_stale else f"{body}\n\n{refreshed_line(report)}"

    return text


def _notes(run: Report) -> list[str]:
    notes = []
    if run.refreshed is not None:
        summary = run.refreshed
        notes.append(f"refreshed {summary.streams} stream(s) in {summary.duration_ms:.0f} ms")
    if run.completeness.tables_stale:
        notes.append(f"warning: {stale_warning(run.completeness, run.refresh_interval_seconds)}")
    return notes


@click.command("completeness")
@request_option(Request, "since", "--since")
@request_option(Request, "until", "--until")
@request_option(Request, "stream", "--stream")
@request_option(Request, "surface_id", "--surface")
@request_option(Request, "bucket", "--bucket")
@request_option(Request, "as_of", "--as-of")
@request_option(Request, "sentinel_interval_ms", "--sentinel-interval-ms")
@request_option(Request, "dead_after", "--dead-after")
@click.option("--limit", type=click.IntRange(min=0), default=20, show_default=True)
@request_option(Request, "refresh", "--refresh")
@request_option(
    Request,
    "refresh_interval_seconds",
    "--refresh-interval",
    envvar="HOLONOGRAPH_STATUS_REFRESH_SECONDS",
)
@tenant_option
@job_limit_options
@store_options
def completeness_command(
    limit: int,
    tenant: str | None,
    store_url: str | None,
    data_dir: str | None,
    as_json: bool,
    **flags: Any,
) -> None:
    """Per-stream delivery accounting (lossy and dead first) and biased windows;
    surfaces with events that arrived without emission ordinals (OpenTelemetry GenAI
    evaluations) are listed as `unknown: no emission ordinals`, with their share.

    Exit 0: nothing lost; 1: loss, a dead stream, or reported drops exceeding the
    observed gaps; 2: usage; 3: store unavailable."""
    request = request_from(Request, {**flags, "tenant": tenant})
    rendering = Rendering(_text(limit), _notes)
    run_command(
        JOB,
        request,
        rendering,
        store_url=store_url,
        data_dir=data_dir,
        as_json=as_json,
        own_statements=True,  # the job's statements are its own: its reader skips the gate
    )


def register(group: click.Group) -> None:
    group.add_command(completeness_command)
