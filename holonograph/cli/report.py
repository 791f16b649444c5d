"""`holonograph report`: one self-contained HTML page with what the dashboards show (the
report job, `processors.report.job`: its --json is `POST /holonograph/report`'s body)."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from holonograph.cli.errors import EXIT_USAGE, CommandFailed
from holonograph.cli.jobs import Rendering, job_limit_options, report_of, request_from, show
from holonograph.cli.options import (
    RFC3339,
    provenance_option,
    series_options,
    store_options,
)
from holonograph.cli.tenants import tenant_option
from processors.report.html import render
from processors.report.job import JOB, PROGRESS, Report, Request


@click.command("report")
@click.option("--since", type=RFC3339(), required=True, help="Window start, RFC 3339 UTC.")
@click.option("--until", type=RFC3339(), required=True, help="Window end (exclusive).")
@click.option("--surface", "surface_id", help="One surface (default: every surface with events).")
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False, writable=True),
    help="Write the HTML page here (needed unless --json).",
)
@click.option("--as-of", "as_of", type=RFC3339(), help="Judge stream status at T (default: now).")
@provenance_option
@series_options
@tenant_option
@job_limit_options
@store_options
def report_command(
    since: dt.datetime,
    until: dt.datetime,
    surface_id: str | None,
    out: str | None,
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
    --json prints what the page shows as JSON (`POST /holonograph/report`'s body), with
    or without --out.

    Exit 0: written; 2: usage; 3: store unavailable."""
    if out is None and not as_json:
        raise click.UsageError("give --out FILE for the page, --json for its data, or both")
    flags = {"since": since, "until": until, "surface_id": surface_id, "as_of": as_of,
             "provenances": provenances, "role": role, "light_source": light_source,
             "tenant": tenant}  # fmt: skip
    request = request_from(Request, flags)
    target = Path(out) if out is not None else None
    if target is not None and not target.parent.is_dir():
        raise CommandFailed(f"no directory {target.parent} for --out", EXIT_USAGE)
    with _progress():
        (report,) = report_of(JOB, [request], store_url, data_dir)
    if target is not None:
        page = render(report.data)
        partial = target.with_name(f".{target.name}.partial")
        partial.write_text(page, encoding="utf-8")
        os.replace(partial, target)  # a reader never sees half a page
        written = (
            f"wrote {target} ({len(report.data.surfaces)} surface(s), {len(page.encode())} bytes)"
        )
        if not as_json:
            click.echo(written)
            return
        click.echo(written, err=True)
    show(report, Rendering[Report](lambda r: ""), as_json=True)


class _Bar:
    """The report's progress as a bar on stderr, opened once the steps are known."""

    def __init__(self) -> None:
        self._bar: Any = None

    def begin(self, total: int) -> None:
        self._bar = click.progressbar(length=total, label="report", file=sys.stderr, show_pos=True)
        self._bar.__enter__()

    def step(self, label: str) -> None:
        if self._bar is not None:
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)


@contextlib.contextmanager
def _progress() -> Iterator[None]:
    """A bar for a person watching, not for a log: only on a terminal."""
    if not sys.stderr.isatty():
        yield
        return
    bar = _Bar()
    token = PROGRESS.set(bar)
    try:
        yield
    finally:
        PROGRESS.reset(token)
        bar.close()


def register(group: click.Group) -> None:
    group.add_command(report_command)
