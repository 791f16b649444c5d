"""`holonograph change record`, `holonograph availability mark` and `holonograph changes`:
what changed in the operator's system and when (docs/changes.md).

`change record` and `availability mark` write one change of a tenant (`--tenant`, else
the store's only one) and are idempotent with `--id`: the same record again answers the
stored one, other content under that id is exit 2 with nothing written. `changes`
lists a tenant's changes, governance-derived and recorded, by surface, agent, kind and
window. Each works while `serve` holds the store, through its admin endpoint (the
write commands with its write token).
"""

from __future__ import annotations

import datetime as dt
import getpass
from typing import Any

import click

from holonograph.cli.documents import invalid
from holonograph.cli.errors import EXIT_USAGE, CommandFailed
from holonograph.cli.options import RFC3339, choice_of, emit_json, format_table, store_options
from holonograph.cli.tenants import tenant_option
from schemas.changes import KINDS, ChangeEvent, OperatorKind, mark_answer
from schemas.times import rfc3339


def _login() -> str | None:
    """Who runs the command, as `actor` when none is given (as git names an author)."""
    try:
        return getpass.getuser() or None
    except (KeyError, OSError):  # no passwd entry and no LOGNAME/USER (a bare container)
        return None


def _validated(model: Any, fields: dict[str, Any], what: str) -> Any:
    """`model` from the flags' values, or exit 2 listing every problem by its flag."""
    from pydantic import ValidationError

    from schemas.contracts import problems

    try:
        return model.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as err:
        raise invalid("flags", problems(err), what, "nothing was recorded") from None


def _write(
    store_url: str | None,
    data_dir: str | None,
    tenant: str | None,
    write: Any,
) -> tuple[ChangeEvent, bool]:
    """Open the store for writing, resolve the tenant, run `write(store, tenant)`."""
    from holonograph.cli.options import open_store_or_exit
    from holonograph.cli.tenants import owner_or_exit
    from schemas.changelog import ChangeConflict

    store = open_store_or_exit(store_url, data_dir, write=True)
    owner = owner_or_exit(store, tenant)
    try:
        result: tuple[ChangeEvent, bool] = write(store, owner)
    except ChangeConflict as err:
        raise CommandFailed(str(err), EXIT_USAGE, "use another --id for another change") from None
    finally:
        store.close()
    return result


def _scope(event: ChangeEvent) -> str:
    if event.surface_id:
        return f"surface {event.surface_id}"
    if event.agent_id:
        return f"agent {event.agent_id} (agent-wide)"
    return "tenant-wide"


def _print_recorded(event: ChangeEvent, created: bool) -> None:
    state = "recorded" if created else "unchanged (already recorded)"
    click.echo(f"{event.kind} {event.change_id} of {_scope(event)}: {state}")
    ends = f" to {rfc3339(event.ends_at)}" if event.ends_at else ""
    click.echo(f"  at {rfc3339(event.at)}{ends}, tenant {event.tenant_id}: {event.description}")


@click.group("change")
def change_group() -> None:
    """Record what changed in your system: deploys, prompts, config, lens, model, vendor."""


@change_group.command("record")
@click.option("--surface", "surface_id", help="The surface changed (or --agent).")
@click.option("--agent", "agent_id", help="The agent changed, agent-wide (or --surface).")
@click.option("--kind", type=choice_of(OperatorKind), required=True)
@click.option("--at", type=RFC3339(), required=True, help="When it took effect, RFC 3339 UTC.")
@click.option("--description", required=True, help="What changed, for the people reading it.")
@click.option("--id", "change_id", help="Your id for it: recording it again is a no-op.")
@click.option("--actor", help="Who made the change (default: your login name).")
@click.option(
    "--artifact", "artifact_id", help="What was deployed or changed (a service, a prompt)."
)
@click.option("--artifact-version", help="Its version.")
@tenant_option
@store_options
def record_command(
    surface_id: str | None,
    agent_id: str | None,
    kind: str,
    at: dt.datetime,
    description: str,
    change_id: str | None,
    actor: str | None,
    artifact_id: str | None,
    artifact_version: str | None,
    tenant: str | None,
    store_url: str | None,
    data_dir: str | None,
    as_json: bool,
) -> None:
    """Record a change of a surface (or agent-wide) at a time. Drift attributes a shift
    that starts at it to its kind's layer: deploy, prompt, config -> substrate; lens ->
    lens; model, vendor -> light source; other -> none (docs/changes.md)."""
    from schemas.changelog import record_change
    from schemas.changes import ChangeRecord
    from schemas.times import utc_now

    record = _validated(
        ChangeRecord,
        {
            "surfaceId": surface_id, "agentId": agent_id, "kind": kind, "at": at,
            "description": description, "id": change_id, "actor": actor or _login(),
            "artifactId": artifact_id, "artifactVersion": artifact_version,
        },
        "change",
    )  # fmt: skip
    event, created = _write(
        store_url,
        data_dir,
        tenant,
        lambda store, owner: record_change(store, owner, record, utc_now()),
    )
    if as_json:
        emit_json(event.to_json() | {"created": created})
    else:
        _print_recorded(event, created)


@click.group("availability")
def availability_group() -> None:
    """Availability marks: when a light source or surface could not be evaluated."""


@availability_group.command("mark")
@click.option("--light-source", "light_source_id", help="The vendor (id or alias) unavailable.")
@click.option("--surface", "surface_id", help="Only this surface (alone: the surface itself).")
@click.option("--agent", "agent_id", help="Only this agent's surfaces.")
@click.option("--from", "start", type=RFC3339(), help="Unavailable from T, RFC 3339 UTC.")
@click.option("--to", "end", type=RFC3339(), help="Until T (available again at T).")
@click.option("--reason", help="Why, e.g. vendor-outage.")
@click.option("--id", "change_id", help="Your id for it: marking it again is a no-op.")
@click.option("--actor", help="Who marked it (default: your login name).")
@tenant_option
@store_options
def mark_command(
    light_source_id: str | None,
    surface_id: str | None,
    agent_id: str | None,
    start: dt.datetime | None,
    end: dt.datetime | None,
    reason: str | None,
    change_id: str | None,
    actor: str | None,
    tenant: str | None,
    store_url: str | None,
    data_dir: str | None,
    as_json: bool,
) -> None:
    """Mark an interval (paired: --from and --to) or one transition (single: --from T
    alone, it became unavailable at T; --to T alone, it came back at T). Drift brackets
    the interval (reason `availability`) on every surface the light source served."""
    from schemas.changelog import mark_availability
    from schemas.changes import AvailabilityMark
    from schemas.times import utc_now

    if start is None and end is None:
        raise click.UsageError("give --from (and --to for a known interval), or --to alone")
    paired = start is not None and end is not None
    fields: dict[str, Any] = {
        "mode": "paired" if paired else "single",
        "lightSourceId": light_source_id, "surfaceId": surface_id, "agentId": agent_id,
        "reason": reason, "id": change_id, "actor": actor or _login(),
    }  # fmt: skip
    if paired:
        fields |= {"unreachableFrom": start, "unreachableUntil": end}
    else:
        fields |= {"transition": "unavailable" if end is None else "available", "at": start or end}
    mark = _validated(AvailabilityMark, fields, "availability mark")
    event, created = _write(
        store_url,
        data_dir,
        tenant,
        lambda store, owner: mark_availability(store, owner, mark, utc_now()),
    )
    if as_json:
        emit_json(mark_answer(event, created))
    else:
        _print_recorded(event, created)


@click.command("changes")
@click.option(
    "--surface", "surface_id", help="A surface's changes (with its agents' agent-wide ones)."
)
@click.option("--agent", "agent_id", help="An agent's changes.")
@click.option("--kind", "kinds", multiple=True, type=click.Choice(KINDS), help="Only these kinds.")
@click.option("--since", type=RFC3339(), help="From T, RFC 3339 UTC (default: the first).")
@click.option("--until", type=RFC3339(), help="Before T (default: now and after).")
@tenant_option
@store_options
def changes_command(
    surface_id: str | None,
    agent_id: str | None,
    kinds: tuple[str, ...],
    since: dt.datetime | None,
    until: dt.datetime | None,
    tenant: str | None,
    store_url: str | None,
    data_dir: str | None,
    as_json: bool,
) -> None:
    """The change events of a tenant, oldest first: contract versions, fixture approvals
    and rejections, variance lifecycle decisions, topology scans, and the deploys,
    changes and availability marks recorded with `change record` and `availability
    mark`. Of a surface: its own, its agents' agent-wide ones, tenant-wide ones, and
    availability marks of the light sources that served it in the window."""
    from holonograph.cli.options import open_store_or_exit
    from holonograph.cli.tenants import tenant_or_exit
    from schemas.changelog import ChangeQuery, list_changes

    if since is not None and until is not None and until <= since:
        raise click.BadParameter("--until must be after --since", param_hint="--until")
    store = open_store_or_exit(store_url, data_dir)
    query = ChangeQuery(
        tenant_id=tenant_or_exit(store, tenant),
        since=since,
        until=until,
        surface_id=surface_id,
        agent_id=agent_id,
        kinds=kinds,
    )
    try:
        found = list_changes(store, query)
    finally:
        store.close()
    if as_json:
        emit_json(
            {
                "tenantId": query.tenant_id, "surfaceId": surface_id, "agentId": agent_id,
                "since": since, "until": until, "count": len(found),
                "changes": [e.to_json() for e in found],
            }
        )  # fmt: skip
        return
    if not found:
        where = f"surface {surface_id}" if surface_id else f"agent {agent_id}" if agent_id else ""
        window = f" from {rfc3339(since)}" if since else ""
        window += f" until {rfc3339(until)}" if until else ""
        click.echo(f"no change events{' of ' + where if where else ''}{window}")
        return
    rows = [
        [e.at, e.kind, _scope(e), e.artifact_version or e.artifact_id or "", e.actor or "",
         e.description]
        for e in found
    ]  # fmt: skip
    click.echo(format_table(["at", "kind", "of", "version", "actor", "description"], rows))


def register(group: click.Group) -> None:
    group.add_command(change_group)
    group.add_command(availability_group)
    group.add_command(changes_command)
