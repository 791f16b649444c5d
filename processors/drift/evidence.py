"""Evidence around one change point, read from the cells (bucket x layer values):
which layer columns switched and when, same-bucket contrasts of new vs old values, and
whether a shifted mix of cohorts / run modes explains the move."""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from processors.series.cells import Cell, Series, layer_names
from processors.series.changepoint import ChangePoint as RawChangePoint
from schemas.analysis import CohortMix, Contrast, LayerChange, LayerSource

SOURCE_OF_LAYER: dict[str, LayerSource] = {
    "lens_version": "lens",
    "light_source_id": "light source",
}
PRECEDENCE = {"lens": 0, "light source": 1, "substrate": 2}


@dataclass(frozen=True)
class AttributionConfig:
    delta_threshold: float = 0.0
    neighbourhood: int = 72  # buckets each side read for contrasts and the cohort mix
    near: int = 12  # buckets each side of a layer's transition whose shares are compared
    rollout_reach: int = 192  # buckets each side of the window searched for a transition
    share_change: float = 0.3  # total-variation distance that counts as a layer change
    slack: int = 2  # buckets the layer switch may sit outside the time window
    min_overlap_events: float = 30.0  # same-bucket events each side needed to compare
    mix_change: float = 0.1


def source_of(layer: str) -> LayerSource:
    return SOURCE_OF_LAYER.get(layer, "substrate")


def _shares(cells: Iterable[Cell], key: Callable[[Cell], object]) -> dict[object, float]:
    total: dict[object, float] = defaultdict(float)
    for c in cells:
        total[key(c)] += c.n
    s = sum(total.values())
    return {k: v / s for k, v in total.items()} if s > 0 else {}


def _tv(a: dict[object, float], b: dict[object, float]) -> float:
    return 0.5 * sum(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in set(a) | set(b))


@dataclass(frozen=True)
class Context:
    """The buckets around one change, as grid rows."""

    series: Series
    row: int  # first bucket of the new level
    lo: int
    hi: int
    before: tuple[int, int]  # [start, end) rows read as "before"
    after: tuple[int, int]
    inflation: float = 1.0  # sd factor for hour-to-hour overdispersion

    def cells_in(self, rows: tuple[int, int]) -> list[Cell]:
        a, b = rows
        mask = (self.series.cell_index >= a) & (self.series.cell_index < b)
        return [c for c, m in zip(self.series.cells, mask, strict=True) if m]


def context_for(
    series: Series, cp: RawChangePoint, cfg: AttributionConfig, inflation: float = 1.0
) -> Context:
    idx = series.index
    seg_a, seg_b = idx[cp.segment[0]], idx[cp.segment[1] - 1] + 1
    row, lo, hi = int(idx[cp.index]), int(idx[cp.lo]), int(idx[cp.hi])
    before = (max(int(seg_a), lo - cfg.neighbourhood), lo)
    after = (hi + 1, min(int(seg_b), hi + 1 + cfg.neighbourhood))
    if before[1] <= before[0]:
        before = (max(int(seg_a), row - cfg.neighbourhood), row)
    if after[1] <= after[0]:
        after = (row, min(int(seg_b), row + cfg.neighbourhood))
    return Context(series, row, lo, hi, before, after, inflation)


def changed_layers(ctx: Context, cfg: AttributionConfig) -> list[LayerChange]:
    """Layer columns whose values switched at this change. A value's *transition* runs
    from the first bucket where it carries 10 % of the events to the first where it
    carries 90 % (or 90 % of the most it reaches): an instant switch or a rollout over
    hours to a week. A column changed when such a transition overlaps the change's
    window (+- slack) and the shares just before it started and just after it completed
    differ by `share_change`: shares are compared across the whole transition, so a slow
    rollout counts as much as a switch. Of several, the transition nearest the change."""
    reach = max(cfg.rollout_reach, cfg.near, ctx.hi - ctx.lo + 1)
    span_rows = (max(0, ctx.lo - reach), min(len(ctx.series.grid), ctx.hi + 1 + reach))
    total, counts = _value_counts(ctx, span_rows)
    out = []
    for name in layer_names(ctx.series.cells):
        best: tuple[int, LayerChange] | None = None
        for value, hits in counts.get(name, {}).items():
            span = _transition(total, hits, span_rows)
            if span is None or span[1] < ctx.lo - cfg.slack or span[0] > ctx.hi + cfg.slack:
                continue
            before = (max(span_rows[0], span[0] - cfg.near), span[0])
            after = (span[1] + 1, min(span_rows[1], span[1] + 1 + cfg.near))
            sb = _row_shares(total, counts[name], before)
            sa = _row_shares(total, counts[name], after)
            if not sb or not sa or _tv(sb, sa) < cfg.share_change:
                continue
            if sa.get(value, 0.0) <= sb.get(value, 0.0):
                continue
            old = max(sb, key=lambda v: sb[v] - sa.get(v, 0.0))
            distance = max(span[0] - ctx.row, ctx.row - span[1], 0)
            change = LayerChange(
                layer=source_of(name),
                column=name.removeprefix("substrate:"),
                from_value=str(old),
                to_value=str(value),
                before={str(k): round(v, 4) for k, v in sb.items()},
                after={str(k): round(v, 4) for k, v in sa.items()},
                changed_at=ctx.series.grid[span[0]],
                completed_at=ctx.series.grid[span[1]],
            )
            if best is None or distance < best[0]:
                best = (distance, change)
        if best is not None:
            out.append(best[1])
    return out


def _value_counts(
    ctx: Context, rows: tuple[int, int]
) -> tuple[np.ndarray, dict[str, dict[str, np.ndarray]]]:
    """Events per grid row, and per layer column and value, over `rows`."""
    total = np.zeros(len(ctx.series.grid))
    counts: dict[str, dict[str, np.ndarray]] = defaultdict(dict)
    names = layer_names(ctx.series.cells)
    for c, r in zip(ctx.series.cells, ctx.series.cell_index, strict=True):
        if not rows[0] <= r < rows[1]:
            continue
        total[r] += c.n
        for name in names:
            value = c.layer(name)
            hits = counts[name].get(value)
            if hits is None:
                hits = counts[name][value] = np.zeros(len(ctx.series.grid))
            hits[r] += c.n
    return total, counts


def _row_shares(
    total: np.ndarray, values: dict[str, np.ndarray], rows: tuple[int, int]
) -> dict[object, float]:
    a, b = rows
    n = float(total[a:b].sum()) if b > a else 0.0
    if n <= 0:
        return {}
    return {v: float(h[a:b].sum()) / n for v, h in values.items() if h[a:b].sum() > 0}


def _transition(
    total: np.ndarray, hits: np.ndarray, rows: tuple[int, int]
) -> tuple[int, int] | None:
    """Rows where a value first carries 10 % and then 90 % (of the most it reaches) of
    the events: its rollout. None when it already carried 10 % at the first row read
    (its start is not in view) or never does."""
    idx = np.arange(rows[0], rows[1])
    idx = idx[total[idx] > 0]
    if idx.size == 0:
        return None
    share = hits[idx] / total[idx]
    started = np.flatnonzero(share >= 0.1)
    if started.size == 0 or started[0] == 0:
        return None
    rest = share[started[0] :]
    done = np.flatnonzero(rest >= min(0.9, 0.9 * float(rest.max())))
    return int(idx[started[0]]), int(idx[started[0] + done[0]])


def _column_key(change: LayerChange) -> str:
    if change.layer == "substrate":
        return f"substrate:{change.column}"
    return "lens_version" if change.layer == "lens" else "light_source_id"


def contrast(
    ctx: Context, change: LayerChange, others: list[LayerChange], min_overlap: float = 30.0
) -> Contrast | None:
    """Risk difference new vs old value of `change`, Mantel-Haenszel weighted over strata
    (bucket x the other changed layers' values); only buckets holding both values count,
    and None when they hold fewer than `min_overlap` events of the smaller side. Read
    over the change's context and the whole of the layer's transition."""
    key = _column_key(change)
    grid = ctx.series.grid
    first, last = ctx.before[0], ctx.after[1]
    if change.changed_at is not None and change.completed_at is not None:
        first = min(first, bisect.bisect_left(grid, change.changed_at))
        last = max(last, bisect.bisect_left(grid, change.completed_at) + 1)
    old, new = change.from_value, change.to_value
    other_keys = [_column_key(o) for o in others]
    arms: dict[tuple[object, ...], list[float]] = defaultdict(lambda: [0.0] * 6)
    for c, r in zip(ctx.series.cells, ctx.series.cell_index, strict=True):
        if not first <= r < last:
            continue
        value = c.layer(key)
        if value not in (old, new):
            continue
        arm = arms[(int(r), *[c.layer(k) for k in other_keys])]
        j = 0 if value == new else 3
        arm[j] += c.n
        arm[j + 1] += c.y
        arm[j + 2] += c.yy
    num = den = var = overlap = 0.0
    strata = 0
    for n1, y1, yy1, n0, y0, yy0 in arms.values():
        if n1 <= 0 or n0 <= 0:
            continue
        w = n1 * n0 / (n1 + n0)
        p1, p0 = y1 / n1, y0 / n0
        num += w * (p1 - p0)
        den += w
        var += w * w * unit_variance(n1 + n0, y1 + y0, yy1 + yy0) * (1 / n1 + 1 / n0)
        overlap += min(n1, n0)
        strata += 1
    if den <= 0 or overlap < min_overlap:
        return None
    delta = num / den
    se = float(np.sqrt(var)) / den
    return Contrast(
        column=change.column,
        from_value=old,
        to_value=new,
        delta=delta,
        ci_low=delta - 1.96 * se,
        ci_high=delta + 1.96 * se,
        z=delta / se if se > 0 else 0.0,
        overlap_events=overlap,
        strata=strata,
    )


def cohort_mix(ctx: Context, delta: float, cfg: AttributionConfig) -> CohortMix | None:
    """Shift explained by a changed mix of (run mode, cohort tags) strata rather than by
    rates moving inside the strata; None when the mix barely moved."""
    before, after = ctx.cells_in(ctx.before), ctx.cells_in(ctx.after)
    pb, pa = _shares(before, lambda c: c.stratum), _shares(after, lambda c: c.stratum)
    distance = _tv(pb, pa)
    if distance < cfg.mix_change:
        return None
    rate_b, rate_a = _rates(before), _rates(after)
    overall_b = sum(c.y for c in before) / max(sum(c.n for c in before), 1e-9)
    from_mix = sum((pa.get(s, 0.0) - pb.get(s, 0.0)) * rate_b.get(s, (overall_b, 0))[0] for s in pa)
    from_mix -= sum(pb[s] * rate_b[s][0] for s in pb if s not in pa)
    common = [s for s in pa if s in rate_b and s in rate_a]
    weight = sum(pa[s] for s in common)
    if weight <= 0:
        return None
    within = sum(pa[s] * (rate_a[s][0] - rate_b[s][0]) for s in common) / weight
    var = sum((pa[s] / weight) ** 2 * (rate_a[s][1] + rate_b[s][1]) for s in common)
    se = float(np.sqrt(var)) * max(1.0, ctx.inflation)
    return CohortMix(
        mix_distance=distance,
        delta_from_mix=from_mix,
        delta_within_strata=within,
        within_ci_low=within - 1.96 * se,
        within_ci_high=within + 1.96 * se,
    )


def unit_variance(n: float, y: float, yy: float) -> float:
    """Per-event variance from sums; for pass/fail yy = y, so this is p(1-p)."""
    mean = y / n
    return max(yy / n - mean * mean, 1e-6)


def _rates(cells: list[Cell]) -> dict[object, tuple[float, float]]:
    """Per stratum: mean outcome and its sampling variance."""
    n: dict[object, float] = defaultdict(float)
    y: dict[object, float] = defaultdict(float)
    yy: dict[object, float] = defaultdict(float)
    for c in cells:
        n[c.stratum] += c.n
        y[c.stratum] += c.y
        yy[c.stratum] += c.yy
    return {s: (y[s] / n[s], unit_variance(n[s], y[s], yy[s]) / n[s]) for s in n}


def explains_shift(mix: CohortMix, delta: float) -> bool:
    """The mix carries at least half the shift and the within-strata shift does not."""
    return abs(mix.delta_from_mix) >= 0.5 * abs(delta) and (
        abs(mix.delta_within_strata) < 0.5 * abs(delta)
        or mix.within_ci_low <= 0.0 <= mix.within_ci_high
    )


def dominant_alias(ctx: Context) -> str:
    cells = ctx.cells_in((ctx.before[0], ctx.after[1]))
    shares = _shares(cells, lambda c: c.light_source_requested or c.light_source_id)
    return str(max(shares, key=lambda k: shares[k])) if shares else ""
