"""Seeded multiplex traffic with a known truth, for the comparison, dashboard and
report tests.

Each call of a surface lands on a primary vendor and observers (one event each,
sharing the call's correlation id, `multiplex_role` primary/observer), graded on a
pass/fail dimension (`correctness`) and a scored one (`helpfulness`):

- `primary` passes with probability `base`; scores ~ N(3, 1) (+ `score_offset`);
- `better` is correlated with the primary on the same call: where the primary passed
  it passes with `keep`, where it failed with `rescue`, so its true rate is
  base * keep + (1 - base) * rescue; its score is the primary's + `score_gain` + noise;
- `gappy` is as good as the primary (independent draws at `base`) but leaves the
  dimensions ungraded on `ungraded` of its calls and sends no event at all on
  `absent` of them: missing outcomes, not failures;
- `fallbacks` extra calls where the primary was unavailable: `better` answers as
  primary (recording `fallback_requested` as asked for, when given), `gappy` observes.

Events go into one emission stream per vendor with ordinals in call order; `lost`
ordinals of the primary's stream are left out (events the client lost), so
completeness has a known gap. Rows are written through `schemas.tables` on a migrated
store; everything random comes from the seed, and the generated `Call`s are the truth
a test compares with.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import numpy as np

from schemas.events import DEFAULT_TENANT
from schemas.store import Store
from schemas.tables import EMISSION_RECEIPTS, EVALUATION_DIMENSIONS, EVALUATION_EVENTS

PRIMARY = "anthropic/claude-sonnet-5"
BETTER = "openai/gpt-5"
GAPPY = "google/gemini-2-pro"


@dataclass(frozen=True)
class MultiplexSpec:
    surface_id: str = "classify-intent"
    start: dt.datetime = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
    calls: int = 400
    spacing: dt.timedelta = dt.timedelta(minutes=1)
    base: float = 0.7
    keep: float = 0.95
    rescue: float = 0.6
    score_gain: float = 0.5
    ungraded: float = 0.25
    absent: float = 0.1
    fallbacks: int = 20
    lost: tuple[int, ...] = ()
    with_better: bool = True
    tenant_id: str = DEFAULT_TENANT
    score_offset: float = 0.0  # added to every score (1e8: where a one-pass variance fails)
    # The contract version the events record having been checked against ('' none), and
    # what a fallback's primary event records as requested (None: its own id).
    contract_version_id: str = ""
    fallback_requested: str | None = None

    @property
    def better_rate(self) -> float:
        return self.base * self.keep + (1 - self.base) * self.rescue


@dataclass(frozen=True)
class Outcome:
    vendor: str
    role: str
    passed: bool | None  # None: sent but ungraded
    score: float | None
    latency_ms: float
    cost_usd: float
    tokens_input: int
    tokens_output: int


@dataclass(frozen=True)
class Call:
    correlation_id: str
    timestamp: dt.datetime
    outcomes: tuple[Outcome, ...]  # vendors with an event; an absent vendor has none
    fallback: bool = False

    def of(self, vendor: str) -> Outcome | None:
        return next((o for o in self.outcomes if o.vendor == vendor), None)


@dataclass
class Seeded:
    spec: MultiplexSpec
    calls: list[Call] = field(default_factory=list)
    stored_events: int = 0


_COST = {PRIMARY: 0.003, BETTER: 0.004, GAPPY: 0.001}
_LATENCY = {PRIMARY: 800.0, BETTER: 1200.0, GAPPY: 500.0}


def generate(spec: MultiplexSpec, seed: int) -> list[Call]:
    """The calls of `spec`; the same (spec, seed) always gives the same calls."""
    rng = np.random.default_rng(seed)
    calls = []
    for i in range(spec.calls + spec.fallbacks):
        fallback = i >= spec.calls
        a_pass = bool(rng.random() < spec.base)
        a_score = spec.score_offset + float(rng.normal(3.0, 1.0))
        b_pass = bool(rng.random() < (spec.keep if a_pass else spec.rescue))
        b_score = a_score + spec.score_gain + float(rng.normal(0.0, 0.5))
        c_pass = bool(rng.random() < spec.base)
        c_score = spec.score_offset + float(rng.normal(3.0, 1.0))
        c_draw = rng.random()
        outcomes = []
        if not fallback:
            outcomes.append(_outcome(rng, PRIMARY, "primary", a_pass, a_score))
        if spec.with_better:
            role = "primary" if fallback else "observer"
            outcomes.append(_outcome(rng, BETTER, role, b_pass, b_score))
        if c_draw >= spec.absent:
            graded = c_draw >= spec.absent + spec.ungraded
            outcomes.append(
                _outcome(rng, GAPPY, "observer", c_pass if graded else None, c_score, graded)
            )
        calls.append(
            Call(
                correlation_id=f"call-{i:05d}",
                timestamp=spec.start + i * spec.spacing,
                outcomes=tuple(outcomes),
                fallback=fallback,
            )
        )
    return calls


def _outcome(
    rng: np.random.Generator,
    vendor: str,
    role: str,
    passed: bool | None,
    score: float,
    graded: bool = True,
) -> Outcome:
    return Outcome(
        vendor=vendor,
        role=role,
        passed=passed,
        score=round(score, 6) if graded else None,
        latency_ms=round(_LATENCY[vendor] * float(rng.lognormal(0.0, 0.3)), 3),
        cost_usd=_COST[vendor],
        tokens_input=int(rng.integers(200, 400)),
        tokens_output=int(rng.integers(20, 80)),
    )


_EVENT_COLUMNS = EVALUATION_EVENTS.pick(
    "tenant_id", "event_id", "surface_id", "agent_id", "correlation_id", "run_mode",
    "provenance", "timestamp", "lens_version", "light_source_id", "light_source_requested",
    "substrate", "cohort_tags", "multiplex_role", "latency_ms", "cost_usd", "tokens_input",
    "tokens_output", "sdk_name", "sdk_version", "dimension_ids", "emission_stream",
    "emission_seq", "emission_final", "resource_attributes", "extras", "ingested_at",
    "contract_version_id",
)  # fmt: skip
_DIMENSION_COLUMNS = EVALUATION_DIMENSIONS.pick(
    "tenant_id", "event_id", "dimension_id", "passed", "score", "surface_id", "agent_id",
    "correlation_id", "run_mode", "provenance", "timestamp", "lens_version",
    "light_source_id", "light_source_requested", "substrate", "cohort_tags",
    "emission_stream", "ingested_at",
)  # fmt: skip
_RECEIPT_COLUMNS = EMISSION_RECEIPTS.pick(
    "tenant_id", "emission_stream", "emission_seq", "receipt_id", "kind", "final",
    "quarantined", "event_id", "surface_id", "event_time", "received_at",
)  # fmt: skip


def seed(store: Store, spec: MultiplexSpec, seed_value: int) -> Seeded:
    """Generate and store the calls; returns them as the truth."""
    calls = generate(spec, seed_value)
    ingested = spec.start + (spec.calls + spec.fallbacks + 1) * spec.spacing
    seqs: dict[str, int] = {}
    events, dimensions, receipts = [], [], []
    for call in calls:
        for o in call.outcomes:
            stream = f"{spec.surface_id}/{o.vendor}"
            seq = seqs.get(stream, 0)
            seqs[stream] = seq + 1
            if o.vendor == PRIMARY and seq in spec.lost:
                continue
            event_id = f"{call.correlation_id}-{o.vendor.split('/')[0]}"
            requested = o.vendor
            if call.fallback and o.role == "primary" and spec.fallback_requested is not None:
                requested = spec.fallback_requested
            layers = [
                spec.surface_id, "billing-triage", call.correlation_id, "production",
                "production-state", call.timestamp, "lv_1", o.vendor, requested,
                {"region": "eu", "prompt_hash": "ph_1"}, [f"multiplex.role={o.role}"],
            ]  # fmt: skip
            events.append(
                [
                    spec.tenant_id, event_id, *layers, o.role, o.latency_ms,
                    o.cost_usd, o.tokens_input, o.tokens_output, "testkit", "1",
                    ["correctness", "helpfulness"] if o.passed is not None else [],
                    stream, seq, False, "{}", "{}", ingested, spec.contract_version_id,
                ]
            )  # fmt: skip
            if o.passed is not None:
                for dimension_id, passed, score in (
                    ("correctness", o.passed, None),
                    ("helpfulness", None, o.score),
                ):
                    dimensions.append(
                        [spec.tenant_id, event_id, dimension_id, passed, score, *layers, stream,
                         ingested]
                    )  # fmt: skip
            receipts.append(
                [spec.tenant_id, stream, seq, f"r-{event_id}", "evaluation", False, False,
                 event_id, spec.surface_id, call.timestamp, ingested]
            )  # fmt: skip
    store.insert(EVALUATION_EVENTS.qualified, events, _EVENT_COLUMNS)
    store.insert(EVALUATION_DIMENSIONS.qualified, dimensions, _DIMENSION_COLUMNS)
    store.insert(EMISSION_RECEIPTS.qualified, receipts, _RECEIPT_COLUMNS)
    return Seeded(spec=spec, calls=calls, stored_events=len(events))
