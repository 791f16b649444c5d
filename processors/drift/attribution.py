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
3. No recorded change -> a cohort/run-mode mix shift explains it (bracket `cohort-mix`),
   or other surfaces on the same model alias moved in the same window (a silent vendor
   change: `light source`), or nothing does (bracket `unattributed`).
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
from processors.series.cells import Series
from processors.series.changepoint import ChangePoint as RawChangePoint
from schemas.analysis import (
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
    if corroboration is not None and corroboration.corroborated:
        surfaces = ", ".join(corroboration.corroborating_surfaces)
        return Label(
            "light source", True, f"silent change behind {corroboration.alias}: {surfaces}", None
        )
    return Label(
        "substrate",
        False,
        "significant shift with no recorded layer change and " + _uncorroborated(corroboration),
        "unattributed",
    )


def _uncorroborated(corroboration: Corroboration | None) -> str:
    if corroboration is None or not corroboration.corroborating_surfaces:
        return "no corroboration"
    return (
        f"too little corroboration: {len(corroboration.corroborating_surfaces)} of"
        f" {len(corroboration.surfaces_checked)} surfaces behind {corroboration.alias} moved"
        f" ({corroboration.required} needed)"
    )


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


def snap(at: dt.datetime, label: Label, changes: list[LayerChange]) -> dt.datetime:
    """A confident single-layer change happened when that layer switched: the detected
    time moves onto the recorded switch (its rollout span) when it lies outside it."""
    spans = [
        (c.changed_at, c.completed_at or c.changed_at)
        for c in changes
        if c.layer == label.source and c.changed_at is not None
    ]
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
) -> tuple[ChangePoint, tuple[dt.datetime, dt.datetime, str, str] | None]:
    """The labelled change point and, when it must be bracketed, (from, to, reason, why)."""
    ctx = context_for(series, raw, cfg, inflation)
    changes = changed_layers(ctx, cfg)
    contrasts = [
        contrast(ctx, c, [o for o in changes if o is not c], cfg.min_overlap_events)
        for c in changes
    ]
    mix = None if changes else cohort_mix(ctx, raw.delta, cfg)
    corroboration = None
    if not changes and not (mix is not None and explains_shift(mix, raw.delta)):
        corroboration = corroborate(dominant_alias(ctx), ctx.lo, ctx.hi, raw.delta)
    label = decide(ctx, raw, changes, contrasts, mix, corroboration, cfg)
    grid, step = series.grid, series.grid[1] - series.grid[0] if len(series.grid) > 1 else None
    at = snap(grid[ctx.row], label, changes)
    # The window's first bucket is the first at the new level; the bucket before it may
    # hold the change too (a day that switched at 14:00 reads mostly as the old level).
    start = min(grid[max(ctx.lo - 1, 0)], at)
    end = max(grid[ctx.hi], at) + (step or dt.timedelta(hours=1))
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
    )
    bracket = (start, end, label.bracket, label.reason) if label.bracket else None
    return point, bracket
