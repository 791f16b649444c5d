"""Ingest held to the contract: each evaluation checked against its agent's active
contract version, rejected for what the contract forbids, flagged for what it does
not know.

    ContractBook (active versions, swapped whole) ─► check_event(event, tenant) ─►
        the event with `contract_version_id` and `contract_findings`, or SpanRejected

Rejected (the value cannot be trusted under the contract): a substrate column or a
diagnostic `column=value` cohort tag outside the column's declared `values[]`; a
dimension whose outcome contradicts its declared type (`score`: the outcome has a
score; `boolean`: it has `passed` and no score). Flagged (accepted, stored with the
finding): an undeclared dimension, cohort-tag key or substrate column, a light source
outside the surface's routings for the event's run mode (`schemas.routing`: a version
of a routed light source, or one requested as it, is routed), a surface the contract does
not declare, no contract at all. Flags are about the contract being behind the code,
which the operator fixes by registering a new version; a rejection is the data
breaking a promise the contract made.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ingest.export.validate import SpanRejected
from schemas.contracts import ContractVersion, Surface
from schemas.events import RUN_MODES, EvaluationEvent
from schemas.genai import GenAISurface
from schemas.routing import entry_answered

# Every contract rejection starts so: `quarantine --reason contract` finds them all.
CONTRACT_REJECTED = "contract"
# Tags Holonograph itself writes (the multiplexer's role), never declared by operators.
SYSTEM_TAG_KEYS = frozenset({"multiplex.role"})

NO_CONTRACT = "no-contract"
UNDECLARED_SURFACE = "undeclared-surface"
UNDECLARED_DIMENSION = "undeclared-dimension"
UNDECLARED_TAG = "undeclared-cohort-tag"
UNDECLARED_COLUMN = "undeclared-substrate-column"
UNROUTED_LIGHT_SOURCE = "unrouted-light-source"
FINDING_KINDS = (
    NO_CONTRACT,
    UNDECLARED_SURFACE,
    UNDECLARED_DIMENSION,
    UNDECLARED_TAG,
    UNDECLARED_COLUMN,
    UNROUTED_LIGHT_SOURCE,
)


def finding_kind(finding: str) -> str:
    """`undeclared-dimension:tone` -> `undeclared-dimension`."""
    return finding.split(":", 1)[0]


@dataclass(frozen=True)
class _Enum:
    column_id: str
    allowed: frozenset[str]
    listed: tuple[str, ...]  # in the contract's order, for the reason
    diagnostic: bool


@dataclass(frozen=True)
class _Rules:
    """One declared surface, compiled once per registration: what the check of every
    event reads, as sets and maps."""

    dimension_types: dict[str, str]
    tag_keys: frozenset[str]
    columns: frozenset[str]
    enums: tuple[_Enum, ...]
    routed: dict[str, frozenset[str]]  # run mode -> light sources routed in it


def _compile(surface: Surface) -> _Rules:
    diagnostic = {c.id for c in surface.substrate_columns if c.semantic == "diagnostic"}
    return _Rules(
        dimension_types={d.id: d.type for d in surface.dimensions},
        tag_keys=frozenset({t.id for t in surface.cohort_tags} | diagnostic | SYSTEM_TAG_KEYS),
        columns=frozenset(c.id for c in surface.substrate_columns),
        enums=tuple(
            _Enum(c.id, frozenset(c.values), c.values, c.semantic == "diagnostic")
            for c in surface.substrate_columns
            if c.values is not None
        ),
        routed={
            mode: frozenset(
                source
                for routing in surface.routings
                if routing.active_in(mode)
                for source in routing.light_sources
            )
            for mode in RUN_MODES
        },
    )


@dataclass(frozen=True)
class _Index:
    by_agent: dict[tuple[str, str], ContractVersion] = field(default_factory=dict)
    # (tenant, surface id) -> the active versions declaring that surface
    by_surface: dict[tuple[str, str], tuple[ContractVersion, ...]] = field(default_factory=dict)
    # (version id, surface id) -> its compiled rules
    rules: dict[tuple[str, str], _Rules] = field(default_factory=dict)
    # tenant -> the active versions with a `genai` block
    genai: dict[str, tuple[ContractVersion, ...]] = field(default_factory=dict)


def _index(
    versions: Iterable[ContractVersion], compiled: Mapping[tuple[str, str], _Rules]
) -> _Index:
    """The index of `versions`; rules already in `compiled` are reused (a version id
    names one content, so its rules never change)."""
    by_agent: dict[tuple[str, str], ContractVersion] = {}
    for version in versions:
        key = (version.tenant_id, version.agent_id)
        known = by_agent.get(key)
        if known is None or version.registered_at >= known.registered_at:
            by_agent[key] = version
    by_surface: dict[tuple[str, str], list[ContractVersion]] = {}
    rules: dict[tuple[str, str], _Rules] = {}
    genai: dict[str, list[ContractVersion]] = {}
    for version in by_agent.values():
        for surface in version.contract.surfaces:
            by_surface.setdefault((version.tenant_id, surface.id), []).append(version)
            key = (version.version_id, surface.id)
            rules[key] = compiled[key] if key in compiled else _compile(surface)
        if version.contract.genai is not None:
            genai.setdefault(version.tenant_id, []).append(version)
    return _Index(
        by_agent,
        {k: tuple(v) for k, v in by_surface.items()},
        rules,
        {tenant: tuple(sorted(v, key=lambda v: v.agent_id)) for tenant, v in genai.items()},
    )


class ContractBook:
    """The active contract version of every (tenant, agent) a receiver enforces.

    Read on the decode thread, written by whatever distributes registrations (the
    store refresh, the contracts topic, the HTTP endpoint): each change builds a new
    index and swaps the reference, so a reader sees one whole state."""

    def __init__(self, versions: Iterable[ContractVersion] = ()) -> None:
        self._index = _index(versions, {})

    def replace(self, versions: Iterable[ContractVersion]) -> None:
        """Exactly `versions` (the latest per agent) from now on."""
        self._index = _index(versions, self._index.rules)

    def put(self, version: ContractVersion) -> None:
        """One registration, active unless a later one of its agent is known."""
        self._index = _index([*self._index.by_agent.values(), version], self._index.rules)

    def active(self, tenant_id: str, agent_id: str) -> ContractVersion | None:
        return self._index.by_agent.get((tenant_id, agent_id))

    def versions(self) -> list[ContractVersion]:
        return list(self._index.by_agent.values())

    def by_version_id(self) -> dict[str, ContractVersion]:
        """The versions held, by id: what a refresh need not read again."""
        return {v.version_id: v for v in self._index.by_agent.values()}

    def contract_for(
        self, tenant_id: str, event: EvaluationEvent
    ) -> tuple[ContractVersion | None, _Rules | None]:
        """The agent's active version (for an event naming no agent, the only active
        version of the tenant that declares its surface, if exactly one) and the rules
        of the event's surface in it (None: the version does not declare it)."""
        version = self._version(tenant_id, event.agent_id, event.surface_id)
        if version is None:
            return None, None
        return version, self._index.rules.get((version.version_id, event.surface_id))

    def governs(self, tenant_id: str, agent_id: str, surface_id: str) -> bool:
        """Whether an event of `agent_id` on `surface_id` is checked against a version
        (`contract_for` finds one): the fast path leaves those to the reference."""
        return self._version(tenant_id, agent_id, surface_id) is not None

    def place_genai(
        self, tenant_id: str, agent_name: str, operation_name: str, service_name: str
    ) -> list[tuple[ContractVersion, GenAISurface]]:
        """Every active version of the tenant whose `genai` block places a GenAI
        operation with these names, with the rule that does (by agent id)."""
        placed = []
        for version in self._index.genai.get(tenant_id, ()):
            assert version.contract.genai is not None
            rule = version.contract.genai.place(agent_name, operation_name, service_name)
            if rule is not None:
                placed.append((version, rule))
        return placed

    def _version(self, tenant_id: str, agent_id: str, surface_id: str) -> ContractVersion | None:
        index = self._index
        if agent_id:
            return index.by_agent.get((tenant_id, agent_id))
        declaring = index.by_surface.get((tenant_id, surface_id), ())
        return declaring[0] if len(declaring) == 1 else None


def _rejected(version: ContractVersion, problem: str) -> SpanRejected:
    return SpanRejected(f"{CONTRACT_REJECTED}: {problem}; contract version {version.version_id}")


def _allowed(values: tuple[str, ...]) -> str:
    return ", ".join(values)


def _check_values(version: ContractVersion, rules: _Rules, event: EvaluationEvent) -> None:
    columns, tagged = event.substrate.columns, event.substrate.diagnostic
    for enum in rules.enums:
        value = columns.get(enum.column_id)
        if value is not None and value not in enum.allowed:
            raise _rejected(
                version,
                f"holonograph.substrate.{enum.column_id}: {value!r} is not an allowed value of"
                f" column {enum.column_id} (allowed: {_allowed(enum.listed)})",
            )
        value = tagged.get(enum.column_id) if enum.diagnostic else None
        if value is not None and value not in enum.allowed:
            raise _rejected(
                version,
                f"holonograph.cohort_tags: {enum.column_id}={value}: {value!r} is not an allowed"
                f" value of column {enum.column_id} (allowed: {_allowed(enum.listed)})",
            )


def _check_dimensions(version: ContractVersion, rules: _Rules, event: EvaluationEvent) -> list[str]:
    declared = rules.dimension_types
    findings = []
    for result in event.outcome.dimensions:
        kind = declared.get(result.dimension_id)
        if kind is None:
            findings.append(f"{UNDECLARED_DIMENSION}:{result.dimension_id}")
        elif kind == "score" and result.score is None:
            raise _rejected(
                version,
                f"dimension {result.dimension_id}: declared type score, the outcome has no"
                " score (holonograph.dimension.score)",
            )
        elif kind == "boolean" and (result.passed is None or result.score is not None):
            raise _rejected(
                version,
                f"dimension {result.dimension_id}: declared type boolean, the outcome needs"
                " holonograph.dimension.passed and no score",
            )
    return findings


def _undeclared(rules: _Rules, event: EvaluationEvent) -> list[str]:
    findings = []
    keys = rules.tag_keys
    for tag in event.outcome.cohort_tags:
        key = tag.split("=", 1)[0]
        if key not in keys:
            findings.append(f"{UNDECLARED_TAG}:{key}")
    columns = rules.columns
    findings += [f"{UNDECLARED_COLUMN}:{c}" for c in event.substrate.columns if c not in columns]
    light_source, routed = event.light_source.id, rules.routed[event.run_mode]
    if (
        light_source
        and light_source not in routed
        and entry_answered(routed, light_source, event.light_source.requested) is None
    ):  # a version of a routed light source, or requested as one, is routed
        findings.append(f"{UNROUTED_LIGHT_SOURCE}:{light_source}")
    return findings


def check_event(book: ContractBook, tenant_id: str, event: EvaluationEvent) -> EvaluationEvent:
    """`event` with the version it was checked against and its findings; raises
    `SpanRejected` (reason: column, value, allowed values) for what the contract forbids."""
    version, rules = book.contract_for(tenant_id, event)
    if version is None:
        return event.model_copy(update={"contract_findings": (NO_CONTRACT,)})
    if rules is None:
        findings = [f"{UNDECLARED_SURFACE}:{event.surface_id}"]
    else:
        _check_values(version, rules, event)
        findings = _check_dimensions(version, rules, event) + _undeclared(rules, event)
    # Deduplicated in first-seen order: one finding per thing, however often it occurs.
    update = {
        "contract_version_id": version.version_id,
        "contract_findings": tuple(dict.fromkeys(findings)) if findings else (),
    }
    return event.model_copy(update=update)
