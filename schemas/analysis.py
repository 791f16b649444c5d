"""Response shapes of the drift and variance analyses (the Guide's chapters 13 and 14).

JSON uses the Guide's camelCase names (`model_dump(by_alias=True)`); Python code uses
snake_case. Source labels and reasons are closed sets, spelled as the Guide spells them.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from schemas import jsoncodec
from schemas.completeness import Unknown, WindowsFreshness
from schemas.events import DEFAULT_TENANT
from schemas.retention import RetentionReach

Source = Literal["substrate", "light source", "lens", "noise"]
LayerSource = Literal["lens", "light source", "substrate"]
SOURCES: tuple[Source, ...] = ("substrate", "light source", "lens", "noise")
BracketReason = Literal[
    "sparse",
    "delivery-loss",
    "delivery-unmeasurable",
    "confounded",
    "unattributed",
    "cohort-mix",
    "availability",
]
BRACKET_REASONS: tuple[BracketReason, ...] = (
    "sparse",
    "delivery-loss",
    "delivery-unmeasurable",
    "confounded",
    "unattributed",
    "cohort-mix",
    "availability",
)
Verdict = Literal["insufficient-data", "delivery-biased", "confounded", "viable"]
VERDICTS: tuple[Verdict, ...] = ("insufficient-data", "delivery-biased", "confounded", "viable")
LifecycleStatus = Literal["lock", "pin", "supersede", "discard"]
Bucket = Literal["hour", "day"]
Role = Literal["primary", "observer", "all"]
ROLES: tuple[Role, ...] = ("primary", "observer", "all")


class Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict; datetimes as RFC 3339 UTC (`...Z`), naive ones read as UTC."""
        out: dict[str, Any] = jsoncodec.plain(self.model_dump(by_alias=True))
        return out


class SeriesRead(Model):
    """Which events a series took on its surface (`processors.series.cells`): `role`
    primary (what the agent used: events with multiplex role `primary`, a fallback
    counting for the vendor that answered, and events without a role), observer, or
    all (every event, blended: only on request); `light_source` narrows it to one light
    source. `multiplexed`: the surface carried multiplex roles in the window; `events`
    taken and `left_out` (the other events the filters would have read); `observers`:
    the observer light sources there are, each its own series."""

    role: Role = "primary"
    light_source: str | None = None
    multiplexed: bool = False
    events: int = 0
    left_out: int = 0
    observers: list[str] = []


class TimeWindow(Model):
    from_: dt.datetime = Field(alias="from")
    to: dt.datetime

    @classmethod
    def of(cls, start: dt.datetime, end: dt.datetime) -> TimeWindow:
        return cls.model_validate({"from": start, "to": end})


class Interval(Model):
    estimate: float
    ci_low: float
    ci_high: float
    level: float = 0.95


class Effect(Model):
    """Shift of the level at the change: after - before, with its interval."""

    before: float
    after: float
    delta: float
    ci_low: float
    ci_high: float


class LayerChange(Model):
    """A layer column whose values differ before and after the change (shares by events)."""

    layer: LayerSource
    column: str
    from_value: str
    to_value: str
    before: dict[str, float]
    after: dict[str, float]
    changed_at: dt.datetime | None = None  # first bucket where the new value carries 10 %
    completed_at: dt.datetime | None = None  # first bucket where it carries 90 %


class Contrast(Model):
    """New vs old value of one layer compared inside the same buckets (and the same values
    of the other changed layers), so hour-to-hour noise and other layers cancel out."""

    column: str
    from_value: str
    to_value: str
    delta: float
    ci_low: float
    ci_high: float
    z: float
    overlap_events: float
    strata: int


ObserverVerdict = Literal["vendor", "shared", "inconclusive"]


class ObserverControl(Model):
    """The observers on the primary's own calls as a control (a paired within-call
    contrast): per call (correlation id) the primary's outcome less the mean of its
    observers', stepped across the change window. `vendor`: the contrast moved the
    shift's way (one-sided `contrast_p_value` at `level`, carrying at least half the
    shift) while the observers did not (`observer_p_value` above 0.05): the primary's
    vendor moved. `shared`: the observers moved the same way (at `level`) and the
    contrast carries less than half the shift: the calls' inputs moved, not the
    vendor. Steps are GLS estimates on each series' own AR(1) noise, calibrated on
    placebo windows (`processors.drift.corroborate`)."""

    observers: list[str]
    calls_before: int
    calls_after: int
    primary_step: float
    observer_step: float
    contrast: float
    contrast_ci_low: float
    contrast_ci_high: float
    contrast_p_value: float
    observer_p_value: float
    level: float
    test: str = "paired within-call contrast: GLS step, AR(1) noise, placebo-calibrated t"
    verdict: ObserverVerdict


class Corroboration(Model):
    alias: str
    surfaces_checked: list[str]
    corroborating_surfaces: list[str]
    p_values: dict[str, float]
    required: int = 1  # corroborating surfaces needed for a silent-vendor label
    observers: ObserverControl | None = None  # the primary's own calls, when multiplexed

    @property
    def verdict(self) -> ObserverVerdict | None:
        """The observer control's verdict, None when there was none."""
        return self.observers.verdict if self.observers is not None else None

    @property
    def siblings_moved(self) -> bool:
        """Enough other surfaces behind the alias moved, and the observers on the same
        calls do not say the inputs did: what no change of this surface alone explains."""
        enough = self.required > 0 and len(self.corroborating_surfaces) >= self.required
        return enough and self.verdict != "shared"

    @property
    def corroborated(self) -> bool:
        """Evidence of a silent vendor change: the observers on the same calls say so,
        or enough siblings moved and the observers do not say the inputs moved."""
        return self.verdict == "vendor" or self.siblings_moved

    def reason(self) -> str:
        """Why a silent-vendor label was given (or, `shortfall`, was not)."""
        found = []
        if self.corroborating_surfaces:
            found.append(", ".join(self.corroborating_surfaces))
        if self.observers is not None and self.observers.verdict == "vendor":
            found.append(
                f"observers on the same calls unchanged ({', '.join(self.observers.observers)};"
                f" within-call contrast {self.observers.contrast:+.3f})"
            )
        return f"silent change behind {self.alias}: {'; '.join(found)}"

    def shortfall(self) -> str:
        if self.observers is not None and self.observers.verdict == "shared":
            return (
                f"the observers on the same calls moved too ({self.observers.observer_step:+.3f}):"
                " the calls' inputs changed, not the primary's vendor"
            )
        if not self.corroborating_surfaces:
            return "no corroboration"
        return (
            f"too little corroboration: {len(self.corroborating_surfaces)} of"
            f" {len(self.surfaces_checked)} surfaces behind {self.alias} moved"
            f" ({self.required} needed)"
        )


class CohortMix(Model):
    mix_distance: float
    delta_from_mix: float
    delta_within_strata: float
    within_ci_low: float
    within_ci_high: float


class Timing(Model):
    """Does the shift start at a recorded change (docs/changes.md)? `inside`: the change's
    bucket is in the change point's 95% confidence set of times; `p_value`: the share of
    placebo times (every split of the change point's segment) that fit the shift at
    least as well as the change's; `starts_here`: both, at `TIMING_LEVEL`."""

    moment: dt.datetime  # the time tested: the change's, or a mark's start or end
    inside: bool
    p_value: float
    starts_here: bool


class ChangeEvidence(Model):
    """A recorded change (`holonograph.change_events`) inside a change point's window."""

    change_id: str
    origin: str
    kind: str
    layer: LayerSource | None  # what a shift starting at it is attributed to
    at: dt.datetime
    ends_at: dt.datetime | None = None
    surface_id: str | None = None  # None: agent-wide (agent None too: tenant-wide)
    agent_id: str | None = None
    light_source_id: str | None = None
    artifact_id: str | None = None
    artifact_version: str | None = None
    actor: str | None = None
    description: str
    timing: Timing


class ChangePoint(Model):
    timestamp: dt.datetime
    dimension_id: str
    source: Source
    window: TimeWindow
    confident: bool
    reason: str
    effect: Effect
    test_statistic: float
    penalty: float
    p_value: float
    layer_changes: list[LayerChange] = []
    within_bucket_contrasts: list[Contrast] = []
    corroboration: Corroboration | None = None
    cohort_mix: CohortMix | None = None
    change_events: list[ChangeEvidence] = []
    # The reasons of the bracketed windows this point's window overlaps (its own
    # dimension's or the surface's): read them before acting on the label.
    brackets: list[BracketReason] = []


class BracketedWindow(Model):
    from_: dt.datetime = Field(alias="from")
    to: dt.datetime
    reason: BracketReason
    detail: str = ""
    dimension_id: str = ""

    @classmethod
    def of(
        cls,
        start: dt.datetime,
        end: dt.datetime,
        reason: str,
        detail: str = "",
        dimension_id: str = "",
    ) -> BracketedWindow:
        return cls.model_validate(
            {
                "from": start,
                "to": end,
                "reason": reason,
                "detail": detail,
                "dimensionId": dimension_id,
            }
        )


class NoiseModel(Model):
    """The bucket-level noise a dimension's change points were calibrated on: the true
    level's deviations beyond sampling, independent or AR(1) wander."""

    kind: Literal["independent", "ar1"]
    spread: float  # standard deviation of the deviations
    rho: float  # their lag-one correlation per bucket (0 when independent)
    long_run_sd: float  # sqrt(spread^2 (1 + rho) / (1 - rho)): what a long mean feels
    null: Literal["permutation", "simulated"]  # how the detection penalty was calibrated


class CycleRemoved(Model):
    """The daily (hour buckets) or weekly (day buckets) cycle taken out of a dimension's
    series before its change points were sought."""

    period_buckets: int
    peak_to_trough: float  # of the removed phase profile


class DimensionSummary(Model):
    dimension_id: str
    outcome: Literal["passed", "score"]
    buckets: int
    events: int
    overdispersion_tau: float
    change_points: int
    # False when the series has too few buckets to test: "no change" was not shown.
    tested: bool = True
    noise_model: NoiseModel | None = None  # None when not tested
    cycle: CycleRemoved | None = None  # None: no cycle removed (too few cycles, or untested)


class DriftParameters(Model):
    bucket: Bucket
    change_point_delta_threshold: float
    run_modes: list[str]
    provenances: list[str]
    alpha: float
    permutations: int
    min_segment_buckets: int
    sparse_min_events: int
    seed: int


DeliveryMeasurable = Literal["all", "part", "none"]


class DeliveryLossCheck(Model):
    """Whether delivery loss can be measured for the events a run read: only for those
    that carry emission ordinals (OpenTelemetry GenAI evaluations carry none, so no
    stream accounts for them; completeness calls their surface `unknown: no emission
    ordinals`). `measurable`: for all of them, part or none."""

    measurable: DeliveryMeasurable
    events: int
    without_ordinals: int
    share_without_ordinals: float
    status: Unknown | None = None  # `unknown: no emission ordinals` when any has none
    detail: str = ""


class DriftReport(Model):
    """Mirrors `POST /lens/attribute`: surfaceId, eventCount, changePoints,
    bracketedWindows; plus the run's id, tenant (None: every tenant), window, parameters
    and per-dimension summary."""

    run_id: str
    tenant_id: str | None = None
    surface_id: str
    dimension_id: str | None
    since: dt.datetime
    until: dt.datetime
    event_count: int
    change_points: list[ChangePoint]
    bracketed_windows: list[BracketedWindow]
    dimensions: list[DimensionSummary]
    parameters: DriftParameters
    notes: list[str] = []
    series: SeriesRead = Field(default_factory=SeriesRead)
    # None on reports recorded before the check existed
    delivery_loss: DeliveryLossCheck | None = None
    # The tenant's retention beside the window (None: its rows are kept forever)
    retention: RetentionReach | None = None
    # whether the delivery-loss windows had seen every event read (None: no table)
    freshness: WindowsFreshness | None = None


class VarianceReading(Model):
    """`POST /lens/decomposeVariance`: the observed spread of bucket outcomes split into
    measurement noise and real (between-bucket) variance, over one tenant's events
    (readings stored before tenancy are tenant `default`)."""

    event_id: str
    tenant_id: str = DEFAULT_TENANT
    surface_id: str
    dimension_id: str
    since: dt.datetime
    until: dt.datetime
    bucket: Bucket
    run_modes: list[str]
    provenances: list[str]
    outcome: Literal["passed", "score"]
    buckets: int
    events: int
    clusters: int
    mean: float | None
    observed_variance: float | None
    noise_variance: float | None
    cleaned_variance: float | None
    cleaned_variance_ci: Interval | None
    noise_share: float | None
    design_effect: float
    q_statistic: float | None
    method: str
    created_at: dt.datetime
    # Readings stored before series selection read every event of the surface.
    series: SeriesRead = Field(default_factory=lambda: SeriesRead(role="all"))


class StratumReading(Model):
    """A reading restricted to one combination of layer values."""

    layers: dict[str, str]
    buckets: int
    events: int
    mean: float | None
    cleaned_variance: float | None
    cleaned_variance_ci: Interval | None
    viable: bool
    reason: str = ""


class VarianceEvaluation(Model):
    """`POST /lens/decomposition/evaluate`: the verdict on a reading and what would fix it."""

    event_id: str
    target_event_id: str
    verdict: Verdict
    reasons: list[str]
    guidance: list[str]
    strata: list[StratumReading] = []
    checks: dict[str, Any] = {}
    created_at: dt.datetime


class LifecycleRecord(Model):
    """`POST /lens/decomposition/lifecycle`: a governance decision on a reading."""

    event_id: str
    target_event_id: str
    status: LifecycleStatus
    approver_id: str
    pinned_label: str | None = None
    superseded_by: str | None = None
    created_at: dt.datetime
