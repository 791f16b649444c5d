"""`holonograph demo`: seeded, realistic traffic sent through OTLP to a running `serve`
(`holonograph.demo.traffic` says what is planted in it)."""

from __future__ import annotations

import datetime as dt
import shlex

import click

from holonograph.cli.errors import EXIT_FINDING, EXIT_USAGE, CommandFailed
from holonograph.cli.options import RFC3339, emit_json
from schemas.times import rfc3339


def _hour(moment: dt.datetime) -> dt.datetime:
    return moment.astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0)


@click.command("demo")
@click.option(
    "--endpoint",
    default="http://127.0.0.1:4318",
    show_default=True,
    help="The running serve's OTLP/HTTP base URL (it also serves the HTTP API).",
)
@click.option("--days", type=click.IntRange(min=2, max=90), default=14, show_default=True)
@click.option("--surfaces", type=click.IntRange(min=1, max=5), default=3, show_default=True)
@click.option(
    "--calls-per-day",
    type=click.IntRange(min=24, max=100_000),
    default=120,
    show_default=True,
    help="Calls per surface and day (each one a primary and an observer event).",
)
@click.option(
    "--until", type=RFC3339(), default="now", show_default=True, help="End of the traffic."
)
@click.option("--seed", type=int, default=7, show_default=True)
@click.option("--overrides", type=click.IntRange(min=0, max=100), default=5, show_default=True)
@click.option(
    "--token",
    envvar="HOLONOGRAPH_TOKEN",
    help="Bearer token with the write and govern scopes (env HOLONOGRAPH_TOKEN), if serve"
    " has a tokens file.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1, max=600),
    default=30.0,
    show_default=True,
    help="Seconds to wait for each request to the collector.",
)
@click.option("--json", "as_json", is_flag=True, help="Print what was sent as JSON.")
def demo_command(
    endpoint: str,
    days: int,
    surfaces: int,
    calls_per_day: int,
    until: dt.datetime,
    seed: int,
    overrides: int,
    token: str | None,
    timeout: float,
    as_json: bool,
) -> None:
    """Send DAYS of multiplexed calls on SURFACES surfaces to a running serve: a primary
    and an observer per call, one vendor change with a pass-rate drop and a deploy at
    that moment, one day of dropped events, a few human overrides. Seeded: the same
    flags send the same spans. Exit 1 when the collector did not take everything
    (unreachable, refused or rejected), 2 on bad flags."""
    from holonograph.demo.hints import hints
    from holonograph.demo.traffic import DemoFailed, DemoPlan, send

    plan = DemoPlan(
        until=_hour(until), days=days, surfaces=surfaces, calls_per_day=calls_per_day,
        overrides=overrides, seed=seed,
    )  # fmt: skip

    def progress(sent: int, total: int) -> None:
        click.echo(f"demo: {sent:,}/{total:,} spans sent ({100 * sent // total}%)", err=True)

    try:
        summary = send(plan, endpoint, token=token, progress=progress, timeout=timeout)
    except DemoFailed as err:
        raise CommandFailed(
            str(err), EXIT_FINDING, hint="start `holonograph serve` first, or pass --endpoint"
        ) from None
    except ValueError as err:  # pragma: no cover - the flags' ranges keep the plan valid
        raise CommandFailed(str(err), EXIT_USAGE) from None
    steps = hints(plan, summary)
    if as_json:
        emit_json({**summary.to_json(), "tryNext": [h.to_json() for h in steps]})
        return
    doc = summary.to_json()
    lines = [
        f"sent {summary.evaluations:,} evaluations ({summary.calls:,} calls) and"
        f" {summary.sentinels} sentinels on {', '.join(doc['surfaces'])},"
        f" {rfc3339(plan.start)} to {rfc3339(plan.until)}; deploy {plan.deploy_id};"
        f" {len(summary.overrides)} override(s)",
        "",
        "what to look for (add --data-dir or --store if serve does not use the default):",
    ]
    for step in steps:
        lines += [f"  {shlex.join(step.argv)}", f"      {step.shows}"]
    click.echo("\n".join(lines))


def register(group: click.Group) -> None:
    group.add_command(demo_command)
