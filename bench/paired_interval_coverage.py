"""Coverage of compare's paired difference of pass rates, by simulation.

`holonograph compare` reports, per observer against the primary on the same calls, the
observer's pass rate minus the primary's with a 95% interval
(`processors.compare.job.paired_rate_difference`: Newcombe's hybrid score interval
for paired proportions, method 10 of Newcombe 1998). Here that very function runs on
multinomial draws of paired calls — each call lands in one of four cells: both
passed, only the observer, only the primary, neither — over a grid of true rates
(the primary's pass rate, the observer's difference, how often the two disagree),
at 30 and 400 paired calls, and counts how often the interval holds the true
difference. The Wald interval it replaced runs on the same draws for contrast, and
so does the share of intervals of zero width among draws where some call differed.

    python bench/paired_interval_coverage.py                # ~1 min, writes the results
    python bench/paired_interval_coverage.py --replicates 2000 --no-write   # smoke run
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from processors.compare.job import paired_rate_difference

HERE = Path(__file__).resolve().parent
SIZES = (30, 400)
PRIMARY_RATES = (0.5, 0.7, 0.85, 0.95)
DIFFERENCES = (-0.1, 0.0, 0.1)
EXTRA_DISAGREEMENT = (0.02, 0.1, 0.3)  # P(calls differ) beyond |difference|
TARGET = 0.93  # the floor the issue sets at 30 paired calls
_Z = 1.959963984540054

Interval = Callable[[int, int, int, int], tuple[float, float] | None]


def newcombe(both: int, observer: int, primary: int, n: int) -> tuple[float, float] | None:
    interval = paired_rate_difference(both, observer, primary, n)
    return None if interval is None else (interval.ci_low, interval.ci_high)


def wald(both: int, observer: int, primary: int, n: int) -> tuple[float, float] | None:
    """The interval compare used before: the Wald interval of a paired difference."""
    if n <= 0:
        return None
    d = (observer - primary) / n
    half = _Z * math.sqrt(max((observer + primary) / n - d * d, 0.0) / n)
    return max(-1.0, d - half), min(1.0, d + half)


def scenarios() -> list[tuple[float, float, float, tuple[float, float, float, float]]]:
    """(primary rate, difference, disagreement, cell probabilities) of every feasible
    grid point."""
    out = []
    for rate, diff, extra in itertools.product(PRIMARY_RATES, DIFFERENCES, EXTRA_DISAGREEMENT):
        disagree = abs(diff) + extra
        only_observer, only_primary = (disagree + diff) / 2, (disagree - diff) / 2
        both = rate - only_primary
        neither = 1.0 - both - only_observer - only_primary
        if min(both, neither) < 0:
            continue
        out.append((rate, diff, disagree, (both, only_observer, only_primary, neither)))
    return out


def measure(
    method: Interval, n: int, truth: float, draws: np.ndarray
) -> tuple[float, float, float, float]:
    """Coverage, zero-width share among draws where some call differed and among all
    draws, mean width."""
    cache: dict[tuple[int, int, int], tuple[float, float] | None] = {}
    covered = zero = zero_all = differing = 0
    widths = []
    for both, observer, primary, _ in draws:
        key = (int(both), int(observer), int(primary))
        if key not in cache:
            cache[key] = method(key[0], key[1], key[2], n)
        interval = cache[key]
        assert interval is not None
        low, high = interval
        covered += low - 1e-12 <= truth <= high + 1e-12
        widths.append(high - low)
        zero_all += high - low <= 1e-12
        if observer + primary > 0:
            differing += 1
            zero += high - low <= 1e-12
    total = len(draws)
    return covered / total, zero / max(differing, 1), zero_all / total, float(np.mean(widths))


def run(replicates: int, seed: int) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    rows = []
    for n in SIZES:
        for rate, diff, disagree, cells in scenarios():
            draws = rng.multinomial(n, cells, size=replicates)
            row: dict[str, object] = {
                "pairedCalls": n,
                "primaryRate": rate,
                "difference": diff,
                "disagreement": round(disagree, 4),
            }
            for name, method in (("newcombe", newcombe), ("wald", wald)):
                coverage, zero, zero_all, width = measure(method, n, diff, draws)
                row[name] = {
                    "coverage": coverage,
                    "zeroWidth": zero,
                    "zeroWidthAll": zero_all,
                    "meanWidth": width,
                }
            rows.append(row)
    summary = {}
    for n in SIZES:
        mine = [r for r in rows if r["pairedCalls"] == n]
        summary[str(n)] = {
            name: {
                "minCoverage": min(float(r[name]["coverage"]) for r in mine),  # type: ignore[index]
                "meanCoverage": float(np.mean([r[name]["coverage"] for r in mine])),  # type: ignore[index]
                "maxZeroWidth": max(float(r[name]["zeroWidth"]) for r in mine),  # type: ignore[index]
                "maxZeroWidthAll": max(float(r[name]["zeroWidthAll"]) for r in mine),  # type: ignore[index]
            }
            for name in ("newcombe", "wald")
        }
    return {"replicates": replicates, "seed": seed, "summary": summary, "scenarios": rows}


def markdown(result: dict[str, object], command: str, seconds: float) -> str:
    summary: dict[str, dict[str, dict[str, float]]] = result["summary"]  # type: ignore[assignment]
    lines = [
        "# Paired difference of pass rates: interval coverage",
        "",
        "`holonograph compare` reports each observer's pass rate minus the primary's on the",
        "same calls with Newcombe's hybrid score interval for paired proportions (method 10",
        "of Newcombe 1998, *Statistics in Medicine* 17:2635; code:",
        "`processors/compare/job.py:paired_rate_difference`). Coverage measured by simulation",
        "with `bench/paired_interval_coverage.py`: multinomial draws of paired calls over a",
        f"grid of {len(scenarios())} true settings (primary pass rate {PRIMARY_RATES},",
        f"observer minus primary {DIFFERENCES}, calls differing |difference| +",
        f"{EXTRA_DISAGREEMENT}), {result['replicates']:,} draws per setting and size, the",
        "production function on every draw. The Wald interval it replaced runs on the same",
        "draws. *Zero width*: the share of intervals of zero width among draws where at",
        "least one call differed, and among all draws (worst setting).",
        "",
        f"Command: `{command}` ({seconds:.0f} s on this shared 2-core machine).",
        "",
        "| paired calls | interval | min coverage | mean coverage | zero width, calls differ"
        " | zero width, any draw |",
        "|---|---|---|---|---|---|",
    ]
    for n in SIZES:
        for name, label in (("newcombe", "Newcombe hybrid score"), ("wald", "Wald (before)")):
            s = summary[str(n)][name]
            lines.append(
                f"| {n} | {label} | {s['minCoverage']:.3f} | {s['meanCoverage']:.3f}"
                f" | {s['maxZeroWidth']:.4f} | {s['maxZeroWidthAll']:.4f} |"
            )
    lines += [
        "",
        f"The floor set for 30 paired calls is {TARGET}; the standard error of one",
        f"setting's coverage is about {math.sqrt(0.95 * 0.05 / int(result['replicates'])):.4f}"  # type: ignore[call-overload]
        ". Per setting (coverage, Newcombe / Wald):",
        "",
        "| calls | primary rate | difference | calls differing | Newcombe | Wald |",
        "|---|---|---|---|---|---|",
    ]
    for r in result["scenarios"]:  # type: ignore[attr-defined]
        lines.append(
            f"| {r['pairedCalls']} | {r['primaryRate']} | {r['difference']:+.2f}"
            f" | {r['disagreement']} | {r['newcombe']['coverage']:.3f}"
            f" | {r['wald']['coverage']:.3f} |"
        )
    lines += [
        "",
        "Newcombe's interval errs on the safe side at 30 calls (mean coverage above 0.95)",
        "and is nominal at 400; it is never a point while some call differs (each side's",
        "Wilson interval has positive width), nor, with the phi correction, when none",
        "does. The Wald interval under-covers at 30 calls where vendors rarely disagree:",
        "with no discordant call its variance is zero and the interval a point at 0,",
        "which misses any true difference.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicates", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--no-write", action="store_true", help="print only; write no file")
    args = parser.parse_args()
    started = time.monotonic()
    result = run(args.replicates, args.seed)
    seconds = time.monotonic() - started
    command = "python bench/paired_interval_coverage.py" + (
        f" --replicates {args.replicates}" if args.replicates != 20_000 else ""
    )
    text = markdown(result, command, seconds)
    print(text)
    if not args.no_write:
        (HERE / "paired_interval_coverage.json").write_text(json.dumps(result, indent=1) + "\n")
        (HERE / "PAIRED_INTERVAL_RESULTS.md").write_text(text)
    floor = result["summary"]["30"]["newcombe"]["minCoverage"]  # type: ignore[index]
    return 0 if floor >= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
