"""`holonograph retention show | set | clear`: how long the store keeps a tenant's
events, dimensions, receipts and quarantined spans (`processors.retention.job`)."""

from __future__ import annotations

from typing import Any

import click

from holonograph.cli.jobs import Rendering, request_from, request_option, run_command
from holonograph.cli.options import store_options
from holonograph.cli.tenants import tenant_option
from processors.retention.job import JOB, Report, Request


def _days(days: float | None) -> str:
    return "kept forever" if days is None else f"{days:g} days"


def render(report: Report) -> str:
    doc = report.document
    where = {"tenant": "its own setting", "default": "the store's default", "none": "no setting"}
    lines = [
        f"tenant {doc.tenant_id}: {_days(doc.effective_days)} ({where[doc.source]})",
        f"  tenant setting: {_days(doc.tenant_days) if doc.tenant_days else 'none'}",
        f"  store default:  {_days(doc.default_days)} (serve --retention)",
    ]
    if doc.applied_to:
        lines.append(f"  TTL applied to: {', '.join(doc.applied_to)}")
    return "\n".join(lines)


def _run(action: str, tenant: str | None, options: dict[str, Any]) -> None:
    request = request_from(Request, {"action": action, "tenant": tenant, **options})
    run_command(
        JOB, request, Rendering(render), store_url=options["store_url"],
        data_dir=options["data_dir"], as_json=options["as_json"],
    )  # fmt: skip


@click.group("retention")
def retention_group() -> None:
    """A tenant's retention: rows older than it are deleted by ClickHouse TTL on the
    event, dimension, receipt and quarantine tables. A tenant's setting wins over the
    store's default (`serve --retention`), shorter or longer."""


@retention_group.command("show")
@tenant_option
@store_options
def show_command(tenant: str | None, **options: Any) -> None:
    """The tenant's setting, the store's default, and the one in effect. Exit 0."""
    _run("show", tenant, options)


@retention_group.command("set")
@request_option(Request, "days", "--days", required=True)
@tenant_option
@store_options
def set_command(tenant: str | None, days: int, **options: Any) -> None:
    """Keep the tenant's rows N days after their time; older ones are deleted (by a
    background mutation now, by merges after). Exit 0; 2: usage."""
    _run("set", tenant, {**options, "days": days})


@retention_group.command("clear")
@tenant_option
@store_options
def clear_command(tenant: str | None, **options: Any) -> None:
    """Remove the tenant's setting: the store's default applies again. Exit 0."""
    _run("clear", tenant, options)


def register(group: click.Group) -> None:
    group.add_command(retention_group)
