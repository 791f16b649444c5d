"""`holonograph events`: the tenant's stored events a page at a time, the same job as
the Guide's `GET /lens/events` (`processors.events.job`); `--cursor` pages on."""

from __future__ import annotations

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
from processors.events.job import JOB, Report, Request


def _passed(event: Any) -> str:
    grades = [
        f"{d['dimensionId']}={'pass' if d['passed'] else 'fail'}"
        if d["passed"] is not None
        else f"{d['dimensionId']}={d['score']:g}"
        for d in event["dimensions"]
    ]
    return " ".join(grades)


def _text(report: Report) -> str:
    if not report.events:
        return "no events in the selection"
    rows = [
        [e["eventId"], e["timestamp"], e["surfaceId"], e["runMode"], e["lightSourceId"],
         _passed(e)]
        for e in report.events
    ]  # fmt: skip
    columns = ["event", "timestamp", "surface", "run mode", "light source", "dimensions"]
    return format_table(columns, rows)


def _notes(report: Report) -> list[str]:
    if report.next_cursor is None:
        return []
    return [f"more: --cursor {report.next_cursor}"]


@click.command("events")
@request_option(Request, "surface_id", "--surface")
@request_option(Request, "since", "--since")
@request_option(Request, "until", "--until")
@request_option(Request, "correlation_id", "--correlation-id")
@request_option(Request, "provenance", "--provenance")
@request_option(Request, "direction", "--direction")
@request_option(Request, "limit", "--limit")
@request_option(Request, "cursor", "--cursor")
@tenant_option
@job_limit_options
@store_options
def events_command(
    tenant: str | None,
    store_url: str | None,
    data_dir: str | None,
    as_json: bool,
    **flags: Any,
) -> None:
    """A page of stored events, latest received first (--direction asc: oldest first).

    A re-sent event keeps the place of its first receipt, so paging on with --cursor
    never shows one twice nor skips one. Exit 0; 2: usage; 3: store unavailable."""
    request = request_from(Request, {**flags, "tenant": tenant})
    rendering = Rendering(_text, _notes)
    run_command(JOB, request, rendering, store_url=store_url, data_dir=data_dir, as_json=as_json)


def register(group: click.Group) -> None:
    group.add_command(events_command)
