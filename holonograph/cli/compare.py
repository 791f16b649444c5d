"""`holonograph compare`: vendors head to head on one surface, per group and paired
on the same multiplex calls."""

from __future__ import annotations

import datetime as dt

import click

from holonograph.cli.jobs import Rendering, job_limit_options, request_from, run_command
from holonograph.cli.options import (
    RFC3339,
    choice_of,
    format_table,
    provenance_option,
    run_mode_option,
    store_options,
)
from holonograph.cli.tenants import tenant_option
from processors.compare.job import JOB, Request
from schemas.analysis import Interval, Role
from schemas.compare import CompareReport, Correction, GroupDimension


@click.command("compare")
@click.option("--surface", "surface_id", required=True, help="Surface id, e.g. classify-intent.")
@click.option("--since", type=RFC3339(), required=True, help="Window start, RFC 3339 UTC.")
@click.option("--until", type=RFC3339(), required=True, help="Window end (exclusive).")
@click.option("--dimension", "dimension_id", help="One dimension (default: every dimension).")
@click.option(
    "--by",
    default="light-source",
    show_default=True,
    help="Group by light-source, lens or substrate:<column>.",
)
@click.option(
    "--alpha",
    type=click.FloatRange(min=0.0, max=1.0, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="Family-wise significance level of the paired tests (per test with --correction none).",
)
@click.option(
    "--correction",
    type=choice_of(Correction),
    default="holm",
    show_default=True,
    help="Adjust the paired tests' p-values for their number (holm) or not (none).",
)
@click.option(
    "--role",
    type=choice_of(Role),
    default=None,
    help="The events the per-group readings take on a multiplexed surface (default: all"
    " with --by light-source, where a group is one vendor; else primary).",
)
@run_mode_option
@provenance_option
@tenant_option
@job_limit_options
@store_options
def compare_command(
    surface_id: str,
    since: dt.datetime,
    until: dt.datetime,
    dimension_id: str | None,
    by: str,
    alpha: float,
    correction: Correction,
    role: Role | None,
    run_modes: tuple[str, ...],
    provenances: tuple[str, ...],
    tenant: str | None,
    store_url: str | None,
    data_dir: str | None,
    as_json: bool,
) -> None:
    """Which vendor is better, with stated confidence? Per group (light source, lens
    version or a substrate column): events, pass rate with a 95% Wilson interval, mean
    score with a 95% interval, latency p50/p95, cost and tokens per evaluation. For
    multiplex calls (events sharing a correlation id), each observer against the
    primary on the same calls: improved / regressed / equal, McNemar's exact test
    (pass/fail) or the paired t-test (scores), the paired difference with a 95%
    interval. A call where a vendor has no graded outcome is counted as missing, never
    as a failure; a fallback counts for the vendor that answered.

    The paired p-values are adjusted for their number (Holm) unless --correction none.

    Exit 0: no significant paired difference; 1: a paired difference significant at
    --alpha; 2: usage; 3: store unavailable."""
    flags = {"surface_id": surface_id, "since": since, "until": until, "by": by,
             "dimension_id": dimension_id, "run_modes": run_modes, "provenances": provenances,
             "alpha": alpha, "correction": correction, "role": role, "tenant": tenant}  # fmt: skip
    request = request_from(Request, flags)
    try:  # the window and grouping refused in the command's words
        request.checked()
    except ValueError as err:
        raise click.UsageError(str(err)) from None
    rendering: Rendering[CompareReport] = Rendering(render)
    run_command(
        JOB,
        request,
        rendering,
        store_url=store_url,
        data_dir=data_dir,
        as_json=as_json,
        own_statements=True,  # the job's statements are its own: its reader skips the gate
    )


def _interval(value: Interval | None, digits: int = 3, signed: bool = False) -> str:
    if value is None:
        return "-"
    f = f"{{:{'+' if signed else ''}.{digits}f}}"
    return f"{f.format(value.estimate)} [{f.format(value.ci_low)}, {f.format(value.ci_high)}]"


def _number(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def render(report: CompareReport) -> str:
    """Groups first, then the paired comparisons, then the verdict."""
    out = [
        f"surface {report.surface_id} by {report.parameters.by}: {report.events} events,"
        f" {report.multiplex_calls} multiplex call(s), usual primary"
        f" {report.usual_primary or '-'}"
    ]
    rows = []
    for g in report.groups:
        shown: list[GroupDimension | None] = [*g.dimensions] or [None]
        for d in shown:
            rows.append(
                [
                    g.group,
                    g.events,
                    d.dimension_id if d else "-",
                    (_interval(d.pass_rate) if d.kind == "pass-fail" else _interval(d.mean))
                    if d
                    else "-",
                    d.missing if d else "-",
                    f"{_number(g.latency_ms.p50, 0)}/{_number(g.latency_ms.p95, 0)}",
                    _number(g.cost_per_evaluation_usd, 5),
                    _number(g.tokens_per_evaluation, 1),
                    f"{g.as_primary}/{g.as_observer}/{g.fallbacks}",
                ]
            )
    if rows:
        out.append(
            format_table(
                [
                    "group", "events", "dimension", "pass rate | mean [95%]", "missing",
                    "latency p50/p95 ms", "cost/eval $", "tokens/eval",
                    "primary/observer/fallback",
                ],
                rows,
            )
        )  # fmt: skip
    if report.paired:
        out += ["", "paired on the same calls (observer - primary):"]
        rows = [
            [
                p.dimension_id,
                p.observer,
                p.primary,
                p.paired,
                f"{p.improved}/{p.regressed}/{p.equal}",
                f"{p.missing.primary}/{p.missing.observer}/{p.missing.both}",
                _interval(p.difference, signed=True),
                "-" if p.p_value is None else f"{p.p_value:.3g}",
                "-" if p.adjusted_p_value is None else f"{p.adjusted_p_value:.3g}",
                "yes" if p.significant else "no",
            ]
            for p in report.paired
        ]
        out.append(
            format_table(
                [
                    "dimension", "observer", "primary", "paired", "better/worse/equal",
                    "missing p/o/both", "difference [95%]", "p", "adjusted p", "significant",
                ],
                rows,
            )
        )  # fmt: skip
    if report.fallbacks:
        out += ["", "fallbacks (calls whose declared primary did not answer):"]
        rows = [
            [
                f.declared_primary,
                f.answered_by,
                f.rule,
                f"{f.fallbacks}/{f.calls}",
                _interval(f.rate, digits=4),
            ]
            for f in report.fallbacks
        ]
        out.append(
            format_table(["declared primary", "answered by", "rule", "calls", "rate [95%]"], rows)
        )
    out += [f"note: {n}" for n in report.notes]
    found = report.significant
    level = f"alpha {report.parameters.alpha:g}" + (
        f" (Holm over {len(report.paired)} comparisons)"
        if report.parameters.correction == "holm"
        else " (each test on its own)"
    )
    out.append(
        f"{len(found)} significant difference(s) at {level}"
        if found
        else f"no significant paired difference at {level}"
    )
    return "\n".join(out)


def register(group: click.Group) -> None:
    group.add_command(compare_command)
