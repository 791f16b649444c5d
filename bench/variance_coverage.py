"""Coverage of the cleaned-variance interval on many seeded pure-noise series, in memory.

The store benchmark (`bench/drift_accuracy.py`) can afford ~100 noise surfaces per tau,
so its coverage figures carry a standard error of ~0.022 and move by several points
between runs. Here the same estimator (`processors.variance.decompose_buckets`, fed the
per-bucket sums the SQL query would return) runs on >= 1000 series per tau, which puts
the standard error near 0.007.

Truth is the generator's tau² on the probability scale (the population parameter the
interval claims to cover), not the realised variance of the 720 hour effects of one
series: that finite-sample quantity varies less than tau² is uncertain about, and an
interval measured against it would look over-covered.

Generators (`--generator`):
- `scenarios`: `testkit.scenarios.generate`, the very generator of the store
  benchmark (two cohorts at base +- 0.1, 50-500 events per bucket);
- `fast`: the same model drawn with vectorised numpy (same distribution, ~20x faster);
- `clustered`: `fast` with events grouped into sessions sharing a correlation id (sizes
  geometric, mean 2.5, cut at bucket ends), each event repeating its session's outcome
  with probability `--share` (design effect ~1.75 at the defaults): checks the clustered
  noise path too.

`--contrast` also scores the per-bucket plug-in noise deff x_t (1 - x_t) / (n_t - 1) (binary
outcomes), the estimator the method does NOT use, to show why (it under-covers).

    /work/venv/bin/python bench/variance_coverage.py --series 1000 --generator scenarios
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from processors.variance.decompose import (
    ClusteredBuckets,
    decompose_buckets,
    from_sums,
    paule_mandel,
)
from processors.variance.decompose import unclustered as unclustered_buckets
from testkit.scenarios import SurfaceSpec, generate

FloatArray = NDArray[np.float64]
TAUS = (0.0, 0.015, 0.03)
BAND = (0.92, 0.98)
Sim = Callable[[np.random.Generator, float, int], ClusteredBuckets]


def fast(rng: np.random.Generator, tau: float, buckets: int) -> ClusteredBuckets:
    """The scenario model for a pure-noise surface: bucket rate base + N(0, tau^2), half
    the events (binomially) in a cohort 0.1 above it, the rest 0.1 below."""
    n = rng.integers(50, 501, buckets)
    u = tau * rng.standard_normal(buckets)
    ent = rng.binomial(n, 0.5)
    k = rng.binomial(ent, np.clip(0.9 + u, 0, 1)) + rng.binomial(n - ent, np.clip(0.7 + u, 0, 1))
    return unclustered_buckets(n.astype(float), k.astype(float), k.astype(float))


def clustered(share: float) -> Sim:
    def draw(rng: np.random.Generator, tau: float, buckets: int) -> ClusteredBuckets:
        n = rng.integers(50, 501, buckets)
        u = tau * rng.standard_normal(buckets)
        bucket = np.repeat(np.arange(buckets), n)
        p = np.where(rng.random(bucket.size) < 0.5, 0.9, 0.7) + u[bucket]
        p = np.clip(p, 0, 1)
        # Sessions of consecutive events (geometric sizes, mean 2.5), cut at bucket ends.
        starts = np.r_[0, np.cumsum(n)[:-1]]
        first = np.zeros(bucket.size, dtype=bool)
        first[starts] = True
        first |= rng.random(bucket.size) < 0.4
        session = np.cumsum(first) - 1
        own = rng.random(bucket.size) < p
        common = (rng.random(session[-1] + 1) < p[first])[session]
        passed = np.where(rng.random(bucket.size) < share, common, own).astype(np.float64)
        m = np.bincount(session).astype(np.float64)
        k = np.bincount(session, weights=passed).astype(np.float64)
        sb = bucket[first]
        kk, km, mm = (_sum(sb, w, buckets) for w in (k * k, k * m, m * m))
        y = _sum(bucket, passed, buckets)
        c = _sum(sb, np.ones(sb.size), buckets)
        return from_sums([], n.astype(float), y, y, kk, km, mm, c)

    return draw


def _sum(index: NDArray[np.int64], weights: FloatArray, size: int) -> FloatArray:
    return np.bincount(index, weights=weights, minlength=size).astype(np.float64)


def scenarios(seed: int) -> Sim:
    counter = iter(range(10**9))

    def draw(rng: np.random.Generator, tau: float, buckets: int) -> ClusteredBuckets:
        spec = SurfaceSpec(f"cov-{tau}-{next(counter)}", buckets=buckets, tau=tau)
        n, k = np.zeros(buckets), np.zeros(buckets)
        for cell in generate(spec, seed):
            t = int((cell.bucket_start - spec.start) / dt.timedelta(hours=1))
            n[t] += cell.delivered
            k[t] += cell.passes
        return unclustered_buckets(n, k, k)

    return draw


def coverage(
    sim: Sim, tau: float, series: int, buckets: int, seed: int, contrast: bool = False
) -> dict[str, float | int]:
    """Share of series whose 95 % interval holds tau^2, with its binomial standard error."""
    rng = np.random.default_rng([seed, round(tau * 1e6)])
    hit = below = plug = 0
    estimates, deffs = [], []
    for _ in range(series):
        data = sim(rng, tau, buckets)
        d = decompose_buckets(data)
        assert d is not None
        hit += d.ci[0] <= tau**2 <= d.ci[1]
        below += tau**2 < d.ci[0]
        estimates.append(d.tau2)
        deffs.append(data.design_effect())
        if contrast:
            x = data.x
            v = data.design_effect() * np.maximum(x * (1 - x), 1e-9) / (data.n - 1)
            lo, hi = paule_mandel(x, v).ci
            plug += lo <= tau**2 <= hi
    rate = hit / series
    out: dict[str, float | int] = {
        "series": series,
        "coverage": round(rate, 4),
        "standard_error": round(float(np.sqrt(rate * (1 - rate) / series)), 4),
        "miss_below": round(below / series, 4),  # interval entirely above tau^2
        "miss_above": round((series - hit - below) / series, 4),
        "mean_tau2": float(np.mean(estimates)),
        "mean_design_effect": round(float(np.mean(deffs)), 3),
    }
    if contrast:
        out["plug_in_coverage"] = round(plug / series, 4)
    return out


def band_probability(rate: float, series: int) -> float:
    """Chance that `series` readings with true coverage `rate` land inside the band."""
    lo, hi = int(np.ceil(BAND[0] * series)), int(np.floor(BAND[1] * series))
    dist = stats.binom(series, rate)
    return float(dist.cdf(hi) - dist.cdf(lo - 1))


def run(args: argparse.Namespace) -> dict[str, object]:
    if args.generator == "scenarios":
        sim = scenarios(args.seed)
    else:
        sim = clustered(args.share) if args.generator == "clustered" else fast
    result: dict[str, object] = {"generator": args.generator, "seed": args.seed,
                                 "buckets": args.buckets, "band": list(BAND)}  # fmt: skip
    for tau in TAUS:
        t0 = time.perf_counter()
        cell = coverage(sim, tau, args.series, args.buckets, args.seed, args.contrast)
        cell["seconds"] = round(time.perf_counter() - t0, 1)
        cell["in_band"] = BAND[0] <= cell["coverage"] <= BAND[1]
        # How often a cell of the store benchmark (100 readings) lands in the band.
        cell["chance_in_band_with_100_readings"] = round(
            band_probability(float(cell["coverage"]), 100), 3
        )
        result[str(tau)] = cell
        print(json.dumps({str(tau): cell}), flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=200, help="series per tau")
    parser.add_argument("--buckets", type=int, default=720, help="hourly buckets (30 days)")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--generator", choices=("fast", "clustered", "scenarios"),
                        default="fast")  # fmt: skip
    parser.add_argument("--share", type=float, default=0.5, help="clustered: outcome sharing")
    parser.add_argument("--contrast", action="store_true", help="also score the plug-in noise")
    parser.add_argument("--json-out", help="write the results JSON here")
    args = parser.parse_args()
    result = run(args)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(text + "\n")


if __name__ == "__main__":
    main()
