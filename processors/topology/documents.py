"""The documents of the topology scan and bootstrap (`to_json()`: the CLI's --json and
the HTTP body), as types: the OpenAPI document's response schemas are generated from
them, and tests validate real answers against them (extra keys refused), so a field
added to a report and not here fails a test rather than going undocumented."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

from schemas.contracts import Contract, Surface

_FORBID = ConfigDict(extra="forbid")
Inference = Literal["deterministic", "lowConfidence"]


# --- the scan (processors/topology/scan.py)


@with_config(_FORBID)
class Coverage(TypedDict):
    declared: int
    observed: int
    ratio: float | None  # observed / declared; None: nothing declared


@with_config(_FORBID)
class SeenDocument(TypedDict):
    count: int
    firstSeen: dt.datetime | None
    lastSeen: dt.datetime | None


@with_config(_FORBID)
class SeenItem(SeenDocument):
    id: str


@with_config(_FORBID)
class CountedItem(TypedDict):
    id: str
    count: int


@with_config(_FORBID)
class Retirement(TypedDict):
    """Declared, not observed in the window, observed before it."""

    kind: Literal["dimension", "tag", "column", "lightSource"]
    id: str
    lastSeen: dt.datetime | None
    countBefore: int


@with_config(_FORBID)
class CappedIds(TypedDict):
    """`count` and at most the request's `examples` of them."""

    count: int
    examples: list[str]


@with_config(_FORBID)
class CappedSeen(TypedDict):
    count: int
    examples: list[SeenItem]


@with_config(_FORBID)
class CappedCounted(TypedDict):
    count: int
    examples: list[CountedItem]


@with_config(_FORBID)
class CappedRetirements(TypedDict):
    count: int
    examples: list[Retirement]


@with_config(_FORBID)
class Lattice(TypedDict):
    """One kind's declared vs observed on one surface."""

    declaredNotObserved: CappedIds
    observedNotDeclared: CappedSeen
    declaredAndObserved: CappedCounted


@with_config(_FORBID)
class ScannedSurface(TypedDict):
    id: str
    observed: bool
    inventoried: bool | None  # None: the agent has no inventory
    events: SeenDocument
    dimensions: Lattice
    cohortTags: Lattice
    substrateColumns: Lattice
    lightSources: Lattice
    coverage: Coverage
    retirementCandidates: CappedRetirements


@with_config(_FORBID)
class InventoryRef(TypedDict):
    inventoryId: str
    consumerId: str
    capturedAt: dt.datetime


@with_config(_FORBID)
class Gate(TypedDict):
    failUnder: float | None
    passed: bool
    reasons: list[str]


@with_config(_FORBID)
class ScanDocument(TypedDict):
    """The Guide's scan report (chapter 9)."""

    scanId: str
    agentId: str
    tenantId: str
    since: dt.datetime
    until: dt.datetime
    scannedAt: dt.datetime
    contractVersionId: str | None
    inventories: list[InventoryRef]
    coverage: Coverage
    gaps: int
    retirementCandidates: int
    surfaces: list[ScannedSurface]
    quietSurfaces: CappedIds
    undeclaredSurfaces: CappedSeen
    inventoryOnlySurfaces: CappedIds
    declaredNotInventoried: CappedIds
    gate: Gate
    recorded: bool


# --- the bootstrap (processors/topology/bootstrap.py)


@with_config(_FORBID)
class WindowParts(TypedDict):
    present: int
    withEvents: int


@with_config(_FORBID)
class TypesSeen(TypedDict):
    score: int
    boolean: int


@with_config(_FORBID)
class DimensionEvidence(TypedDict):
    count: int
    presenceShare: float
    windowParts: WindowParts
    typesSeen: TypesSeen


@with_config(_FORBID)
class ItemEvidence(TypedDict):
    count: int
    presenceShare: float
    windowParts: WindowParts
    valuesSeen: list[str]


@with_config(_FORBID)
class DimensionCandidate(TypedDict):
    id: str
    type: Literal["score", "boolean"] | None  # None: both types seen
    inference: Inference
    evidence: DimensionEvidence
    reasons: list[str]


@with_config(_FORBID)
class ItemCandidate(TypedDict):
    id: str
    inference: Inference
    evidence: ItemEvidence
    reasons: list[str]


@with_config(_FORBID)
class CappedDimensions(TypedDict):
    count: int
    examples: list[DimensionCandidate]


@with_config(_FORBID)
class CappedItems(TypedDict):
    count: int
    examples: list[ItemCandidate]


@with_config(_FORBID)
class Candidates(TypedDict):
    dimensions: CappedDimensions
    cohortTags: CappedItems
    substrateColumns: CappedItems


@with_config(_FORBID)
class Thresholds(TypedDict):
    minCount: int
    minPresence: float
    windowParts: int


@with_config(_FORBID)
class BootstrapDocument(TypedDict):
    """The Guide's bootstrap report (chapter 9): the candidates with their evidence, the
    surface entry of the deterministic ones, and the agent's contract with it."""

    surfaceId: str
    tenantId: str
    agentId: str | None
    since: dt.datetime
    until: dt.datetime
    events: int
    thresholds: Thresholds
    candidates: Candidates
    surface: Surface
    contract: Contract | None  # None: no agent id a contract accepts
    basedOnVersionId: str | None
