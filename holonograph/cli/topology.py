"""`holonograph topology inventory | scan | bootstrap`: the topology scanner.

`inventory` stores what an agent's code says exists; `scan` compares the agent's
contract, its events in a window and its latest inventories per surface, and exits 1
when the gate fails (any gap; with `--fail-under`, coverage below it), so a clean scan
can gate a deploy; `bootstrap` proposes a contract surface entry from a surface's
traffic. Files are validated before the store is opened.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from typing import Any

import click

from holonograph.cli.documents import load_document
from holonograph.cli.errors import EXIT_FINDING, CommandFailed
from holonograph.cli.options import RFC3339, emit_json, open_store_or_exit, store_options
from holonograph.cli.tenants import tenant_option, tenant_or_exit
from schemas.events import DEFAULT_TENANT
from schemas.topology import StructuralInventory


def load_inventory(path: str) -> StructuralInventory:
    """The inventory in `path` (`-`: stdin), or exit 2 listing every problem."""
    return load_document(path, StructuralInventory, "structural inventory", "nothing was stored")


def _window(since: dt.datetime, until: dt.datetime) -> None:
    if until <= since:
        raise click.BadParameter("--until must be after --since", param_hint="--until")


@click.group("topology")
def topology() -> None:
    """Structural inventories, coverage scans and contract bootstrap."""


@topology.command("inventory")
@click.argument("inventory_file")
@click.option("--tenant", default=DEFAULT_TENANT, show_default=True, help="Tenant owning it.")
@store_options
def inventory_command(
    inventory_file: str, tenant: str, store_url: str | None, data_dir: str | None, as_json: bool
) -> None:
    """Store FILE.json (`-`: stdin), the code's structural inventory of an agent."""
    from processors.topology.inventory import post_inventory
    from schemas.times import utc_now

    inventory = load_inventory(inventory_file)
    store = open_store_or_exit(store_url, data_dir, write=True)
    try:
        posted = post_inventory(store, tenant, inventory, utc_now())
    finally:
        store.close()
    if as_json:
        emit_json(posted.to_json())
        return
    state = "stored" if posted.created else "unchanged: already stored"
    click.echo(
        f"inventory {posted.inventory_id} of {inventory.agent_id} ({posted.consumer_id},"
        f" {len(inventory.surfaces)} surfaces, captured {posted.to_json()['capturedAt']}): {state}"
    )


@topology.command("scan")
@click.option("--agent", required=True, help="The agent id whose contract is scanned.")
@click.option("--since", type=RFC3339(), required=True, help="Window start (inclusive).")
@click.option("--until", type=RFC3339(), required=True, help="Window end (exclusive).")
@click.option("--record", is_flag=True, help="Store the report as a topology-scan analysis event.")
@click.option(
    "--fail-under",
    type=click.FloatRange(0.0, 1.0),
    help="Gate on coverage alone: exit 1 when it is below RATIO (default: exit 1 on any gap).",
)
@click.option(
    "--examples",
    type=click.IntRange(0, 1000),
    default=10,
    show_default=True,
    help="Items listed per list of the report (every list also says its count).",
)
@tenant_option
@store_options
def scan_command(
    agent: str,
    since: dt.datetime,
    until: dt.datetime,
    record: bool,
    fail_under: float | None,
    examples: int,
    tenant: str | None,
    store_url: str | None,
    data_dir: str | None,
    as_json: bool,
) -> None:
    """Declared vs observed vs inventoried, per surface; exit 1 when the gate fails."""
    from processors.topology.scan import ScanWindow, record_scan, run_scan
    from schemas.times import utc_now

    _window(since, until)
    store = open_store_or_exit(store_url, data_dir, write=record)
    owner = tenant_or_exit(store, tenant) or DEFAULT_TENANT
    try:
        report = run_scan(
            store,
            ScanWindow(owner, agent, since, until),
            utc_now(),
            fail_under=fail_under,
            examples=examples,
        )
        if record:
            record_scan(store, report)
    finally:
        store.close()
    shape = report.to_json()
    if as_json:
        emit_json(shape)
    else:
        _print_scan(shape)
    if not report.passed:
        sys.exit(EXIT_FINDING)


@topology.command("bootstrap")
@click.option("--surface", required=True, help="The surface whose traffic is read.")
@click.option("--since", type=RFC3339(), required=True, help="Window start (inclusive).")
@click.option("--until", type=RFC3339(), required=True, help="Window end (exclusive).")
@click.option("--agent", default="", help="Only this agent's events (default: every agent's).")
@click.option(
    "--min-count",
    type=click.IntRange(1),
    default=20,
    show_default=True,
    help="Fewest events an item must be on to be deterministic.",
)
@click.option(
    "--min-presence",
    type=click.FloatRange(0.0, 1.0),
    default=0.9,
    show_default=True,
    help="Smallest share of the surface's events an item must be on to be deterministic.",
)
@tenant_option
@store_options
def bootstrap_command(
    surface: str,
    since: dt.datetime,
    until: dt.datetime,
    agent: str,
    min_count: int,
    min_presence: float,
    tenant: str | None,
    store_url: str | None,
    data_dir: str | None,
    as_json: bool,
) -> None:
    """Propose dimensions, cohort tags and substrate columns for a surface from traffic."""
    from processors.topology.bootstrap import BootstrapWindow, Thresholds, propose
    from schemas.times import rfc3339

    _window(since, until)
    store = open_store_or_exit(store_url, data_dir)
    owner = tenant_or_exit(store, tenant) or DEFAULT_TENANT
    try:
        report = propose(
            store,
            BootstrapWindow(owner, surface, since, until, agent),
            Thresholds(min_count, min_presence),
        )
    finally:
        store.close()
    if report is None:
        raise CommandFailed(
            f"surface {surface} has no events in tenant {owner}"
            f" from {rfc3339(since)} to {rfc3339(until)}",
            EXIT_FINDING,
            "widen the window, or check the surface id and --tenant",
        )
    if as_json:
        emit_json(report)
    else:
        _print_bootstrap(report)


def _print_bootstrap(report: dict[str, Any]) -> None:
    click.echo(
        f"surface {report['surfaceId']} (tenant {report['tenantId']}, agent"
        f" {report['agentId'] or '-'}): {report['events']} events"
        f" from {report['since']} to {report['until']}"
    )
    labels = {"dimensions": "dimension", "cohortTags": "cohort tag", "substrateColumns": "column"}
    for field, label in labels.items():
        for c in report["candidates"][field]["examples"]:
            ev = c["evidence"]
            shape = f" {c['type']}" if c.get("type") else ""
            why = f" ({'; '.join(c['reasons'])})" if c["reasons"] else ""
            click.echo(
                f"  {label} {c['id']}{shape}: {c['inference']}, on {ev['count']} events"
                f" ({ev['presenceShare']:.0%}){why}"
            )
    click.echo("draft surface entry (deterministic candidates):")
    click.echo(json.dumps(report["surface"], indent=2))
    if report["contract"] is not None:
        base = report["basedOnVersionId"]
        over = f" over version {base}" if base else ""
        click.echo(f"--json's `contract` holds the agent's whole contract with it{over}.")


def _examples(block: dict[str, Any], key: str = "") -> str:
    shown = [e[key] if key else e for e in block["examples"]]
    more = block["count"] - len(shown)
    return ", ".join(str(s) for s in shown) + (f" (+{more} more)" if more > 0 else "")


def _print_scan(report: dict[str, Any]) -> None:
    cov = report["coverage"]
    ratio = "-" if cov["ratio"] is None else f"{cov['ratio']:.3f}"
    click.echo(
        f"agent {report['agentId']} (tenant {report['tenantId']}),"
        f" {report['since']} to {report['until']}:"
        f" contract {report['contractVersionId'] or '(none)'},"
        f" {len(report['inventories'])} inventories"
    )
    click.echo(
        f"  coverage {cov['observed']}/{cov['declared']} declared items observed ({ratio}),"
        f" {report['gaps']} gaps, {report['retirementCandidates']} retirement candidates"
    )
    labels = {
        "dimensions": "dimensions",
        "cohortTags": "cohort tags",
        "substrateColumns": "substrate columns",
        "lightSources": "light sources",
    }
    for surface in report["surfaces"]:
        scov = surface["coverage"]
        click.echo(
            f"  surface {surface['id']}: {surface['events']['count']} events,"
            f" coverage {scov['observed']}/{scov['declared']}"
        )
        for field, label in labels.items():
            lattice = surface[field]
            if lattice["declaredNotObserved"]["count"]:
                missing = _examples(lattice["declaredNotObserved"])
                click.echo(f"    {label} declared, not observed: {missing}")
            if lattice["observedNotDeclared"]["count"]:
                click.echo(
                    f"    {label} observed, not declared:"
                    f" {_examples(lattice['observedNotDeclared'], 'id')}"
                )
        if surface["retirementCandidates"]["count"]:
            click.echo(
                "    retirement candidates (seen before the window only):"
                f" {_examples(surface['retirementCandidates'], 'id')}"
            )
    for key, label in (
        ("quietSurfaces", "quiet surfaces (no events in the window)"),
        ("undeclaredSurfaces", "undeclared surfaces (observed, not in the contract)"),
        ("inventoryOnlySurfaces", "inventory-only surfaces (not in the contract)"),
        ("declaredNotInventoried", "declared surfaces the inventories do not name"),
    ):
        block = report[key]
        if block["count"]:
            ids = _examples(block, "id" if key == "undeclaredSurfaces" else "")
            click.echo(f"  {label}: {ids}")
    gate = report["gate"]
    verdict = "passed" if gate["passed"] else "failed: " + "; ".join(gate["reasons"])
    recorded = f", recorded as {report['scanId']}" if report["recorded"] else ""
    click.echo(f"  gate {verdict}{recorded}")


def register(group: click.Group) -> None:
    group.add_command(topology)
