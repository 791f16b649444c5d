"""Structural inventories: what an agent's code says exists (the Guide's chapter 9).

The topology scanner compares three sources per surface: the contract (declared), the
events (observed) and the code's structural inventory. An inventory is the Guide's
JSON body, validated as strictly as a contract (a person or a deploy script writes
it): `surface-ids` carries `surfaceIds[]`, `dispatch-map` a `dispatchMap` of routing
key -> surface id, never both. Its id is a function of its tenant and content, so an
identical re-post is the same inventory.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import Any, Literal

from pydantic import AwareDatetime, Field, field_validator, model_validator

from schemas.conformance import require_unique
from schemas.contracts import MAX_ITEMS, Id, Model

InventoryKind = Literal["surface-ids", "dispatch-map"]


class StructuralInventory(Model):
    agent_id: Id
    consumer_id: Id
    inventory_kind: InventoryKind
    surface_ids: tuple[Id, ...] | None = Field(default=None, max_length=MAX_ITEMS)
    dispatch_map: dict[str, Id] | None = Field(default=None, max_length=MAX_ITEMS)
    captured_at: AwareDatetime

    @field_validator("captured_at")
    @classmethod
    def _utc(cls, value: dt.datetime) -> dt.datetime:
        return value.astimezone(dt.UTC)

    @field_validator("dispatch_map")
    @classmethod
    def _keys(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for key in value or {}:
            if not key or len(key) > 256:
                raise ValueError("dispatch map keys: 1 to 256 characters")
        return value

    @model_validator(mode="after")
    def _one_shape(self) -> StructuralInventory:
        if self.inventory_kind == "surface-ids":
            if self.surface_ids is None or self.dispatch_map is not None:
                raise ValueError(
                    "inventoryKind surface-ids carries surfaceIds[] and no dispatchMap"
                )
            if not self.surface_ids:
                raise ValueError("surfaceIds: at least one surface id")
            require_unique(self.surface_ids, "surfaceIds")
        else:
            if self.dispatch_map is None or self.surface_ids is not None:
                raise ValueError("inventoryKind dispatch-map carries dispatchMap and no surfaceIds")
            if not self.dispatch_map:
                raise ValueError("dispatchMap: at least one entry")
        return self

    @property
    def surfaces(self) -> tuple[str, ...]:
        """The surface ids the inventory names, sorted, each once."""
        named = set(self.surface_ids or ()) | set((self.dispatch_map or {}).values())
        return tuple(sorted(named))

    def to_json(self) -> dict[str, Any]:
        shape = super().to_json()
        shape["capturedAt"] = self.captured_at.isoformat().replace("+00:00", "Z")
        return shape

    def digest(self) -> str:
        """sha256 of the normalized body: the same inventory posted twice is one."""
        canonical = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


def inventory_id(tenant_id: str, inventory: StructuralInventory) -> str:
    """Deterministic in (tenant, content): an identical re-post finds the stored one."""
    key = f"{tenant_id}\x1f{inventory.digest()}"
    return "inv_" + hashlib.sha256(key.encode()).hexdigest()[:24]
