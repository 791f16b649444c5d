"""`holonograph drift`: change points of a surface's outcomes, labelled by source."""

from __future__ import annotations

import datetime as dt
import sys

import click

from holonograph.cli.jobs import Rendering, job_limit_options, report_of, request_from, show
from holonograph.cli.options import (
    EXIT_FINDING,
    RFC3339,
    choice_of,
    format_table,
    provenance_option,
    run_mode_option,
    series_options,
    store_options,
)
from holonograph.cli.tenants import tenant_option
from processors.drift.job import JOB, Request
from schemas.analysis import Bucket, DriftReport
from schemas.times import rfc3339


@click.command("drift")
@click.option("--surface", "surface_id", required=True, help="Surface id, e.g. classify-intent.")
@click.option("--dimension", "dimension_id", help="One dimension (default: every dimension).")
@click.option("--since", type=RFC3339(), required=True, help="Window start, RFC 3339 UTC.")
@click.option("--until", type=RFC3339(), required=True, help="Window end (exclusive).")
@click.option("--bucket", type=choice_of(Bucket), default="hour", show_default=True)
@click.option(
    "--delta-threshold",
    "--change-point-delta-threshold",
    "delta_threshold",
    type=click.FloatRange(min=0.0),
    default=0.0,
    show_default=True,
    help="Minimum practical shift; smaller significant shifts are labelled noise.",
)
@run_mode_option
@provenance_option
@series_options
@click.option("--alpha", type=float, default=0.02, show_default=True, help="False-alarm rate.")
@click.option("--permutations", type=click.IntRange(min=19), default=199, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="Write a PNG here.")
@click.option("--no-save", is_flag=True, help="Do not record the run in the store.")
@tenant_option
@job_limit_options
@store_options
def drift_command(
    surface_id: str,
    dimension_id: str | None,
    since: dt.datetime,
    until: dt.datetime,
    bucket: str,
    delta_threshold: float,
    run_modes: tuple[str, ...],
    provenances: tuple[str, ...],
    role: str,
    light_source: str,
    alpha: float,
    permutations: int,
    seed: int,
    plot_path: str | None,
    no_save: bool,
    tenant: str | None,
    store_url: str | None,
    data_dir: str | None,
    as_json: bool,
) -> None:
    """Is this us, the vendor, our evaluation config, or noise? Change points over the
    window, each with its source, evidence and confidence window, plus the bracketed
    windows to read before acting.

    On a multiplexed surface the series is the primary's (what the agent used) unless
    --role / --light-source asks for an observer's (each its own series) or for all
    events; the JSON's `series` says which was read.

    Exit 0: no change point, or only noise; 1: a change point attributed to substrate,
    light source or lens; 2: usage (among it: --role observer on a surface with several
    observers and no --light-source); 3: store unavailable. A series too short to test
    is reported as such (JSON: `dimensions[].tested` false, with a note), not as no
    change."""
    request = request_from(
        Request,
        {
            "surface_id": surface_id,
            "since": since,
            "until": until,
            "bucket": bucket,
            "dimension_id": dimension_id,
            "delta_threshold": delta_threshold,
            "run_modes": run_modes,
            "provenances": provenances,
            "role": role,
            "light_source": light_source,
            "alpha": alpha,
            "permutations": permutations,
            "seed": seed,
            "persist": not no_save,
            "tenant": tenant,
        },
    )
    # The job's statements are its own (values bound on the server): no gate on its reader.
    (report,) = report_of(JOB, [request], store_url, data_dir, own_statements=True)
    if plot_path:
        from processors.drift.plot import plot_drift

        plot_drift(report.report, report.run.traces, plot_path)
    show(report, Rendering(lambda r: render(r.report)), as_json)
    if JOB.finding(report):
        sys.exit(EXIT_FINDING)


def _headline(report: DriftReport) -> str:
    if report.event_count == 0:  # a known surface, quiet in this window: say so
        window = f"[{rfc3339(report.since)}, {rfc3339(report.until)})"
        return f"surface {report.surface_id}: no events in {window}, run {report.run_id}"
    tested = [d for d in report.dimensions if d.tested]
    if report.dimensions and not tested:
        found = "series too short to test for change points"
    elif len(tested) < len(report.dimensions):
        found = (
            f"{len(report.change_points)} change point(s) in the"
            f" {len(tested)} of {len(report.dimensions)} dimension(s) long enough to test"
        )
    else:
        found = f"{len(report.change_points)} change point(s)"
    series = report.series
    which = ""
    if series.multiplexed or series.role != "primary" or series.light_source:
        which = f" ({series.role} series" + (
            f" of {series.light_source})" if series.light_source else ")"
        )
    return (
        f"surface {report.surface_id}{which}: {report.event_count} events, {found},"
        f" run {report.run_id}"
    )


def render(report: DriftReport) -> str:
    """The report as an operator reads it: change points, then the bracketed windows."""
    out = [_headline(report)]
    delivery = report.delivery_loss
    if delivery is not None and delivery.measurable != "all":
        out.append(f"delivery loss: {delivery.detail}")
    if report.change_points:
        rows = [
            [
                p.timestamp,
                p.dimension_id,
                p.source + ("" if p.confident else " (not confident)"),
                f"{p.effect.delta:+.3f} [{p.effect.ci_low:+.3f}, {p.effect.ci_high:+.3f}]",
                f"{p.window.from_:%Y-%m-%d %H:%M} .. {p.window.to:%Y-%m-%d %H:%M}",
                ", ".join(p.brackets) or "-",
                p.reason,
            ]
            for p in report.change_points
        ]
        out.append(
            format_table(
                ["timestamp", "dimension", "source", "shift", "window", "bracketed", "why"], rows
            )
        )
    cited = [(p, c) for p in report.change_points for c in p.change_events]
    if cited:
        rows = [
            [p.timestamp, p.dimension_id, c.kind, c.at, c.layer or "-",
             "yes" if c.timing.starts_here else f"no (p {c.timing.p_value:.3f})", c.description]
            for p, c in cited
        ]  # fmt: skip
        out.append("recorded changes in the change points' windows:")
        out.append(
            format_table(
                ["change point", "dimension", "kind", "at", "layer", "starts at it", "what"], rows
            )
        )
    if report.bracketed_windows:
        rows = [
            [b.reason, b.from_, b.to, b.dimension_id, b.detail] for b in report.bracketed_windows
        ]
        out.append("bracketed windows:")
        out.append(format_table(["reason", "from", "to", "dimension", "detail"], rows))
    out += [f"note: {n}" for n in report.notes]
    if report.retention is not None:
        out.append(report.retention.line())
    return "\n".join(out)


def register(group: click.Group) -> None:
    group.add_command(drift_command)
