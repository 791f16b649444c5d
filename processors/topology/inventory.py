"""The one writer of `holonograph.structural_inventories`, and the read the scan uses.

An inventory is stored once: re-posting the identical body answers the stored id with
`created` false. The scan reads, per consumer of the agent, the inventory captured
last, and takes the union of their surfaces: several services of one agent may each
post what they know.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from typing import Any

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

from processors.jobs import Job, JobRequest, never_a_finding
from schemas.events import DEFAULT_TENANT
from schemas.store import Store
from schemas.tables import STRUCTURAL_INVENTORIES
from schemas.times import Clock, from_store_time, to_store_time
from schemas.topology import StructuralInventory, inventory_id

_FOUND = f"""
SELECT captured_at FROM {STRUCTURAL_INVENTORIES.qualified} FINAL
WHERE tenant_id = {{tenant:String}} AND agent_id = {{agent:String}}
  AND inventory_id = {{inventory:String}}
"""
_LATEST = f"""
SELECT inventory_id, consumer_id, inventory_kind, captured_at, surface_ids,
       mapValues(dispatch_map)
FROM {STRUCTURAL_INVENTORIES.qualified} FINAL
WHERE tenant_id = {{tenant:String}} AND agent_id = {{agent:String}}
ORDER BY consumer_id, captured_at DESC, recorded_at DESC, inventory_id DESC
LIMIT 1 BY consumer_id
"""


@dataclass(frozen=True)
class Posted:
    inventory_id: str
    consumer_id: str
    captured_at: dt.datetime
    created: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "inventoryId": self.inventory_id,
            "consumerId": self.consumer_id,
            "capturedAt": from_store_time(self.captured_at).isoformat().replace("+00:00", "Z"),
            "created": self.created,
        }


@dataclass(frozen=True)
class LatestInventory:
    """One consumer's latest inventory of the agent."""

    inventory_id: str
    consumer_id: str
    kind: str
    captured_at: dt.datetime
    surfaces: tuple[str, ...]


def post_inventory(
    store: Store, tenant_id: str, inventory: StructuralInventory, now: dt.datetime
) -> Posted:
    """Store `inventory` unless the identical one is stored already."""
    found_id = inventory_id(tenant_id, inventory)
    params = {"tenant": tenant_id, "agent": inventory.agent_id, "inventory": found_id}
    if store.query(_FOUND, params).rows:
        return Posted(found_id, inventory.consumer_id, inventory.captured_at, created=False)
    row = [
        tenant_id,
        inventory.agent_id,
        inventory.consumer_id,
        found_id,
        inventory.inventory_kind,
        to_store_time(inventory.captured_at),
        list(inventory.surface_ids or ()),
        dict(inventory.dispatch_map or {}),
        inventory.digest(),
        to_store_time(now),
    ]
    store.insert(STRUCTURAL_INVENTORIES.qualified, [row], STRUCTURAL_INVENTORIES.columns)
    return Posted(found_id, inventory.consumer_id, inventory.captured_at, created=True)


def latest_inventories(store: Store, tenant_id: str, agent_id: str) -> list[LatestInventory]:
    """Per consumer of `agent_id`, its latest captured inventory (sorted by consumer)."""
    rows = store.query(_LATEST, {"tenant": tenant_id, "agent": agent_id}).rows
    return [
        LatestInventory(
            inventory_id=str(inv),
            consumer_id=str(consumer),
            kind=str(kind),
            captured_at=from_store_time(captured),
            surfaces=tuple(sorted(set(surface_ids) | set(mapped))),
        )
        for inv, consumer, kind, captured, surface_ids, mapped in rows
    ]


# --- the job (processors/jobs.py): POST /lens/topology/structural-inventory


class InventoryRequest(StructuralInventory, JobRequest):
    """The Guide's structural inventory body (chapter 9): what the agent's code says
    exists; stored once per identical body."""

    def persists(self) -> bool:
        return True


Request = InventoryRequest


@dataclass(frozen=True)
class Report:
    """The inventory as posted: its id, and whether this call stores it (`created`)."""

    posted: Posted
    inventory: StructuralInventory
    tenant_id: str
    recorded_at: dt.datetime

    def to_json(self) -> dict[str, Any]:
        return self.posted.to_json()


@with_config(ConfigDict(extra="forbid"))
class PostedDocument(TypedDict):
    inventoryId: str
    consumerId: str
    capturedAt: str
    created: bool


def run(store: Store, request: InventoryRequest, clock: Clock) -> Report:
    """The inventory's id, and whether the identical one is stored already."""
    tenant = request.tenant or DEFAULT_TENANT
    inventory = StructuralInventory.model_validate(request.model_dump(exclude={"tenant"}))
    found_id = inventory_id(tenant, inventory)
    params = {"tenant": tenant, "agent": inventory.agent_id, "inventory": found_id}
    created = not store.query(_FOUND, params).rows
    posted = Posted(found_id, inventory.consumer_id, inventory.captured_at, created=created)
    return Report(posted, inventory, tenant, clock())


def persist(store: Store, report: Report) -> Report:
    """Store the inventory unless it was stored already (`post_inventory` re-checks)."""
    if not report.posted.created:
        return report
    posted = post_inventory(store, report.tenant_id, report.inventory, report.recorded_at)
    return dataclasses.replace(report, posted=posted)


finding = never_a_finding

JOB = Job(
    name="structural-inventory",
    request=InventoryRequest,
    document=PostedDocument,
    run=run,
    persist=persist,
    finding=finding,
    owner_tenant=True,
)
