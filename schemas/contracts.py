"""Surface contracts: what an agent's surfaces should look like, and their readback.

A contract (the Guide's JSON, camelCase) declares per surface its dimensions, cohort
tag keys, substrate columns and vendor routings. It is validated strictly because a
person writes it and ingest enforces it: an unknown field, a duplicate id or a value
outside a vocabulary is a precise error and nothing is stored. Contracts are versioned
by replacement: `ContractVersion` is one registration, `ContractSummary` its compact
readback, with `removed[]` naming what the previous version declared and this one
does not, and what (if anything) superseded it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    StringConstraints,
    field_serializer,
    field_validator,
    model_validator,
)

from schemas.conformance import require_unique
from schemas.contractbase import Id as Id
from schemas.contractbase import Model as Model
from schemas.events import RunMode
from schemas.genai import GenAIMapping

DimensionType = Literal["score", "boolean"]
Control = Literal["operator", "vendor", "platform", "third-party"]
Visibility = Literal["transparent", "announced", "opaque"]
Semantic = Literal["deployment-state", "diagnostic"]
Altitude = Literal["surface", "dimension", "tag", "column"]

Value = Annotated[str, StringConstraints(min_length=1, max_length=256)]
Text = Annotated[str, StringConstraints(max_length=2000)]
MAX_ITEMS = 1000


class _Declared(Model):
    id: Id
    supersedes: Id | None = None

    @model_validator(mode="after")
    def _not_itself(self) -> _Declared:
        if self.supersedes == self.id:
            raise ValueError(f"{self.id} cannot supersede itself")
        return self


class Dimension(_Declared):
    type: DimensionType


class CohortTag(_Declared):
    """A tag key; in the contract JSON a bare string unless it supersedes another."""


class SubstrateColumn(_Declared):
    control: Control
    visibility: Visibility
    semantic: Semantic
    description: Text | None = None
    values: tuple[Value, ...] | None = Field(default=None, max_length=MAX_ITEMS)

    @model_validator(mode="after")
    def _unique_values(self) -> SubstrateColumn:
        if self.values == ():
            raise ValueError(f"values of column {self.id}: at least one (omit it for any value)")
        require_unique(self.values or (), f"values of column {self.id}")
        return self


class Routing(Model):
    """`lightSourceId`: one vendor, or a multiplex (first the primary, then observers);
    `activeRunModes` absent: every run mode."""

    surface_id: Id
    light_source_id: Id | tuple[Id, ...]
    active_run_modes: tuple[RunMode, ...] | None = None

    @property
    def light_sources(self) -> tuple[str, ...]:
        ids = self.light_source_id
        return (ids,) if isinstance(ids, str) else ids

    @model_validator(mode="after")
    def _shape(self) -> Routing:
        if not self.light_sources:
            raise ValueError("lightSourceId: at least one light source")
        require_unique(self.light_sources, "lightSourceId entries")
        if self.active_run_modes == ():
            raise ValueError("activeRunModes: at least one run mode (omit it for every mode)")
        require_unique(self.active_run_modes or (), "activeRunModes entries")
        return self

    def active_in(self, run_mode: str) -> bool:
        return self.active_run_modes is None or run_mode in self.active_run_modes


def _tag(value: Any) -> Any:
    return {"id": value} if isinstance(value, str) else value


class Surface(_Declared):
    dimensions: tuple[Dimension, ...] = Field(default=(), max_length=MAX_ITEMS)
    cohort_tags: tuple[CohortTag, ...] = Field(default=(), max_length=MAX_ITEMS)
    substrate_columns: tuple[SubstrateColumn, ...] = Field(default=(), max_length=MAX_ITEMS)
    routings: tuple[Routing, ...] = Field(default=(), max_length=MAX_ITEMS)

    @model_validator(mode="before")
    @classmethod
    def _tags_as_objects(cls, data: Any) -> Any:
        if isinstance(data, dict):
            key = "cohortTags" if "cohortTags" in data else "cohort_tags"
            if isinstance(data.get(key), list):
                data = {**data, key: [_tag(t) for t in data[key]]}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Surface:
        require_unique((d.id for d in self.dimensions), f"dimension ids in surface {self.id}")
        require_unique((t.id for t in self.cohort_tags), f"cohort tags in surface {self.id}")
        require_unique(
            (c.id for c in self.substrate_columns), f"substrate column ids in surface {self.id}"
        )
        for routing in self.routings:
            if routing.surface_id != self.id:
                raise ValueError(
                    f"routing surfaceId {routing.surface_id} is not its surface {self.id}"
                )
        return self

    def column(self, column_id: str) -> SubstrateColumn | None:
        return next((c for c in self.substrate_columns if c.id == column_id), None)

    @field_serializer("cohort_tags")
    def _tags_as_written(self, tags: tuple[CohortTag, ...]) -> list[Any]:
        # The Guide writes a tag key as a bare string; only a superseding tag needs more.
        return [t.id if t.supersedes is None else t.to_json() for t in tags]


class Contract(Model):
    """One agent's declaration of its surfaces, as registered; `genai`: how its
    OpenTelemetry GenAI evaluation results map onto them (`schemas.genai`)."""

    agent_id: Id
    surfaces: tuple[Surface, ...] = Field(max_length=MAX_ITEMS)
    genai: GenAIMapping | None = None

    @field_validator("surfaces")
    @classmethod
    def _some_unique_surfaces(cls, surfaces: tuple[Surface, ...]) -> tuple[Surface, ...]:
        if not surfaces:
            raise ValueError("a contract declares at least one surface")
        require_unique((s.id for s in surfaces), "surface ids")
        return surfaces

    @model_validator(mode="after")
    def _genai_on_own_surfaces(self) -> Contract:
        declared = {s.id for s in self.surfaces}
        for rule in self.genai.surfaces if self.genai else ():
            if rule.surface_id not in declared:
                raise ValueError(
                    f"genai surface {rule.surface_id} is not a surface of this contract"
                    f" ({', '.join(sorted(declared))})"
                )
        return self

    def surface(self, surface_id: str) -> Surface | None:
        return next((s for s in self.surfaces if s.id == surface_id), None)

    def digest(self) -> str:
        """sha256 of the normalized contract: an identical re-registration is no change."""
        canonical = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


class SupersededBy(Model):
    altitude: Altitude
    id: str


class Removed(Model):
    """A declared item of the previous version this one no longer declares: retired
    (`supersededBy` null) or promoted/renamed (the item that names it in `supersedes`)."""

    altitude: Altitude
    surface_id: str
    id: str
    superseded_by: SupersededBy | None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


class SurfaceSummary(Model):
    id: str
    dimension_count: int
    dimensions: tuple[Dimension, ...]
    cohort_tags: tuple[str, ...]
    substrate_columns: tuple[SubstrateColumn, ...]
    routings: tuple[Routing, ...]


class ContractVersion(Model):
    """One registration: the contract, who owns it, and where it sits in the history."""

    tenant_id: str
    version_id: str
    previous_version_id: str | None
    registered_at: dt.datetime
    contract: Contract

    @property
    def agent_id(self) -> str:
        return self.contract.agent_id


class ContractSummary(Model):
    agent_id: str
    version_id: str
    previous_version_id: str | None
    registered_at: dt.datetime
    surfaces: tuple[SurfaceSummary, ...]
    removed: tuple[Removed, ...]
    genai: GenAIMapping | None = None

    def to_json(self) -> dict[str, Any]:
        shape = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        shape["previousVersionId"] = self.previous_version_id
        moment = self.registered_at.astimezone(dt.UTC)
        shape["registeredAt"] = moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        shape["removed"] = [r.to_json() for r in self.removed]
        return shape


def version_id(tenant_id: str, contract: Contract, previous_version_id: str | None) -> str:
    """Deterministic in (tenant, content, predecessor): a redelivered registration is the
    same version, and returning to an earlier shape is a new one."""
    key = "\x1f".join((tenant_id, contract.agent_id, previous_version_id or "", contract.digest()))
    return "cv_" + hashlib.sha256(key.encode()).hexdigest()[:24]


def _items(contract: Contract | None) -> dict[tuple[Altitude, str, str], _Declared]:
    """Every declared item keyed by (altitude, surface id, id)."""
    found: dict[tuple[Altitude, str, str], _Declared] = {}
    for surface in contract.surfaces if contract else ():
        found["surface", surface.id, surface.id] = surface
        for dim in surface.dimensions:
            found["dimension", surface.id, dim.id] = dim
        for tag in surface.cohort_tags:
            found["tag", surface.id, tag.id] = tag
        for column in surface.substrate_columns:
            found["column", surface.id, column.id] = column
    return found


def removed_items(previous: Contract | None, current: Contract) -> list[Removed]:
    """What `previous` declared and `current` does not, each with its successor: an
    item of `current` whose `supersedes` names it (same surface, any altitude below the
    surface; for a surface, another surface)."""
    before, after = _items(previous), _items(current)
    successors: dict[tuple[str, str], tuple[Altitude, str]] = {}
    for (altitude, surface_id, item_id), item in after.items():
        if item.supersedes:
            scope = "" if altitude == "surface" else surface_id
            successors.setdefault((scope, item.supersedes), (altitude, item_id))
    removed = []
    for altitude, surface_id, item_id in before:
        if (altitude, surface_id, item_id) in after:
            continue
        scope = "" if altitude == "surface" else surface_id
        successor = successors.get((scope, item_id))
        removed.append(
            Removed(
                altitude=altitude,
                surface_id=surface_id,
                id=item_id,
                superseded_by=SupersededBy(altitude=successor[0], id=successor[1])
                if successor
                else None,
            )
        )
    return removed


def summarize(version: ContractVersion, previous: Contract | None) -> ContractSummary:
    """The readback of `version`; `previous` is the contract of its previous version."""
    return summary_with(version, removed_items(previous, version.contract))


def summary_with(version: ContractVersion, removed: Iterable[Removed]) -> ContractSummary:
    return ContractSummary(
        agent_id=version.agent_id,
        version_id=version.version_id,
        previous_version_id=version.previous_version_id,
        registered_at=version.registered_at,
        surfaces=tuple(
            SurfaceSummary(
                id=s.id,
                dimension_count=len(s.dimensions),
                dimensions=s.dimensions,
                cohort_tags=tuple(t.id for t in s.cohort_tags),
                substrate_columns=s.substrate_columns,
                routings=s.routings,
            )
            for s in version.contract.surfaces
        ),
        removed=tuple(removed),
        genai=version.contract.genai,
    )


def problems(err: Any) -> list[str]:
    """A pydantic ValidationError as `path: message` lines, in the contract's own field
    names (camelCase, list indexes), at most 50."""
    lines = []
    for error in err.errors()[:50]:
        path = ".".join(str(p) for p in error["loc"]) or "$"
        lines.append(f"{path}: {error['msg'].removeprefix('Value error, ')}")
    return lines


def parse_contract(document: Any) -> Contract:
    """A contract from its JSON document; pydantic's ValidationError on any problem."""
    return Contract.model_validate(document)


# --- the contracts topic (`serve --kafka`): one record per registration -------------

CONTRACT_RECORD_VERSION: Literal[1] = 1


class ContractRecord(Model):
    """A registration as the contracts topic carries it (key `tenant/agent`, compacted:
    the latest registration of each agent stays), with its `removed[]` so a receiver
    holding no store answers the same summary."""

    schema_version: Literal[1] = CONTRACT_RECORD_VERSION
    kind: Literal["contract"] = "contract"
    version: ContractVersion
    removed: tuple[Removed, ...] = ()

    def key(self) -> bytes:
        return f"{self.version.tenant_id}/{self.version.agent_id}".encode()

    def encode(self) -> bytes:
        return self.model_dump_json(by_alias=True).encode()

    def summary(self) -> ContractSummary:
        return summary_with(self.version, self.removed)
