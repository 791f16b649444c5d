"""`holonograph report`: one self-contained HTML page with what the dashboards show."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import sys
from pathlib import Path

import click

from holonograph.cli.errors import EXIT_USAGE, CommandFailed
from holonograph.cli.options import (
    RFC3339,
    open_store_or_exit,
    provenance_filter,
    provenance_option,
    series_options,
    store_options,
)
from holonograph.cli.tenants import tenant_option, tenant_or_exit
from processors.names import UnknownName, require_known
from processors.report.gather import ReportRequest, gather, steps, surfaces_in_window
from processors.report.html import render
from processors.series.cells import SelectionError


@click.command("report")
@click.option("--since", type=RFC3339(), required=True, help="Window start, RFC 3339 UTC.")
@click.option("--until", type=RFC3339(), required=True, help="Window end (exclusive).")
@click.option("--surface", "surface_id", help="One surface (default: every surface with events).")
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False, writable=True),
    required=True,
    help="Write the HTML page here.",
)
@click.option("--as-of", "as_of", type=RFC3339(), help="Judge stream status at T (default: now).")
@provenance_option
@series_options
@tenant_option
@store_options
def report_command(
    since: dt.datetime,
    until: dt.datetime,
    surface_id: str | None,
    out: str,
    as_of: dt.datetime | None,
    provenances: tuple[str, ...],
    role: str,
    light_source: str,
    tenant: str | None,
    store_url: str | None,
    data_dir: str | None,
    as_json: bool,
) -> None:
    """Write one HTML page that opens offline in any browser (no script, nothing
    fetched, figures inline): per surface the pass rate over time beside the
    completeness lower bound of each hour, change points labelled by source from the
    latest stored drift run, variance verdicts, the vendor comparison of `compare`;
    stream health as `completeness` reports it, and rejected spans. On a multiplexed
    surface the pass rates are the primary's (what the agent used) unless --role or
    --light-source asks for another series. Progress goes to stderr on a terminal;
    --json prints where the page went and what it holds.

    Exit 0: written; 2: usage; 3: store unavailable."""
    provenances_read = provenance_filter(provenances)
    try:
        request = ReportRequest(
            since=since,
            until=until,
            as_of=as_of or dt.datetime.now(dt.UTC),
            surface_id=surface_id,
            provenances=provenances_read,
            role=role,  # type: ignore[arg-type]
            light_source=light_source,
        )
    except ValueError as err:
        raise click.UsageError(str(err)) from None
    target = Path(out)
    if not target.parent.is_dir():
        raise CommandFailed(f"no directory {target.parent} for --out", EXIT_USAGE)
    store = open_store_or_exit(store_url, data_dir)
    request = dataclasses.replace(request, tenant_id=tenant_or_exit(store, tenant))
    try:
        require_known(store, request.tenant_id, {"surface": surface_id})
        surfaces = surfaces_in_window(store, request)
        if sys.stderr.isatty():  # progress is for a person watching, not for a log
            with click.progressbar(
                length=steps(request, surfaces), label="report", file=sys.stderr, show_pos=True
            ) as bar:
                data = gather(store, request, surfaces, lambda step: bar.update(1))
        else:
            data = gather(store, request, surfaces, lambda step: None)
    except SelectionError as err:
        raise CommandFailed(str(err), EXIT_USAGE) from None
    except UnknownName as err:  # never a page of zeros for a misspelt --surface
        raise CommandFailed(str(err), EXIT_USAGE, err.hint) from None
    finally:
        store.close()
    page = render(data)
    partial = target.with_name(f".{target.name}.partial")
    partial.write_text(page, encoding="utf-8")
    os.replace(partial, target)  # a reader never sees half a page
    if as_json:
        from holonograph.cli.options import emit_json

        emit_json({"out": str(target), "bytes": len(page.encode()), "surfaces": surfaces})
    else:
        click.echo(f"wrote {target} ({len(surfaces)} surface(s), {len(page.encode())} bytes)")


def register(group: click.Group) -> None:
    group.add_command(report_command)
