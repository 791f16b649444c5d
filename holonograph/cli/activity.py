"""`holonograph activity`: events received and spans rejected per minute, the last
`--minutes` minutes (the job `processors.activity.job`, also GET /holonograph/activity,
which the web UI's overview polls)."""

from __future__ import annotations

from typing import Any

import click

from holonograph.cli.jobs import Rendering, request_from, request_option, run_command
from holonograph.cli.options import format_table, store_options
from holonograph.cli.tenants import tenant_option
from processors.activity.job import JOB, ActivityReport, Request
from schemas import jsoncodec


def render(report: ActivityReport) -> str:
    doc = report.document
    span = f"{jsoncodec.plain(doc['since'])} to {jsoncodec.plain(doc['until'])}"
    head = f"{doc['events']:,} event(s) received, {doc['rejections']:,} span(s) rejected, {span}"
    busy = [
        [jsoncodec.plain(m["minute"]), m["events"], m["rejections"]]
        for m in doc["perMinute"]
        if m["events"] or m["rejections"]
    ]
    if not busy:
        return head + "\nno minute had an arrival or a rejection"
    return head + "\n" + format_table(["minute", "events", "rejected"], busy, max_width=80)


@click.command("activity")
@request_option(Request, "minutes", "--minutes")
@tenant_option
@store_options
def activity_command(tenant: str | None, **flags: Any) -> None:
    """Events received and spans rejected in each of the last --minutes minutes (quiet
    minutes are left out of the table, and zeros in --json). Exit 0: shown; 2: usage;
    3: store unavailable."""
    store_url, data_dir, as_json = (
        flags.pop("store_url"),
        flags.pop("data_dir"),
        flags.pop("as_json"),
    )
    request = request_from(Request, {**flags, "tenant": tenant})
    run_command(
        JOB, request, Rendering(render), store_url=store_url, data_dir=data_dir, as_json=as_json
    )


def register(group: click.Group) -> None:
    group.add_command(activity_command)
