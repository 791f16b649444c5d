"""The contract registry in the store: the one writer of `holonograph.contracts`, and
the reads every consumer shares (the CLI, the receiver, the topology scanner).

Versions are appended, never changed. The active version of an agent is its latest
registration; `previous_version_id` chains each version to the one it replaced, so a
summary can say what a registration removed. Registering a contract identical to the
active one stores nothing and answers the active version (`created` false), so a
retried or redelivered registration is one version.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from schemas.contracts import (
    Contract,
    ContractSummary,
    ContractVersion,
    summarize,
    version_id,
)
from schemas.store import Store
from schemas.tables import CONTRACTS
from schemas.times import from_store_time, to_store_time

_COLUMNS = "tenant_id, version_id, previous_version_id, registered_at, contract"
_LATEST = f"""
SELECT {_COLUMNS} FROM {CONTRACTS.qualified} FINAL
WHERE tenant_id = {{tenant:String}} AND agent_id = {{agent:String}}
ORDER BY registered_at DESC, version_id DESC LIMIT 1
"""
_ONE = f"""
SELECT {_COLUMNS} FROM {CONTRACTS.qualified} FINAL
WHERE tenant_id = {{tenant:String}} AND agent_id = {{agent:String}}
  AND version_id = {{version:String}}
"""
_HISTORY = f"""
SELECT {_COLUMNS} FROM {CONTRACTS.qualified} FINAL
WHERE tenant_id = {{tenant:String}} AND agent_id = {{agent:String}}
ORDER BY registered_at DESC, version_id DESC
"""
_ALL_ACTIVE = f"""
SELECT {_COLUMNS} FROM {CONTRACTS.qualified} FINAL
ORDER BY tenant_id, agent_id, registered_at DESC, version_id DESC
LIMIT 1 BY tenant_id, agent_id
"""


@dataclass(frozen=True)
class Registration:
    summary: ContractSummary
    version: ContractVersion
    created: bool


def _version(
    row: tuple[Any, ...], known: Mapping[str, ContractVersion] | None = None
) -> ContractVersion:
    tenant, vid, previous, registered_at, text = row
    if known is not None and str(vid) in known:
        return known[str(vid)]  # a version id names one content: nothing to parse again
    return ContractVersion(
        tenant_id=str(tenant),
        version_id=str(vid),
        previous_version_id=str(previous) or None,
        registered_at=from_store_time(registered_at),
        contract=Contract.model_validate(json.loads(text)),
    )


def new_version(
    tenant_id: str, contract: Contract, active: ContractVersion | None, now: dt.datetime
) -> ContractVersion:
    """The version registering `contract` over `active` makes (not stored)."""
    previous = active.version_id if active else None
    now = from_store_time(now)
    return ContractVersion(
        tenant_id=tenant_id,
        version_id=version_id(tenant_id, contract, previous),
        previous_version_id=previous,
        # the store keeps milliseconds: a readback says the same time
        registered_at=now.replace(microsecond=now.microsecond // 1000 * 1000),
        contract=contract,
    )


def store_version(store: Store, version: ContractVersion) -> None:
    """Append one version (a redelivered one collapses: same key, same row)."""
    contract = version.contract
    row = [
        version.tenant_id,
        contract.agent_id,
        version.version_id,
        version.previous_version_id or "",
        to_store_time(version.registered_at),
        contract.digest(),
        json.dumps(contract.to_json(), sort_keys=True, separators=(",", ":")),
    ]
    store.insert(CONTRACTS.qualified, [row], CONTRACTS.columns)


def register(store: Store, tenant_id: str, contract: Contract, now: dt.datetime) -> Registration:
    """Make `contract` the agent's active version unless it already is."""
    active = active_version(store, tenant_id, contract.agent_id)
    if active is not None and active.contract.digest() == contract.digest():
        return Registration(summary_of(store, active), active, created=False)
    version = new_version(tenant_id, contract, active, now)
    store_version(store, version)
    return Registration(
        summarize(version, active.contract if active else None), version, created=True
    )


def active_version(store: Store, tenant_id: str, agent_id: str) -> ContractVersion | None:
    """The agent's active contract version in `tenant_id`, None when it has none."""
    rows = store.query(_LATEST, {"tenant": tenant_id, "agent": agent_id}).rows
    return _version(rows[0]) if rows else None


def find_version(
    store: Store, tenant_id: str, agent_id: str, version: str
) -> ContractVersion | None:
    rows = store.query(_ONE, {"tenant": tenant_id, "agent": agent_id, "version": version}).rows
    return _version(rows[0]) if rows else None


def versions_by_id(
    store: Store, keys: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], ContractVersion]:
    """The versions named by (tenant, version id), as the events that were checked
    against them record them; ids the store does not hold are left out."""
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    # Two arrays, not one of tuples: a parameter sent through a store's admin endpoint
    # travels as JSON, where a tuple is a list ClickHouse will not read as a Tuple.
    rows = store.query(
        f"SELECT {_COLUMNS} FROM {CONTRACTS.qualified} FINAL WHERE has(arrayZip("
        "{tenants:Array(String)}, {versions:Array(String)}), (tenant_id, version_id))",
        {"tenants": [t for t, _ in wanted], "versions": [v for _, v in wanted]},
    ).rows
    found = [_version(r) for r in rows]
    return {(v.tenant_id, v.version_id): v for v in found}


def history(store: Store, tenant_id: str, agent_id: str) -> list[ContractVersion]:
    """Every version of the agent's contract, newest first."""
    return [
        _version(r) for r in store.query(_HISTORY, {"tenant": tenant_id, "agent": agent_id}).rows
    ]


def active_versions(
    store: Store, known: Mapping[str, ContractVersion] | None = None
) -> list[ContractVersion]:
    """The active version of every (tenant, agent): what a receiver enforces. Versions
    in `known` (by version id: what the receiver already holds) are reused, not parsed."""
    return [_version(r, known) for r in store.query(_ALL_ACTIVE).rows]


def summary_of(store: Store, version: ContractVersion) -> ContractSummary:
    """The readback of a stored version, its removals against the version it replaced."""
    previous = None
    if version.previous_version_id:
        previous = find_version(
            store, version.tenant_id, version.agent_id, version.previous_version_id
        )
    return summarize(version, previous.contract if previous else None)


def tenants_of(store: Store, agent_id: str) -> list[str]:
    """The tenants holding a contract of `agent_id`, sorted."""
    rows = store.query(
        f"SELECT DISTINCT tenant_id FROM {CONTRACTS.qualified} WHERE agent_id = {{agent:String}}"
        " ORDER BY tenant_id",
        {"agent": agent_id},
    ).rows
    return [str(t) for (t,) in rows]
