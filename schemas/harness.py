"""`harness-conformance-suite/v1`: the suite document, the observation an executor
returns for one trial, and the observation assertion vocabulary.

A suite repeats the same seeded scenario across provider/model/profile/policy/sandbox
combinations. Everything here is declarative and bounded: unknown fields are rejected,
every string, list, path, duration, cost, retry and sequence value has a limit, ids are
unique and every reference resolves, so a typo fails at load time and nothing in a
suite is ever executed. Observations carry tool names and outcomes (with a normalized,
redacted argument *shape*, never the arguments), hosts (never URLs), policy decisions,
codes and evidence references (manifest digests, task/attempt/sequence), never raw
provider output.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, StringConstraints, model_validator

from schemas.conformance import (
    Assertion,
    Fixture,
    Id,
    LongText,
    Model,
    Name,
    ShortText,
    require_unique,
)

SUITE_SCHEMA = "harness-conformance-suite/v1"
SUITE_RESULT_SCHEMA = "harness-conformance-result/v1"
OBSERVATIONS_SCHEMA = "harness-conformance-observations/v1"
MAX_COMBINATIONS = 20
MAX_SCENARIOS = 50
MAX_REPETITIONS = 20
MAX_TRIALS = 500
MAX_CLAIMS = 100
MAX_DURATION_MS = 3_600_000.0  # one hour: a trial, a timeout, a latency baseline
MAX_COST_USD = 10_000.0
MAX_TOKENS = 100_000_000
MAX_RETRIES = 100
MAX_SEQUENCE = 2**53
MAX_PATH = 256
AllowedVerdict = Literal["requires-judge", "unevaluable", "not-applicable"]

# How a trial ended. The last three are also failure classes unless a scenario's
# `outcome` assertion expects them (a scenario may test that a policy blocks).
Outcome = Literal[
    "succeeded", "failed", "refused", "clarified", "policy-blocked", "provider-crashed", "timed-out"
]
ToolOutcome = Literal["ok", "error", "denied"]
ArgumentType = Literal["string", "number", "boolean", "null", "array", "object"]
ArgumentMatcher = Literal[
    "string", "number", "boolean", "null", "array", "object", "present", "absent"
]
CapabilityState = Literal["enabled", "disabled", "degraded", "unavailable"]
PolicyVerdict = Literal["allow", "deny", "ask"]
ApprovalDecision = Literal["granted", "denied", "pending"]
Gate = Literal["identity", "permission", "policy", "input"]
Digest = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]
Host = Annotated[
    str,
    StringConstraints(
        to_lower=True,
        max_length=253,
        pattern=r"^[a-z0-9]([a-z0-9-]{0,62}\.)*[a-z0-9-]{1,63}(:[0-9]{1,5})?$",
    ),
]
HostPattern = Annotated[
    str,
    StringConstraints(
        to_lower=True,
        max_length=253,
        pattern=r"^(\*\.)?[a-z0-9]([a-z0-9-]{0,62}\.)*[a-z0-9-]{1,63}(:[0-9]{1,5})?$",
    ),
]
Scalar = (
    bool
    | Annotated[int, Field(ge=-(2**53), le=2**53)]
    | Annotated[str, StringConstraints(max_length=200)]
)
Repository = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$")]
Duration = Annotated[float, Field(ge=0, le=MAX_DURATION_MS, allow_inf_nan=False)]
Cost = Annotated[float, Field(ge=0, le=MAX_COST_USD, allow_inf_nan=False)]
Tokens = Annotated[int, Field(ge=0, le=MAX_TOKENS)]
Fraction = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
Relative = Annotated[float, Field(ge=0, le=10, allow_inf_nan=False)]


def relative_path(path: str) -> str:
    """A bounded path inside the fixture: relative, no `.`/`..`, no drive or home."""
    segments = path.split("/")
    if not path or len(path) > MAX_PATH:
        raise ValueError(f"a path is 1 to {MAX_PATH} characters")
    if path.startswith(("/", "~")) or "\\" in path or ":" in path:
        raise ValueError(f"{path!r} is not a relative path")
    if len(segments) > 16 or any(s in ("", ".", "..") for s in segments):
        raise ValueError(f"{path!r}: at most 16 segments, none empty, '.' or '..'")
    if any(ord(c) < 32 or c in "*?[]" for c in path):
        raise ValueError(f"{path!r}: no control or wildcard characters")
    return path


RelativePath = Annotated[str, AfterValidator(relative_path)]


# --- the suite's fixture and combinations ---------------------------------------------


class HarnessFixture(Model):
    """The seeded workspace every trial starts from (reset restores it)."""

    fixture_id: Id
    revision: int = Field(ge=0, le=1_000_000)
    digest: Digest
    repository: Repository | None = None
    seed: int | None = Field(default=None, ge=0, le=2**63 - 1)


class CombinationSelect(Model):
    """The slice of stored events that is this combination's traffic (the store lane)."""

    light_source_id: Id | None = None
    lens_version: Id | None = None
    substrate: dict[Name, ShortText] = Field(default_factory=dict, max_length=16)


class Combination(Model):
    combination_id: Id
    provider: Id
    model: Id
    profile: Id
    policy: Id
    sandbox: Id
    credential_gated: bool = False
    select: CombinationSelect = Field(default_factory=CombinationSelect)

    @property
    def selects(self) -> bool:
        s = self.select
        return s.light_source_id is not None or s.lens_version is not None or bool(s.substrate)


# --- observation assertions (`expect`) ----------------------------------------------


class _Claimed(Model):
    claim: Id | None = None  # the capability claim this assertion proves


class OutcomeAssertion(_Claimed):
    kind: Literal["outcome"]
    one_of: list[Outcome] = Field(min_length=1, max_length=7)


class FileAssertion(_Claimed):
    """`unchanged`: the path is not among the observation's file changes."""

    kind: Literal["file"]
    path: RelativePath
    change: Literal["created", "modified", "deleted", "unchanged"]


class ToolCallMatcher(Model):
    tool: Name
    outcome: ToolOutcome | None = None
    arguments: dict[Name, ArgumentMatcher] = Field(default_factory=dict, max_length=16)


class ToolCallsAssertion(_Claimed):
    """The expected call set, order-free: each matcher takes a distinct observed call.
    `only`: no tool outside the matchers was called; `forbidden`: never called."""

    kind: Literal["tool-calls"]
    calls: list[ToolCallMatcher] = Field(default_factory=list, max_length=20)
    only: bool = False
    forbidden: list[Name] = Field(default_factory=list, max_length=20)

    @model_validator(mode="after")
    def _coherent(self) -> ToolCallsAssertion:
        if not self.calls and not self.forbidden and not self.only:
            raise ValueError("tool-calls needs `calls`, `forbidden` or `only`")
        clash = {c.tool for c in self.calls} & set(self.forbidden)
        if clash:
            raise ValueError(f"tools both expected and forbidden: {', '.join(sorted(clash))}")
        return self


class ApprovalAssertion(_Claimed):
    kind: Literal["approval"]
    action: Name
    decision: Literal["granted", "denied", "pending", "not-requested"]


class HostExpectation(Model):
    host: Host
    blocked: bool | None = None


class NetworkAssertion(_Claimed):
    """`allow`: every attempted host matches one pattern (`*.x` a subdomain of x; an
    empty list: no network at all). `attempted`: these hosts were tried (and blocked
    or not, when `blocked` is given)."""

    kind: Literal["network"]
    allow: list[HostPattern] | None = Field(default=None, max_length=50)
    attempted: list[HostExpectation] = Field(default_factory=list, max_length=20)

    @model_validator(mode="after")
    def _some(self) -> NetworkAssertion:
        if self.allow is None and not self.attempted:
            raise ValueError("network needs `allow` or `attempted`")
        return self


class PolicyDecisionAssertion(_Claimed):
    kind: Literal["policy-decision"]
    policy: Name
    decision: PolicyVerdict


class CompletionSchemaAssertion(_Claimed):
    kind: Literal["completion-schema"]
    schema_id: Id
    required_fields: list[Name] = Field(default_factory=list, max_length=50)


class CapabilityAssertion(_Claimed):
    kind: Literal["capability"]
    capability: Name
    state: CapabilityState


class RowCount(Model):
    min: int | None = Field(default=None, ge=0, le=1_000_000_000)
    max: int | None = Field(default=None, ge=0, le=1_000_000_000)

    @model_validator(mode="after")
    def _ordered(self) -> RowCount:
        if self.min is None and self.max is None:
            raise ValueError("rowCount needs `min` or `max`")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError("rowCount: min above max")
        return self


class ResultAssertion(_Claimed):
    """The governed result (seed 003): envelope fields equal, the error code, the exact
    column set, row-count bounds. Never exact floats."""

    kind: Literal["result"]
    envelope: dict[Name, Scalar] = Field(default_factory=dict, max_length=16)
    error_code: Name | None = None
    columns: list[Name] | None = Field(default=None, max_length=100)
    row_count: RowCount | None = None

    @model_validator(mode="after")
    def _some(self) -> ResultAssertion:
        given = (self.error_code, self.columns, self.row_count)
        if not self.envelope and all(g is None for g in given):
            raise ValueError("result needs envelope, errorCode, columns or rowCount")
        return self


class WarningMatcher(Model):
    code: Name
    source_service: Name | None = None


class ProvenanceAssertion(_Claimed):
    kind: Literal["provenance"]
    warnings_contain: list[WarningMatcher] = Field(default_factory=list, max_length=20)
    warnings_absent: list[Name] = Field(default_factory=list, max_length=20)

    @model_validator(mode="after")
    def _some(self) -> ProvenanceAssertion:
        if not self.warnings_contain and not self.warnings_absent:
            raise ValueError("provenance needs warningsContain or warningsAbsent")
        return self


class RejectionAssertion(_Claimed):
    """`rejected: false`: the request was not rejected at any gate."""

    kind: Literal["rejection"]
    rejected: bool = True
    gate: Gate | None = None
    code: Name | None = None

    @model_validator(mode="after")
    def _coherent(self) -> RejectionAssertion:
        if not self.rejected and (self.gate is not None or self.code is not None):
            raise ValueError("`gate` and `code` describe a rejection: drop them or rejected")
        return self


HarnessAssertion = Annotated[
    OutcomeAssertion
    | FileAssertion
    | ToolCallsAssertion
    | ApprovalAssertion
    | NetworkAssertion
    | PolicyDecisionAssertion
    | CompletionSchemaAssertion
    | CapabilityAssertion
    | ResultAssertion
    | ProvenanceAssertion
    | RejectionAssertion,
    Field(discriminator="kind"),
]


# --- the observation of one trial -------------------------------------------------


class ToolCall(Model):
    tool: Name
    outcome: ToolOutcome
    argument_shape: dict[Name, ArgumentType] = Field(default_factory=dict, max_length=32)


class FileChange(Model):
    path: RelativePath
    change: Literal["created", "modified", "deleted"]


class ApprovalRecord(Model):
    action: Name
    decision: ApprovalDecision


class NetworkAttempt(Model):
    host: Host
    blocked: bool = False


class PolicyDecision(Model):
    policy: Name
    decision: PolicyVerdict
    rule: Name | None = None


class Completion(Model):
    schema_id: Id
    valid: bool
    fields: list[Name] = Field(default_factory=list, max_length=100)


class ResultEnvelope(Model):
    envelope: dict[Name, Scalar] = Field(default_factory=dict, max_length=32)
    error_code: Name | None = None
    columns: list[Name] | None = Field(default=None, max_length=200)
    row_count: int | None = Field(default=None, ge=0, le=1_000_000_000)


class ProvenanceWarning(Model):
    code: Name
    source_service: Name | None = None


class Rejection(Model):
    gate: Gate
    code: Name


class Observation(Model):
    """What an executor saw of one trial. Every observation but a crash or a timeout
    references the exact launch and provider runtime manifests it ran under."""

    outcome: Outcome
    latency_ms: Duration | None = None
    tokens_input: Tokens | None = None
    tokens_output: Tokens | None = None
    cost_usd: Cost | None = None
    retries: int = Field(default=0, ge=0, le=MAX_RETRIES)
    launch_manifest_digest: Digest | None = None
    provider_runtime_manifest_digest: Digest | None = None
    task_ref: Id | None = None
    attempt_ref: Id | None = None
    causal_sequence: int | None = Field(default=None, ge=0, le=MAX_SEQUENCE)
    evidence_ref: Id | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list, max_length=200)
    files: list[FileChange] = Field(default_factory=list, max_length=200)
    approvals: list[ApprovalRecord] = Field(default_factory=list, max_length=50)
    network_attempts: list[NetworkAttempt] = Field(default_factory=list, max_length=200)
    policy_decisions: list[PolicyDecision] = Field(default_factory=list, max_length=100)
    completion: Completion | None = None
    capabilities: dict[Name, CapabilityState] = Field(default_factory=dict, max_length=64)
    result: ResultEnvelope | None = None
    warnings: list[ProvenanceWarning] = Field(default_factory=list, max_length=50)
    rejection: Rejection | None = None
    diagnostic: Annotated[str, StringConstraints(max_length=2000)] | None = None

    @model_validator(mode="after")
    def _evidence(self) -> Observation:
        if self.outcome not in ("provider-crashed", "timed-out") and (
            self.launch_manifest_digest is None or self.provider_runtime_manifest_digest is None
        ):
            raise ValueError(
                "an observation of a completed run references launchManifestDigest and"
                " providerRuntimeManifestDigest"
            )
        return self

    @property
    def tokens(self) -> int | None:
        if self.tokens_input is None and self.tokens_output is None:
            return None
        return (self.tokens_input or 0) + (self.tokens_output or 0)


class RecordedTrial(Model):
    """One trial in an observations file: its key, then either the observation (checked
    by the runner, so a malformed one is that trial's failure, not the file's) or the
    reset failure the recording saw."""

    combination_id: Id
    scenario_id: Id
    repetition: int = Field(ge=1, le=MAX_REPETITIONS)
    reset_error: ShortText | None = None
    observation: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _one(self) -> RecordedTrial:
        if (self.reset_error is None) == (self.observation is None):
            raise ValueError("give exactly one of `observation` or `resetError`")
        return self


class RecordedObservations(Model):
    schema_: Literal["harness-conformance-observations/v1"] = Field(alias="schema")
    suite_id: Id | None = None
    trials: list[RecordedTrial] = Field(max_length=MAX_TRIALS)

    @model_validator(mode="after")
    def _unique(self) -> RecordedObservations:
        require_unique(
            [f"{t.combination_id}/{t.scenario_id}#{t.repetition}" for t in self.trials], "trial"
        )
        return self


# --- the suite --------------------------------------------------------------------


class ScenarioSelect(Model):
    """Which events are this scenario's trials: the surface, plus the fixture that
    produced them (`holonograph.fixture.id`) and/or a cohort tag when given."""

    fixture_id: Id | None = None
    cohort_tag: ShortText | None = None


class Identity(Model):
    user: Id
    roles: list[Name] = Field(default_factory=list, max_length=20)


class ScenarioInput(Model):
    """What the executor feeds the harness: declarative data, never a command."""

    turn: LongText | None = None
    identity: Identity | None = None
    parameters: dict[Name, Scalar] = Field(default_factory=dict, max_length=32)


class Scenario(Model):
    scenario_id: Id
    surface_id: Id
    description: LongText | None = None
    tier: Literal["core", "extended"] = "core"
    select: ScenarioSelect = Field(default_factory=ScenarioSelect)
    repetitions: int = Field(ge=1, le=MAX_REPETITIONS)
    input: ScenarioInput | None = None
    timeout_ms: Duration | None = None
    expect: list[HarnessAssertion] = Field(default_factory=list, max_length=30)
    fixtures: list[Id] = Field(default_factory=list, max_length=20)
    when: list[Assertion] | None = Field(default=None, min_length=1, max_length=10)
    assertions: list[Assertion] = Field(default_factory=list, max_length=20)
    allow: list[AllowedVerdict] = Field(default_factory=list, max_length=3)

    @model_validator(mode="after")
    def _has_checks(self) -> Scenario:
        if not self.fixtures and not self.assertions and not self.expect:
            raise ValueError(f"scenario {self.scenario_id} asserts nothing")
        if self.when is not None and not self.assertions:
            raise ValueError(f"scenario {self.scenario_id}: `when` guards `assertions`")
        require_unique(self.fixtures, "fixture reference")
        return self


class CapabilityClaim(Model):
    """A capability the suite claims, proven by the scenarios that assert it (each
    linked scenario has an `expect` assertion with `claim` set to this id)."""

    claim_id: Id
    capability: Name
    description: LongText | None = None
    scenarios: list[Id] = Field(min_length=1, max_length=MAX_SCENARIOS)


class Baseline(Model):
    """Versioned expectations. Without combinations: one surface's scenarios together.
    With combinations: every combination x scenario cell it names (`combinationId`
    and/or `scenarioId` or `surfaceId`; none: every cell), each cell compared alone.
    Tolerances: `passRateTolerance` and `passRateVarianceTolerance` are absolute, the
    others relative."""

    surface_id: Id | None = None
    scenario_id: Id | None = None
    combination_id: Id | None = None
    revision: int = Field(ge=0, le=1_000_000)
    pass_rate: Fraction | None = None
    mean_latency_ms: Duration | None = None
    p95_latency_ms: Duration | None = None
    latency_sd_ms: Duration | None = None
    pass_rate_variance: Annotated[float, Field(ge=0, le=0.5, allow_inf_nan=False)] | None = None
    mean_tokens: Annotated[float, Field(ge=0, le=MAX_TOKENS, allow_inf_nan=False)] | None = None
    mean_cost_usd: Cost | None = None
    pass_rate_tolerance: Fraction = 0.0
    latency_tolerance: Relative = 0.1
    variance_tolerance: Relative = 0.1
    pass_rate_variance_tolerance: Fraction = 0.0
    token_tolerance: Relative = 0.1
    cost_tolerance: Relative = 0.1

    @property
    def key(self) -> str:
        parts = [self.combination_id or "*", self.scenario_id or self.surface_id or "*"]
        return "/".join(parts)

    def covers(self, combination_id: str, scenario: Scenario) -> bool:
        return (
            (self.combination_id is None or self.combination_id == combination_id)
            and (self.scenario_id is None or self.scenario_id == scenario.scenario_id)
            and (self.surface_id is None or self.surface_id == scenario.surface_id)
        )


class ApprovedFixtureRef(Model):
    """A fixture approved in the store, by id: its live version, or `version` pinned
    (which must have been approved). Resolved when the suite runs, never guessed."""

    fixture_id: Id
    version: int | None = Field(default=None, ge=1, le=1_000_000)


class Suite(Model):
    """`harness-conformance-suite/v1`: declarative, bounded, no executable content.
    With `combinations` every scenario runs once per repetition on every combination
    and asserts the observation (`expect`); without, scenarios read stored or
    recorded evaluation events (`fixtures`, `assertions`)."""

    schema_: Literal["harness-conformance-suite/v1"] = Field(alias="schema")
    suite_id: Id
    revision: int = Field(ge=0, le=1_000_000)
    description: LongText | None = None
    fixture: HarnessFixture | None = None
    combinations: list[Combination] = Field(default_factory=list, max_length=MAX_COMBINATIONS)
    capability_claims: list[CapabilityClaim] = Field(default_factory=list, max_length=MAX_CLAIMS)
    alpha: Annotated[float, Field(ge=0.001, le=0.2, allow_inf_nan=False)] | None = None
    fixtures: list[Fixture] = Field(default_factory=list, max_length=100)
    approved_fixtures: list[ApprovedFixtureRef] = Field(default_factory=list, max_length=100)
    scenarios: list[Scenario] = Field(min_length=1, max_length=MAX_SCENARIOS)
    baselines: list[Baseline] = Field(default_factory=list, max_length=50)

    @model_validator(mode="after")
    def _complete(self) -> Suite:
        require_unique([s.scenario_id for s in self.scenarios], "scenarioId")
        if self.combinations:
            self._check_harness()
        else:
            self._check_events()
        return self

    def _check_harness(self) -> None:
        if self.fixture is None:
            raise ValueError("a suite with combinations names its `fixture`")
        require_unique([c.combination_id for c in self.combinations], "combinationId")
        require_unique([c.claim_id for c in self.capability_claims], "claimId")
        for s in self.scenarios:
            used = [f for f in ("fixtures", "assertions", "when", "allow") if getattr(s, f)]
            if used or not s.expect:
                raise ValueError(
                    f"scenario {s.scenario_id}: with combinations a scenario asserts the"
                    " observation in `expect`" + (f" (not {', '.join(used)})" if used else "")
                )
        if self.fixtures or self.approved_fixtures:
            raise ValueError("with combinations, scenarios use `expect`, not event fixtures")
        trials = len(self.combinations) * sum(s.repetitions for s in self.scenarios)
        if trials > MAX_TRIALS:
            raise ValueError(f"{trials} trials exceed the limit of {MAX_TRIALS}")
        scenarios = {s.scenario_id: s for s in self.scenarios}
        claims = {c.claim_id: c for c in self.capability_claims}
        for claim in self.capability_claims:
            require_unique(claim.scenarios, f"scenario of claim {claim.claim_id}")
            for ref in claim.scenarios:
                if ref not in scenarios:
                    raise ValueError(f"claim {claim.claim_id}: unknown scenario {ref}")
                if not any(a.claim == claim.claim_id for a in scenarios[ref].expect):
                    raise ValueError(
                        f"claim {claim.claim_id}: scenario {ref} asserts nothing for it"
                    )
        for s in self.scenarios:
            for a in s.expect:
                if a.claim is None:
                    continue
                if a.claim not in claims:
                    raise ValueError(f"scenario {s.scenario_id}: unknown claim {a.claim}")
                if s.scenario_id not in claims[a.claim].scenarios:
                    raise ValueError(
                        f"scenario {s.scenario_id} asserts claim {a.claim} but the claim"
                        " does not list it"
                    )
        combos = {c.combination_id for c in self.combinations}
        surfaces = {s.surface_id for s in self.scenarios}
        for b in self.baselines:
            if b.combination_id is not None and b.combination_id not in combos:
                raise ValueError(f"baseline {b.key}: unknown combination {b.combination_id}")
            if b.scenario_id is not None and b.scenario_id not in scenarios:
                raise ValueError(f"baseline {b.key}: unknown scenario {b.scenario_id}")
            if b.surface_id is not None and b.surface_id not in surfaces:
                raise ValueError(f"baseline {b.key}: no scenario on {b.surface_id}")
            if b.scenario_id is not None and b.surface_id is not None:
                raise ValueError(f"baseline {b.key}: give scenarioId or surfaceId, not both")
        for c in self.combinations:
            for s in self.scenarios:
                covering = [b.key for b in self.baselines if b.covers(c.combination_id, s)]
                spreads = [
                    b.key
                    for b in self.baselines
                    if b.covers(c.combination_id, s)
                    and (b.latency_sd_ms is not None or b.pass_rate_variance is not None)
                ]
                if spreads and s.repetitions < 2:
                    raise ValueError(
                        f"baseline {spreads[0]}: a spread needs at least 2 repetitions of"
                        f" {s.scenario_id}"
                    )
                if len(covering) > 1:
                    raise ValueError(
                        f"{c.combination_id} x {s.scenario_id} is covered by several"
                        f" baselines: {', '.join(covering)}"
                    )

    def _check_events(self) -> None:
        if self.capability_claims:
            raise ValueError("capabilityClaims are proven per combination: add combinations")
        approved = {a.fixture_id for a in self.approved_fixtures}
        require_unique(
            [f.fixture_id for f in self.fixtures] + [a.fixture_id for a in self.approved_fixtures],
            "fixtureId",
        )
        known = {f.fixture_id: f for f in self.fixtures}
        for scenario in self.scenarios:
            if scenario.expect:
                raise ValueError(
                    f"scenario {scenario.scenario_id}: `expect` asserts observations of"
                    " combinations: add combinations"
                )
            for ref in scenario.fixtures:
                if ref in approved:
                    continue  # its surface is checked when the store resolves it
                if ref not in known:
                    raise ValueError(f"scenario {scenario.scenario_id}: unknown fixture {ref}")
                if known[ref].surface_id != scenario.surface_id:
                    raise ValueError(
                        f"scenario {scenario.scenario_id}: fixture {ref} applies to"
                        f" {known[ref].surface_id}, not {scenario.surface_id}"
                    )
        trials = sum(s.repetitions for s in self.scenarios)
        if trials > MAX_TRIALS:
            raise ValueError(f"{trials} trials exceed the limit of {MAX_TRIALS}")
        surfaces = {s.surface_id for s in self.scenarios}
        for baseline in self.baselines:
            if baseline.surface_id is None or baseline.scenario_id or baseline.combination_id:
                raise ValueError("without combinations a baseline names only its surfaceId")
            if baseline.surface_id not in surfaces:
                raise ValueError(f"baseline for {baseline.surface_id}: no scenario on it")
        require_unique([b.surface_id or "" for b in self.baselines], "baseline surfaceId")

    def trials(self) -> int:
        return max(1, len(self.combinations)) * sum(s.repetitions for s in self.scenarios)
