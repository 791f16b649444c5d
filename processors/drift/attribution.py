"""Which layer moved at a change point: `lens`, `light source`, `substrate` or `noise`.

Evidence comes from the layer values recorded on the events around the change (the
cells of `series.cells`), never from a guess:

1. A layer *changed* when a value's transition (10 % -> 90 % of the events: a switch or
   a rollout over hours to a week) overlaps the change's confidence window and the
   shares before it started and after it completed differ (a change far away cannot
   explain this shift).
2. One changed source -> that source; when old and new values shared buckets (a
   rollout), only if new vs old inside the same buckets moved the same way (else the
   point is bracketed *unattributed*). Several sources at once -> each is compared new
   vs old value inside the same buckets, holding the others' values fixed; if exactly
   one separates, it wins, otherwise the point is *confounded* (not confident).
3. No layer change on the events -> a cohort/run-mode mix shift explains it (bracket
   `cohort-mix`), or the shift starts at a change the operator's system recorded
   (`recorded`: deploy, prompt, config -> substrate; contract, fixture, lens -> lens;
   model, vendor, availability -> light source; confident only when its timing test
   passes and neither the alias's other surfaces nor the observers on the same calls
   contradict it), or other surfaces on the same model alias moved in the same window (a
   silent vendor change: `light source`), or nothing does (bracket `unattributed`).
   Recorded changes in the window are listed on every change point, explained or not.
4. A shift smaller than the practical threshold is `noise`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from processors.drift.evidence import (
    PRECEDENCE,
    AttributionConfig,
    Context,
    changed_layers,
    cohort_mix,
    context_for,
    contrast,
    dominant_alias,
    explains_shift,
)
from processors.drift.recorded import Cite
from processors.series.cells import Series
from processors.series.changepoint import ChangePoint as RawChangePoint
from schemas.analysis import (
    ChangeEvidence,
    ChangePoint,
    CohortMix,
    Contrast,
    Corroboration,
    Effect,
    LayerChange,
    LayerSource,
    Source,
    TimeWindow,
)
from schemas.times import to_store_time

Z_SEPARATE = 2.576  # a layer "separates" when its same-bucket contrast passes 1 %
Z_CONFIRM = 1.96  # a rolled-out layer is confirmed when its same-bucket contrast passes 5 %
Corroborate = Callable[[str, int, int, float], Corroboration | None]


@dataclass(frozen=True)
class Label:
    source: Source
    confident: bool
    reason: str
    bracket: str | None  # bracket reason, if the label must be bracketed


def decide(
    ctx: Context,
    raw: RawChangePoint,
    changes: list[LayerChange],
    contrasts: list[Contrast | None],
    mix: CohortMix | None,
    corroboration: Corroboration | None,
    cfg: AttributionConfig,
    recorded: Sequence[ChangeEvidence] = (),
) -> Label:
    if abs(raw.delta) < cfg.delta_threshold:
        return Label("noise", True, "shift below changePointDeltaThreshold", None)
    sources = sorted({c.layer for c in changes}, key=lambda s: PRECEDENCE[s])
    if len(sources) == 1:
        return _single(sources[0], contrasts, raw.delta)
    if len(sources) > 1:
        return _separate(changes, contrasts, raw.delta, sources)
    if mix is not None and explains_shift(mix, raw.delta):
        return Label("substrate", False, "cohort or run-mode mix changed", "cohort-mix")
    starting = [c for c in recorded if c.layer is not None and c.timing.starts_here]
    if starting:
        return _recorded(starting, corroboration)
    if corroboration is not None and corroboration.corroborated:
        return Label("light source", True, corroboration.reason(), None)
    near = [c for c in recorded if c.layer is not None]
    if near:
        first = min(near, key=lambda c: c.timing.p_value)
        return Label(
            first.layer or "substrate",
            False,
            f"{_named(first)} is in the window, but the shift does not start at it"
            f" (timing test: {'inside' if first.timing.inside else 'outside'} the confidence"
            f" set, placebo p {first.timing.p_value:.3f})",
            "unattributed",
        )
    return Label(
        "substrate",
        False,
        "significant shift with no recorded layer change and " + _uncorroborated(corroboration),
        "unattributed",
    )


def _named(change: ChangeEvidence) -> str:
    what = change.artifact_version or change.artifact_id or change.change_id
    return f"{change.kind} {what} recorded at {change.at:%Y-%m-%dT%H:%MZ}"


def _recorded(starting: list[ChangeEvidence], corroboration: Corroboration | None) -> Label:
    """The shift starts at recorded changes: their layer, when they agree and the
    controls do not contradict it; else confounded. A change of this surface's lens or
    substrate does not explain the alias's other surfaces moving too; a vendor or model
    change does not explain the observers on the same calls moving as much (the calls'
    inputs did). Observers that did not move contradict neither: the change reached the
    primary's answers only (a prompt that suits one model and not another)."""
    layers = sorted({c.layer for c in starting if c.layer}, key=lambda s: PRECEDENCE[s])
    named = "; ".join(_named(c) for c in starting)
    if len(layers) > 1:
        both = " + ".join(layers)
        return Label(
            layers[0], False, f"confounded: {both} changes recorded at the shift: {named}",
            "confounded",
        )  # fmt: skip
    (layer,) = layers
    against = _contradicted(layer, corroboration)
    if against:
        return Label(layer, False, f"confounded: starts at {named}, but {against}", "confounded")
    reason = f"starts at a recorded change: {named}"
    if corroboration is not None and corroboration.verdict == "vendor":
        reason += "; the observers on the same calls did not move"
    return Label(layer, True, reason, None)


def _contradicted(layer: LayerSource, corroboration: Corroboration | None) -> str | None:
    """What the controls say against a shift starting at a change of `layer`."""
    if corroboration is None:
        return None
    if layer != "light source" and corroboration.siblings_moved:
        return f"other surfaces behind {corroboration.alias} moved too"
    if layer == "light source" and corroboration.verdict == "shared":
        return "the observers on the same calls moved too (the calls' inputs changed)"
    return None


def _uncorroborated(corroboration: Corroboration | None) -> str:
    return "no corroboration" if corroboration is None else corroboration.shortfall()


def _single(source: LayerSource, contrasts: list[Contrast | None], delta: float) -> Label:
    """One source changed. Where its old and new values shared buckets (a rollout) the
    within-bucket contrast is checked before a confident label: it confirms when it
    moved the shift's way (|z| >= Z_CONFIRM), and refutes when it excludes the shift
    and not zero (the new value does not differ from the old: something else moved).
    An instant switch has no shared bucket, and a short overlap too few events to tell
    either way: both are confident on the recorded switch."""
    measured = [c for c in contrasts if c is not None]
    if any(abs(c.z) >= Z_CONFIRM and np.sign(c.delta) == np.sign(delta) for c in measured):
        return Label(
            source, True, f"{source} rolled out at the shift, confirmed within buckets", None
        )
    if measured and all(_refutes(c, delta) for c in measured):
        return Label(
            source,
            False,
            f"{source} rolled out at the shift, but its new and old values do not differ"
            " within buckets",
            "unattributed",
        )
    return Label(source, True, f"{source} changed at the shift", None)


def _refutes(c: Contrast, delta: float) -> bool:
    """The contrast's interval holds zero but not the detected shift."""
    return c.ci_low <= 0.0 <= c.ci_high and not c.ci_low <= delta <= c.ci_high


def _separate(
    changes: list[LayerChange],
    contrasts: list[Contrast | None],
    delta: float,
    sources: Sequence[LayerSource],
) -> Label:
    separated = [
        (ch, ct)
        for ch, ct in zip(changes, contrasts, strict=True)
        if ct is not None and abs(ct.z) >= Z_SEPARATE and np.sign(ct.delta) == np.sign(delta)
    ]
    winners = {ch.layer for ch, _ in separated}
    testable = all(ct is not None for ct in contrasts)
    if len(winners) == 1 and testable:
        (winner,) = winners
        return Label(winner, True, "separated from the other changed layers within buckets", None)
    changed_at = {c.layer: c.changed_at or dt.datetime.max for c in changes}
    first = min(sources, key=lambda s: (changed_at[s], PRECEDENCE[s]))
    return Label(first, False, f"confounded: {' + '.join(sources)} changed together", "confounded")


def snap(
    at: dt.datetime,
    label: Label,
    changes: list[LayerChange],
    recorded: Sequence[ChangeEvidence] = (),
) -> dt.datetime:
    """A confident single-layer change happened when that layer switched: the detected
    time moves onto the recorded switch (its rollout span) when it lies outside it, or
    onto the recorded change the shift starts at."""
    spans = [
        (c.changed_at, c.completed_at or c.changed_at)
        for c in changes
        if c.layer == label.source and c.changed_at is not None
    ]
    if not spans:
        spans = [
            (moment, moment)
            for c in recorded
            if c.layer == label.source and c.timing.starts_here
            for moment in [to_store_time(c.timing.moment)]
        ][:1]
    if not label.confident or len(spans) != 1:
        return at
    first, last = spans[0]
    return min(max(at, first), last)


def attribute(
    series: Series,
    raw: RawChangePoint,
    dimension_id: str,
    inflation: float,
    corroborate: Corroborate,
    cfg: AttributionConfig,
    cite: Cite | None = None,
) -> tuple[ChangePoint, tuple[dt.datetime, dt.datetime, str, str] | None]:
    """The labelled change point and, when it must be bracketed, (from, to, reason, why)."""
    ctx = context_for(series, raw, cfg, inflation)
    grid, step = series.grid, series.grid[1] - series.grid[0] if len(series.grid) > 1 else None
    width = step or dt.timedelta(hours=1)
    recorded = cite(series, raw, grid[max(ctx.lo - 1, 0)], grid[ctx.hi] + width) if cite else []
    changes = changed_layers(ctx, cfg)
    contrasts = [
        contrast(ctx, c, [o for o in changes if o is not c], cfg.min_overlap_events)
        for c in changes
    ]
    mix = None if changes else cohort_mix(ctx, raw.delta, cfg)
    corroboration = None
    if not changes and not (mix is not None and explains_shift(mix, raw.delta)):
        corroboration = corroborate(dominant_alias(ctx), ctx.lo, ctx.hi, raw.delta)
    label = decide(ctx, raw, changes, contrasts, mix, corroboration, cfg, recorded)
    at = snap(grid[ctx.row], label, changes, recorded)
    # The window's first bucket is the first at the new level; the bucket before it may
    # hold the change too (a day that switched at 14:00 reads mostly as the old level).
    start = min(grid[max(ctx.lo - 1, 0)], at)
    end = max(grid[ctx.hi], at) + width
    half = 1.96 * raw.delta_se
    point = ChangePoint(
        timestamp=at,
        dimension_id=dimension_id,
        source=label.source,
        window=TimeWindow.of(start, end),
        confident=label.confident,
        reason=label.reason,
        effect=Effect(
            before=raw.before,
            after=raw.after,
            delta=raw.delta,
            ci_low=raw.delta - half,
            ci_high=raw.delta + half,
        ),
        test_statistic=raw.gain,
        penalty=raw.penalty,
        p_value=raw.p_value,
        layer_changes=changes,
        within_bucket_contrasts=[c for c in contrasts if c is not None],
        corroboration=corroboration,
        cohort_mix=mix,
        change_events=recorded,
    )
    bracket = (start, end, label.bracket, label.reason) if label.bracket else None
    return point, bracket
