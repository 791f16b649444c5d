"""`holonograph status`: what the collector knows, at a glance (the job
`processors.status.job`, also GET /holonograph/status)."""

from __future__ import annotations

import sys

import click

from holonograph.cli.errors import EXIT_FINDING, EXIT_USAGE, CommandFailed
from holonograph.cli.jobs import (
    CommandStores,
    Rendering,
    command_clock,
    given_limits,
    job_limit_options,
    request_from,
    show,
)
from holonograph.cli.options import format_table, store_options
from holonograph.cli.tenants import tenant_option
from holonograph.limits import JobOverLimit
from holonograph.runner import execute
from processors.jobs import JobError
from processors.status.job import JOB, Request, StatusReport
from schemas import jsoncodec


def _when(value: object) -> str:
    return "-" if value is None else str(jsoncodec.plain(value))


def _size(n: int) -> str:
    size, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            break
        size /= 1024
    return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"


def render(report: StatusReport) -> str:
    doc = report.document
    lines: list[str] = []
    if doc.store is not None:
        lines.append(
            f"store: {_size(doc.store.bytes_on_disk)} on disk, {doc.store.rows:,} rows"
            f" in {doc.store.tables} tables"
        )
    if not doc.tenants:
        lines.append("no tenant has sent anything yet: point an OTLP exporter at `serve`")
    for tenant in doc.tenants:
        lines += [
            "",
            f"tenant {tenant.tenant_id}: {tenant.events:,} events on {len(tenant.surfaces)}"
            f" surface(s), {tenant.streams} stream(s), {tenant.quarantined:,} rejected"
            f" (last {_when(tenant.last_rejection_at)}), last arrival"
            f" {_when(tenant.last_arrival_at)}",
        ]
        if tenant.surfaces:
            rows = [
                [
                    s.surface_id,
                    s.events,
                    ", ".join(f"{d.dimension_id} ({d.outcomes})" for d in s.dimensions) or "-",
                    _when(s.first_event_at),
                    _when(s.last_event_at),
                    _when(s.last_arrival_at),
                ]
                for s in tenant.surfaces
            ]
            columns = ["surface", "events", "dimensions (outcomes)", "first event", "last event",
                       "last arrival"]  # fmt: skip
            lines.append(format_table(columns, rows, max_width=80))
    lines.append("")
    if not doc.schedules:
        lines.append("schedules: no run recorded (serve --schedule FILE runs them)")
    else:
        rows = [
            [
                s.tenant_id,
                s.schedule,
                s.job,
                "ok" if s.healthy else "UNHEALTHY",
                s.last_status,
                _when(s.last_fire_time),
                _when(s.last_success_at),
                f"{s.failed}/{s.runs}",
                s.delivery,
                s.last_error or "-",
            ]
            for s in doc.schedules
        ]
        columns = ["tenant", "schedule", "job", "health", "last status", "last fire",
                   "last success", "failed", "delivery", "last error"]  # fmt: skip
        lines.append(format_table(columns, rows, max_width=80))
    return "\n".join(lines).lstrip("\n")


@click.command("status")
@tenant_option
@job_limit_options
@store_options
def status_command(
    tenant: str | None, store_url: str | None, data_dir: str | None, as_json: bool
) -> None:
    """Tenants, their surfaces and dimensions with event counts and last arrival,
    streams and rejections, the store's size on disk, and each schedule's health from
    its recorded runs. The surface and dimension names listed are the ones the
    analyses accept. Without --tenant: every tenant (and the store's size).

    Exit 0: shown; 1: a schedule's latest run failed or its alert was not delivered;
    2: usage; 3: store unavailable."""
    request = request_from(Request, {"tenant": tenant})
    stores = CommandStores(store_url, data_dir)
    try:
        report = execute(JOB, request, stores, command_clock(), given_limits())
    except (JobError, JobOverLimit) as err:
        raise CommandFailed(str(err), EXIT_USAGE, err.hint) from None
    finally:
        stores.close()
    show(report, Rendering(render), as_json)
    if JOB.finding(report):
        sys.exit(EXIT_FINDING)


def register(group: click.Group) -> None:
    group.add_command(status_command)
