"""`holonograph quarantine`: the spans fail-closed validation rejected, newest first,
with counts per reason, so a user sees what is being dropped without writing SQL."""

from __future__ import annotations

import datetime as dt
import sys

import click

from holonograph.cli.jobs import Rendering, job_limit_options, request_from, run_command
from holonograph.cli.options import RFC3339, format_table, store_options
from holonograph.cli.tenants import tenant_option
from processors.quarantine.job import JOB, QuarantineReport, Request
from schemas import jsoncodec


@click.command("quarantine")
@click.option("--since", type=RFC3339(), help="Received at or after T (RFC 3339).")
@click.option("--until", type=RFC3339(), help="... and before T.")
@click.option("--reason", help="Only spans with exactly this reason (as listed).")
@click.option("--reason-prefix", help="Only spans whose reason starts with TEXT (case-sensitive).")
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="Newest spans listed (counts cover every match).",
)
@click.option(
    "--offset",
    type=click.IntRange(min=0),
    default=0,
    help="Skip this many of the newest spans first (the next page: offset + limit).",
)
@tenant_option
@job_limit_options
@store_options
def quarantine_command(
    since: dt.datetime | None,
    until: dt.datetime | None,
    reason: str | None,
    reason_prefix: str | None,
    limit: int,
    offset: int,
    tenant: str | None,
    store_url: str | None,
    data_dir: str | None,
    as_json: bool,
) -> None:
    """Recently rejected spans, their reasons and counts per reason.

    Each rejected span is one row of `holonograph.quarantine`, its valid neighbours in
    the same request were stored; fix the sender, then `holonograph replay --from
    quarantine`; a span replayed since (its event is stored) is no longer listed, only
    counted as replayed. Reasons are shown in full. Exit 0 (rejections are reported,
    not a failure of this command)."""
    if since and until and since >= until:
        raise click.BadParameter("--since must be before --until", param_hint="--since")
    flags = {"since": since, "until": until, "reason": reason, "reason_prefix": reason_prefix,
             "limit": limit, "offset": offset, "tenant": tenant}  # fmt: skip
    request = request_from(Request, flags)
    rendering: Rendering[QuarantineReport] = Rendering(render)
    run_command(
        JOB,
        request,
        rendering,
        store_url=store_url,
        data_dir=data_dir,
        as_json=as_json,
        own_statements=True,  # the job's statements are its own: its reader skips the gate
    )


def _when(moment: dt.datetime) -> str:
    return str(jsoncodec.plain(moment))


# Reasons are never cut: the text is what to fix in the sender.
FULL = sys.maxsize


def render(report: QuarantineReport) -> str:
    replayed = f"; {report.replayed} replayed since" if report.replayed else ""
    if not report.total:
        return f"no rejected spans in the selection{replayed}"
    lines = [f"{report.total} rejected span(s), {len(report.reasons)} reason(s){replayed}", ""]
    lines.append(
        format_table(
            ["spans", "reason", "first", "last"],
            [
                [r.spans, r.reason, _when(r.first_received_at), _when(r.last_received_at)]
                for r in report.reasons
            ],
            max_width=FULL,
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
        columns = ["received", "span", "name", "stream#seq", "reason"]
        lines.append(format_table(columns, rows, max_width=FULL))
    return "\n".join(lines)


def register(group: click.Group) -> None:
    group.add_command(quarantine_command)
