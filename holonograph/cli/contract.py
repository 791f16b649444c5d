"""`holonograph contract register | show | history`: the surface contract registry.

A contract file is validated before the store is opened, so an invalid one is exit 2
with every problem listed and nothing stored. `show` and `history` print the Guide's
ContractSummary (one per version for `history`); a store holding the agent's contract
in several tenants needs `--tenant`.
"""

from __future__ import annotations

from typing import Any

import click

from holonograph.cli.documents import load_document
from holonograph.cli.errors import EXIT_FINDING, EXIT_USAGE, CommandFailed
from holonograph.cli.options import emit_json, open_store_or_exit, store_options
from schemas.contracts import Contract, ContractSummary
from schemas.events import DEFAULT_TENANT
from schemas.store import Store


def load_contract(path: str) -> Contract:
    """The contract in `path` (`-`: stdin), or exit 2 listing every problem."""
    return load_document(path, Contract, "contract", "nothing was registered")


def _print_summary(summary: ContractSummary, created: bool | None = None) -> None:
    state = (
        "" if created is None else (" (registered)" if created else " (unchanged: already active)")
    )
    click.echo(f"agent {summary.agent_id}: version {summary.version_id}{state}")
    registered = summary.to_json()["registeredAt"]
    click.echo(f"  registered {registered}, previous {summary.previous_version_id or '-'}")
    for surface in summary.surfaces:
        routes = ", ".join("/".join(r.light_sources) for r in surface.routings) or "-"
        click.echo(
            f"  surface {surface.id}: {surface.dimension_count} dimensions"
            f" ({', '.join(d.id for d in surface.dimensions) or '-'}),"
            f" tags {', '.join(surface.cohort_tags) or '-'},"
            f" columns {', '.join(c.id for c in surface.substrate_columns) or '-'},"
            f" routings {routes}"
        )
    for item in summary.removed:
        by = item.superseded_by
        fate = f"superseded by {by.altitude} {by.id}" if by else "retired"
        where = "" if item.altitude == "surface" else f" of surface {item.surface_id}"
        click.echo(f"  removed {item.altitude} {item.id}{where}: {fate}")


def _tenant(store: Store, agent: str, tenant: str | None) -> str:
    """The named tenant, else the only tenant holding the agent's contract."""
    from schemas.registry import tenants_of

    if tenant is not None:
        return tenant
    tenants = tenants_of(store, agent)
    if len(tenants) > 1:
        raise CommandFailed(
            f"agent {agent} has contracts in {len(tenants)} tenants ({', '.join(tenants)})",
            EXIT_USAGE,
            "name one with --tenant",
        )
    return tenants[0] if tenants else DEFAULT_TENANT


def _not_found(agent: str, tenant: str, version: str | None = None) -> CommandFailed:
    what = f"version {version} of agent {agent}" if version else f"contract of agent {agent}"
    return CommandFailed(
        f"tenant {tenant} has no {what}",
        EXIT_FINDING,
        "register one: holonograph contract register FILE.json",
    )


@click.group("contract")
def contract() -> None:
    """Register surface contracts and read back their versions."""


async def _publish(
    kafka: str, topic: str | None, tenant: str, parsed: Contract
) -> tuple[ContractSummary, bool]:
    """Register on the contracts topic, as a `serve --kafka` receiver's endpoint does."""
    from pydantic import ValidationError

    from holonograph.cli.options import invalid_configuration
    from ingest.export.contracts import ContractBook
    from ingest.service.config import KafkaSettings
    from ingest.service.contracts import TopicRegistrar

    try:
        flags: dict[str, Any] = {"kafka": kafka}
        settings = KafkaSettings(**flags)
    except ValidationError as err:
        raise invalid_configuration(err) from None
    assert settings.kafka
    registrar = TopicRegistrar(
        settings.kafka, topic or settings.kafka_contracts_topic, ContractBook(),
        settings.kafka_timeout_ms, f"{settings.kafka_client_id}-cli",
    )  # fmt: skip
    await registrar.start()
    try:
        return await registrar.register(tenant, parsed)
    finally:
        await registrar.stop()


@contract.command("register")
@click.argument("contract_file")
@click.option("--tenant", default=DEFAULT_TENANT, show_default=True, help="Tenant owning it.")
@click.option(
    "--kafka", metavar="BOOTSTRAP", help="Publish to the contracts topic (serve --kafka) instead."
)
@click.option("--kafka-contracts-topic", help="Contract registrations [holonograph.contracts].")
@store_options
def register_command(
    contract_file: str,
    tenant: str,
    kafka: str | None,
    kafka_contracts_topic: str | None,
    store_url: str | None,
    data_dir: str | None,
    as_json: bool,
) -> None:
    """Register FILE.json (`-`: stdin) as its agent's active contract: in the store, or
    with --kafka on the contracts topic every receiver follows (the sink stores it)."""
    import asyncio

    from schemas.registry import register as register_contract
    from schemas.times import utc_now

    parsed = load_contract(contract_file)
    if kafka:
        summary, created = asyncio.run(_publish(kafka, kafka_contracts_topic, tenant, parsed))
    else:
        store = open_store_or_exit(store_url, data_dir, write=True)
        try:
            registration = register_contract(store, tenant, parsed, utc_now())
        finally:
            store.close()
        summary, created = registration.summary, registration.created
    if as_json:
        emit_json(summary.to_json() | {"created": created})
    else:
        _print_summary(summary, created)


@contract.command("show")
@click.option("--agent", required=True, help="The agent id.")
@click.option("--version", "version", help="This version instead of the active one.")
@click.option("--tenant", help="The tenant (default: the only one holding the agent).")
@store_options
def show_command(
    agent: str,
    version: str | None,
    tenant: str | None,
    store_url: str | None,
    data_dir: str | None,
    as_json: bool,
) -> None:
    """The ContractSummary of the agent's active contract (or of --version)."""
    from schemas.registry import active_version, find_version, summary_of

    store = open_store_or_exit(store_url, data_dir)
    try:
        owner = _tenant(store, agent, tenant)
        found = (
            find_version(store, owner, agent, version)
            if version
            else active_version(store, owner, agent)
        )
        if found is None:
            raise _not_found(agent, owner, version)
        summary = summary_of(store, found)
    finally:
        store.close()
    if as_json:
        emit_json(summary.to_json() | {"contract": found.contract.to_json()})
    else:
        _print_summary(summary)


@contract.command("history")
@click.option("--agent", required=True, help="The agent id.")
@click.option("--tenant", help="The tenant (default: the only one holding the agent).")
@store_options
def history_command(
    agent: str, tenant: str | None, store_url: str | None, data_dir: str | None, as_json: bool
) -> None:
    """Every version of the agent's contract, newest first, each as its summary."""
    from schemas.registry import history, summary_of

    store = open_store_or_exit(store_url, data_dir)
    try:
        owner = _tenant(store, agent, tenant)
        summaries: list[Any] = [summary_of(store, v) for v in history(store, owner, agent)]
    finally:
        store.close()
    if not summaries:
        raise _not_found(agent, owner)
    if as_json:
        emit_json([s.to_json() for s in summaries])
        return
    for summary in summaries:
        _print_summary(summary)


def register(group: click.Group) -> None:
    group.add_command(contract)
