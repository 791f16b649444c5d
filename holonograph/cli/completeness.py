"""`holonograph completeness`: which streams lost events, which seqs, and which
surface buckets are therefore biased. Computed live from the stored receipts
(read-only, so it works while `serve` holds the store); `--refresh` also rewrites
the `stream_status` and `completeness_windows` tables."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Sequence
from typing import cast

import click

from holonograph.cli.options import (
    EXIT_FINDING,
    EXIT_UNAVAILABLE,
    RFC3339,
    emit_json,
    format_table,
    open_store_or_exit,
    store_options,
)
from holonograph.cli.tenants import tenant_option, tenant_or_exit
from processors.completeness.job import (
    CompletenessConfig,
    Selection,
    last_refresh,
    read_report,
    recompute_completeness,
)
from schemas import jsoncodec
from schemas.completeness import (
    BUCKETS,
    Bucket,
    CompletenessReport,
    GapRange,
    StreamAccounting,
)
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
    lines += ["", f"Biased surface windows ({report.bucket}): {len(biased)}"]
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


def with_refresh_age(
    report: CompletenessReport, refreshed_at: dt.datetime | None, refresh_seconds: float
) -> CompletenessReport:
    """The report with when its stored tables were refreshed, stale past two periods."""
    stale = refreshed_at is None or (
        report.as_of - from_store_time(refreshed_at)
    ).total_seconds() > (2 * refresh_seconds)
    return report.model_copy(update={"tables_refreshed_at": refreshed_at, "tables_stale": stale})


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


def is_finding(report: CompletenessReport) -> bool:
    """Loss, a dead stream or a client reporting more drops than gaps."""
    return any(s.missing or s.status == "dead" or s.loss.mismatch for s in report.streams)


@click.command("completeness")
@click.option("--since", type=RFC3339(), help="Streams with events at or after T (RFC 3339).")
@click.option("--until", type=RFC3339(), help="... and before T.")
@click.option("--stream", help="Only this emission stream.")
@click.option("--surface", help="Only streams that carried this surface, and its windows.")
@click.option("--bucket", type=click.Choice(BUCKETS), default="hour", show_default=True)
@click.option("--as-of", "as_of", type=RFC3339(), help="Evaluate status at T (default: now).")
@click.option(
    "--sentinel-interval-ms",
    type=click.IntRange(min=1),
    default=30_000,
    show_default=True,
    help="Interval assumed for streams that never reported one.",
)
@click.option(
    "--dead-after",
    type=click.FloatRange(min=0, min_open=True),
    default=3.0,
    show_default=True,
    help="A stream without final, silent this many intervals, is dead.",
)
@click.option("--limit", type=click.IntRange(min=0), default=20, show_default=True)
@click.option("--refresh", is_flag=True, help="Also rewrite stream_status/completeness_windows.")
@click.option(
    "--refresh-interval",
    "refresh_seconds",
    envvar="HOLONOGRAPH_STATUS_REFRESH_SECONDS",
    type=click.FloatRange(min=0, min_open=True),
    default=60.0,
    show_default=True,
    help="Seconds between the tables' refreshes by serve/sink; older than twice: warn.",
)
@tenant_option
@store_options
def completeness_command(
    since: dt.datetime | None,
    until: dt.datetime | None,
    stream: str | None,
    surface: str | None,
    bucket: str,
    as_of: dt.datetime | None,
    sentinel_interval_ms: int,
    dead_after: float,
    limit: int,
    refresh: bool,
    refresh_seconds: float,
    tenant: str | None,
    store_url: str | None,
    data_dir: str | None,
    as_json: bool,
) -> None:
    """Per-stream delivery accounting (lossy and dead first) and biased windows.

    Exit 0: nothing lost; 1: loss, a dead stream, or reported drops exceeding the
    observed gaps; 2: usage; 3: store unavailable."""
    if since and until and since >= until:
        raise click.BadParameter("--since must be before --until", param_hint="--since")
    now = as_of or dt.datetime.now(dt.UTC)
    config = CompletenessConfig(
        default_sentinel_interval_ms=sentinel_interval_ms, dead_after_intervals=dead_after
    )
    store = open_store_or_exit(store_url, data_dir, write=refresh)
    tenant = tenant_or_exit(store, tenant)
    selection = Selection(tenant=tenant, stream=stream, surface=surface, since=since, until=until)
    try:
        if refresh:
            summary = recompute_completeness(store, now, config)
            click.echo(
                f"refreshed {summary.streams} stream(s) in {summary.duration_ms:.0f} ms", err=True
            )
        report = read_report(store, now, selection, cast(Bucket, bucket), config)
        report = with_refresh_age(report, last_refresh(store), refresh_seconds)
    except Exception as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(EXIT_UNAVAILABLE)
    finally:
        store.close()
    if report.tables_stale:
        click.echo(f"warning: {stale_warning(report, refresh_seconds)}", err=True)
    if as_json:
        emit_json(report.model_dump(by_alias=True))
    elif not report.streams:
        click.echo("no emission streams in the selection")
    else:
        click.echo(render_text(report, limit))
    if not as_json and not report.tables_stale:
        click.echo(f"\n{refreshed_line(report)}")
    if is_finding(report):
        sys.exit(EXIT_FINDING)


def register(group: click.Group) -> None:
    group.add_command(completeness_command)
