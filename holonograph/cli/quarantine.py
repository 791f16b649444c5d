"""`holonograph quarantine`: the spans fail-closed validation rejected, newest first,
with counts per reason, so a user sees what is being dropped without writing SQL."""

from __future__ import annotations

import datetime as dt

import click

from holonograph.cli.jobs import Rendering, request_from, run_command
from holonograph.cli.options import RFC3339, format_table, store_options
from holonograph.cli.tenants import tenant_option
from processors.quarantine.job import JOB, QuarantineReport, Request
from schemas import jsoncodec


@click.command("quarantine")
@click.option("--since", type=RFC3339(), help="Received at or after T (RFC 3339).")
@click.option("--until", type=RFC3339(), help="... and before T.")
@click.option("--reason", help="Only spans whose reason contains TEXT (any case).")
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="Newest spans listed (counts cover every match).",
)
@tenant_option
@store_options
def quarantine_command(
    since: dt.datetime | None,
    until: dt.datetime | None,
    reason: str | None,
    limit: int,
    tenant: str | None,
    store_url: str | None,
    data_dir: str | None,
    as_json: bool,
) -> None:
    """Recently rejected spans, their reasons and counts per reason.

    Each rejected span is one row of `holonograph.quarantine`, its valid neighbours in
    the same request were stored; fix the sender, then `holonograph replay --from
    quarantine`. Exit 0 (rejections are reported, not a failure of this command)."""
    if since and until and since >= until:
        raise click.BadParameter("--since must be before --until", param_hint="--since")
    flags = {"since": since, "until": until, "reason": reason, "limit": limit, "tenant": tenant}
    request = request_from(Request, flags)
    rendering: Rendering[QuarantineReport] = Rendering(render)
    run_command(JOB, request, rendering, store_url=store_url, data_dir=data_dir, as_json=as_json)


def _when(moment: dt.datetime) -> str:
    return str(jsoncodec.plain(moment))


def render(report: QuarantineReport) -> str:
    if not report.total:
        return "no rejected spans in the selection"
    lines = [f"{report.total} rejected span(s), {len(report.reasons)} reason(s)", ""]
    lines.append(
        format_table(
            ["spans", "reason", "first", "last"],
            [
                [r.spans, r.reason, _when(r.first_received_at), _when(r.last_received_at)]
                for r in report.reasons
            ],
            max_width=80,
        )
    )
    if report.spans:
        lines += ["", f"newest {len(report.spans)}:"]
        rows = [
            [
                _when(s.received_at),
                s.span_id,
                s.span_name,
                "" if s.emission_stream is None else f"{s.emission_stream}#{s.emission_seq}",
                s.reason,
            ]
            for s in report.spans
        ]
        lines.append(format_table(["received", "span", "name", "stream#seq", "reason"], rows))
    return "\n".join(lines)


def register(group: click.Group) -> None:
    group.add_command(quarantine_command)
