"""Calibration of the sibling step test behind a silent-vendor label, in memory.

A sibling that did not change must pass the one-sided step test at its nominal rate:
`processors.drift.corroborate.step_p_value` at windows placed at random on wandering
series with no change (AR(1) per hour with lag-one correlation rho and marginal spread,
optionally a daily cycle, 100-300 events per hour, a month of hours; read in hour
buckets or summed into day buckets). The store benchmark sees this only through the
rare confident labels it produces; here each regime gets hundreds of tests, so a rate
a few times the nominal one shows.

Reported per regime: the share of p-values at or below the per-sibling level a label
uses with three siblings checked (1 % / 3), and at or below 5 %, against those nominal
rates. A label needs two siblings at the level, so its rate on independent siblings is
about three times the square of the first figure.

    python bench/corroboration_calibration.py --series 200 \
        --json-out bench/corroboration_calibration.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from processors.drift.corroborate import CorroborationConfig, sibling, step_p_value
from processors.series.changepoint import NoiseModel
from processors.series.cycle import PERIODS

HOURS = 720
# (rho per hour, spread, daily-cycle amplitude, bucket)
REGIMES = [
    (0.9, 0.02, 0.0, "hour"),
    (0.97, 0.02, 0.0, "hour"),
    (0.97, 0.05, 0.0, "hour"),
    (0.97, 0.02, 0.03, "hour"),
    (0.97, 0.05, 0.03, "hour"),
    (0.97, 0.02, 0.0, "day"),
    (0.97, 0.05, 0.0, "day"),
    (0.97, 0.05, 0.03, "day"),
]
WINDOWS = 5  # random windows tested per series
SIBLINGS = 3  # the Bonferroni divisor of the level the rate is read at


def series(
    rng: np.random.Generator, rho: float, spread: float, cycle: float, bucket: str
) -> tuple[np.ndarray, np.ndarray]:
    """Events and passes per bucket of one wandering month with no change."""
    n = rng.integers(100, 301, HOURS).astype(float)
    wander = NoiseModel(spread**2, rho).simulate(rng, (1, HOURS))[0]
    season = cycle * np.sin(2 * np.pi * (np.arange(HOURS) % 24) / 24)
    k = rng.binomial(n.astype(np.int64), np.clip(0.8 + wander + season, 0, 1)).astype(float)
    if bucket == "day":
        return n.reshape(-1, 24).sum(axis=1), k.reshape(-1, 24).sum(axis=1)
    return n, k


def regime_rates(
    regime: tuple[float, float, float, str], count: int, seed: int, cfg: CorroborationConfig
) -> dict[str, object]:
    rho, spread, cycle, bucket = regime
    rng = np.random.default_rng(seed)
    widest = 6 if bucket == "hour" else 2
    p_values: list[float] = []
    for _ in range(count):
        n, k = series(rng, rho, spread, cycle, bucket)
        sib = sibling(n, k, PERIODS[bucket])
        length = len(n)
        for _ in range(WINDOWS):
            lo = int(rng.integers(length // 10, length - length // 10))
            hi = lo + int(rng.integers(0, widest))
            p = step_p_value(sib, lo, hi, float(rng.choice([-1.0, 1.0])), cfg)
            if p is not None:
                p_values.append(p)
    ps = np.array(p_values)
    level = cfg.level / SIBLINGS
    return {
        "regime": f"rho={rho} spread={spread} cycle={cycle} {bucket}",
        "tests": int(ps.size),
        "at_label_level": round(float(np.mean(ps <= level)), 4),
        "label_level": round(level, 4),
        "at_5_percent": round(float(np.mean(ps <= 0.05)), 4),
    }


def markdown(rows: list[dict[str, object]]) -> str:
    lines = [
        "| regime | tests | p <= 1 %/3 (nominal 0.0033) | p <= 5 % (nominal 0.05) |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {r['regime']} | {r['tests']} | {r['at_label_level']} | {r['at_5_percent']} |"
        for r in rows
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=200, help="series per regime")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--json-out", help="write the results JSON here")
    args = parser.parse_args()
    cfg = CorroborationConfig()
    rows = []
    t0 = time.perf_counter()
    for i, regime in enumerate(REGIMES):
        rows.append(regime_rates(regime, args.series, args.seed + i, cfg))
        print(f"  {rows[-1]['regime']}: {rows[-1]['at_label_level']}", file=sys.stderr, flush=True)
    result = {"series": args.series, "windows": WINDOWS, "seed": args.seed, "regimes": rows,
              "wall_seconds": round(time.perf_counter() - t0, 1)}  # fmt: skip
    print(markdown(rows))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
