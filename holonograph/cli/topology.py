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
from typing import Any

import click

from holonograph.cli.documents import load_document
from holonograph.cli.errors import EXIT_FINDING, EXIT_USAGE, CommandFailed
from holonograph.cli.jobs import (
    CommandStores,
    Rendering,
    given_limits,
    job_limit_options,
    request_from,
    run_command,
    show,
)
from holonograph.cli.options import RFC3339, open_store_or_exit, store_options
from holonograph.cli.tenants import tenant_option
from holonograph.limits import JobOverLimit
from holonograph.runner import execute, scope
from processors.jobs import JobError, NotFound
from processors.names import UnknownName
from schemas.events import DEFAULT_TENANT
from schemas.times import utc_now
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
@job_limit_options
@store_options
def inventory_command(
    inventory_file: str, tenant: str, store_url: str | None, data_dir: str | None, as_json: bool
) -> None:
    """Store FILE.json (`-`: stdin), the code's structural inventory of an agent."""
    from processors.topology.inventory import JOB, Report, Request

    inventory = load_inventory(inventory_file)
    request = Request.model_validate({**dict(inventory), "tenant": tenant})

    def text(report: Report) -> str:
        posted = report.posted
        state = "stored" if posted.created else "unchanged: already stored"
        return (
            f"inventory {posted.inventory_id} of {inventory.agent_id} ({posted.consumer_id},"
            f" {len(inventory.surfaces)} surfaces, captured {posted.to_json()['capturedAt']}):"
            f" {state}"
        )

    # A write: the first inventory may be what creates the store.
    open_store_or_exit(store_url, data_dir, write=True).close()
    rendering = Rendering(text)
    run_command(JOB, request, rendering, store_url=store_url, data_dir=data_dir, as_json=as_json)


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
@job_limit_options
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
    from processors.topology.scan import JOB, Report, Request

    _window(since, until)
    flags = {"agent_id": agent, "since": since, "until": until, "record": record,
             "fail_under": fail_under, "examples": examples, "tenant": tenant}  # fmt: skip
    request = request_from(Request, flags)
    rendering: Rendering[Report] = Rendering(lambda report: _print_scan(report.to_json()))
    run_command(JOB, request, rendering, store_url=store_url, data_dir=data_dir, as_json=as_json)


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
@job_limit_options
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
    from processors.topology.bootstrap import JOB, Request

    _window(since, until)
    flags = {"surface_id": surface, "since": since, "until": until, "agent_id": agent,
             "min_count": min_count, "min_presence": min_presence, "tenant": tenant}  # fmt: skip
    request = request_from(Request, flags)
    stores = CommandStores(store_url, data_dir)
    try:
        limits = given_limits()
        report = execute(JOB, scope(JOB, request, stores, limits), stores, utc_now, limits)
    except JobOverLimit as err:
        raise CommandFailed(str(err), EXIT_USAGE, err.hint) from None
    except UnknownName as err:  # a name the tenant never had events for: a typo
        raise CommandFailed(str(err), EXIT_USAGE, err.hint) from None
    except NotFound as err:  # no traffic to propose from: what the command looked for
        raise CommandFailed(str(err), EXIT_FINDING, err.hint) from None
    except JobError as err:
        raise CommandFailed(str(err), EXIT_USAGE, err.hint) from None
    finally:
        stores.close()
    show(report, Rendering(lambda r: _print_bootstrap(r.to_json())), as_json)


def _print_bootstrap(report: dict[str, Any]) -> str:
    out: list[str] = []
    out.append(
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
            out.append(
                f"  {label} {c['id']}{shape}: {c['inference']}, on {ev['count']} events"
                f" ({ev['presenceShare']:.0%}){why}"
            )
    out.append("draft surface entry (deterministic candidates):")
    out.append(json.dumps(report["surface"], indent=2))
    if report["contract"] is not None:
        base = report["basedOnVersionId"]
        over = f" over version {base}" if base else ""
        out.append(f"--json's `contract` holds the agent's whole contract with it{over}.")
    return "\n".join(out)


def _examples(block: dict[str, Any], key: str = "") -> str:
    shown = [e[key] if key else e for e in block["examples"]]
    more = block["count"] - len(shown)
    return ", ".join(str(s) for s in shown) + (f" (+{more} more)" if more > 0 else "")


def _print_scan(report: dict[str, Any]) -> str:
    out: list[str] = []
    cov = report["coverage"]
    ratio = "-" if cov["ratio"] is None else f"{cov['ratio']:.3f}"
    out.append(
        f"agent {report['agentId']} (tenant {report['tenantId']}),"
        f" {report['since']} to {report['until']}:"
        f" contract {report['contractVersionId'] or '(none)'},"
        f" {len(report['inventories'])} inventories"
    )
    out.append(
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
        out.append(
            f"  surface {surface['id']}: {surface['events']['count']} events,"
            f" coverage {scov['observed']}/{scov['declared']}"
        )
        for field, label in labels.items():
            lattice = surface[field]
            if lattice["declaredNotObserved"]["count"]:
                missing = _examples(lattice["declaredNotObserved"])
                out.append(f"    {label} declared, not observed: {missing}")
            if lattice["observedNotDeclared"]["count"]:
                out.append(
                    f"    {label} observed, not declared:"
                    f" {_examples(lattice['observedNotDeclared'], 'id')}"
                )
        if surface["retirementCandidates"]["count"]:
            out.append(
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
            out.append(f"  {label}: {ids}")
    gate = report["gate"]
    verdict = "passed" if gate["passed"] else "failed: " + "; ".join(gate["reasons"])
    recorded = f", recorded as {report['scanId']}" if report["recorded"] else ""
    out.append(f"  gate {verdict}{recorded}")
    return "\n".join(out)


def register(group: click.Group) -> None:
    group.add_command(topology)
