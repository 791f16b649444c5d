"""Baseline significance tests: p-values against hand and scipy computation on small
known cases, regressions flagged on seeded worse data and unchanged data left alone,
Holm on hand-worked examples, tolerances honoured, degenerate input handled."""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from processors.conformance.significance import (
    DEFAULT_ALPHA,
    holm,
    holm_rows,
    mean_p,
    mean_p_rows,
    p95_p,
    p95_p_rows,
    pass_rate_p,
    pass_rate_p_rows,
    pass_variance_p,
    pass_variance_p_rows,
    sd_p,
    sd_p_rows,
)


def binomial_cdf(k: int, n: int, p: float) -> float:
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


def log_variance_p(values: list[float], limit: float) -> float:
    """The sd / variance test written out by hand: ln(s^2 / limit) over Bonett's standard
    error (kurtosis about the trimmed mean) against t(n - 1)."""
    n = len(values)
    mean = sum(values) / n
    s2 = sum((v - mean) ** 2 for v in values) / (n - 1)
    ordered = sorted(values)
    trim = math.floor(n / (2 * math.sqrt(n - 4)))
    kept = ordered[trim : n - trim]
    centre = sum(kept) / len(kept)
    kurtosis = n * sum((v - centre) ** 4 for v in values) / ((n - 1) * s2) ** 2
    se = math.sqrt((kurtosis - (n - 3) / n) / (n - 1))
    return float(stats.t.sf(math.log(s2 / limit) / se, n - 1))


def raw_variance_p(values: list[float], limit: float) -> float:
    """The raw-scale form: (s^2 - limit) over the moment standard error, against t(n-1)."""
    n = len(values)
    mean = sum(values) / n
    s2 = sum((v - mean) ** 2 for v in values) / (n - 1)
    m4 = sum((v - mean) ** 4 for v in values) / n
    se = math.sqrt((m4 - s2**2 * (n - 3) / (n - 1)) / n)
    return float(stats.t.sf((s2 - limit) / se, n - 1))


def pass_variance_by_hand(rates: list[float], limit: float) -> float:
    return max(log_variance_p(rates, limit), raw_variance_p(rates, limit))


# -- pass rate ---------------------------------------------------------------------------


def test_pass_rate_is_the_exact_binomial_lower_tail() -> None:
    p = pass_rate_p(7, 10, 0.9)
    assert p == pytest.approx(binomial_cdf(7, 10, 0.9), rel=1e-12)
    assert p == pytest.approx(0.0701908264, rel=1e-9)
    assert p == pytest.approx(stats.binomtest(7, 10, 0.9, alternative="less").pvalue)
    assert pass_rate_p(40, 50, 0.95) == pytest.approx(binomial_cdf(40, 50, 0.95), rel=1e-10)


def test_pass_rate_tolerance_shifts_the_null_down() -> None:
    assert pass_rate_p(7, 10, 0.9, tolerance=0.1) == pytest.approx(binomial_cdf(7, 10, 0.8))
    assert pass_rate_p(70, 100, 0.9) < DEFAULT_ALPHA < pass_rate_p(70, 100, 0.9, tolerance=0.25)


def test_pass_rate_edges() -> None:
    assert pass_rate_p(10, 10, 0.99) == 1.0
    assert pass_rate_p(0, 10, 0.05, tolerance=0.1) == 1.0  # nothing is below a floor of 0
    assert pass_rate_p(9, 10, 1.0) == 0.0  # a baseline of 100% is refuted by one failure
    assert pass_rate_p(0, 1, 0.5) == 0.5


@pytest.mark.parametrize(
    ("passes", "trials", "rate", "tolerance", "message"),
    [
        (0, 0, 0.9, 0.0, "no trials"),
        (11, 10, 0.9, 0.0, "between 0 and trials"),
        (-1, 10, 0.9, 0.0, "between 0 and trials"),
        (5, 10, 1.5, 0.0, "baseline_rate"),
        (5, 10, 0.9, -0.1, "tolerance"),
        (5, 10, 0.9, math.nan, "tolerance"),
    ],
)
def test_pass_rate_rejects_bad_input(
    passes: int, trials: int, rate: float, tolerance: float, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        pass_rate_p(passes, trials, rate, tolerance)


# -- mean --------------------------------------------------------------------------------

LATENCIES = [820.0, 940.0, 1010.0, 1100.0, 1250.0, 1320.0, 2400.0]


def test_mean_is_the_one_sided_t_test_on_raw_values() -> None:
    expected = stats.ttest_1samp(LATENCIES, 1000.0, alternative="greater").pvalue
    assert mean_p(LATENCIES, 1000.0) == pytest.approx(expected, rel=1e-10)
    mean = sum(LATENCIES) / 7
    sd = math.sqrt(sum((v - mean) ** 2 for v in LATENCIES) / 6)
    by_hand = stats.t.sf((mean - 1000.0) / (sd / math.sqrt(7)), 6)
    assert mean_p(LATENCIES, 1000.0) == pytest.approx(by_hand, rel=1e-10)


def test_mean_tolerance_is_relative() -> None:
    expected = stats.ttest_1samp(LATENCIES, 1100.0, alternative="greater").pvalue
    assert mean_p(LATENCIES, 1000.0, tolerance=0.1) == pytest.approx(expected, rel=1e-10)
    values = [1.2, 1.25, 1.3, 1.22, 1.28, 1.24]
    assert mean_p(values, 1.0) < DEFAULT_ALPHA < mean_p(values, 1.0, tolerance=0.3)


def test_mean_degenerate_inputs() -> None:
    assert mean_p([5000.0], 1000.0) == 1.0  # one trial carries no evidence of a shift
    assert mean_p([0.02, 0.02, 0.02], 0.01) == 0.0  # a constant cost above its baseline
    assert mean_p([0.01, 0.01], 0.01) == 1.0
    assert mean_p([0.1] * 7, 0.1) == 1.0  # equal to the limit; the mean's rounding is no spread
    with pytest.raises(ValueError, match="no values"):
        mean_p([], 1.0)
    with pytest.raises(ValueError, match="flat sequence"):
        mean_p([[1.0, 2.0]], 1.0)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="finite"):
        mean_p([1.0, math.inf], 1.0)
    with pytest.raises(ValueError, match="baseline_mean"):
        mean_p([1.0, 2.0], -1.0)


# -- p95 ---------------------------------------------------------------------------------


def test_p95_counts_exceedances_against_binomial_5_percent() -> None:
    values = [100.0, 110, 120, 130, 140, 150, 160, 400, 500, 600]  # 3 above 300
    by_hand = 1 - binomial_cdf(2, 10, 0.05)
    assert p95_p(values, 300.0) == pytest.approx(by_hand, rel=1e-10)
    assert p95_p(values, 300.0) == pytest.approx(
        stats.binomtest(3, 10, 0.05, alternative="greater").pvalue
    )
    assert p95_p(values[:-2], 300.0) == pytest.approx(1 - 0.95**8)  # one above in 8


def test_p95_ties_and_tolerance() -> None:
    assert p95_p([300.0] * 20, 300.0) == 1.0  # at the p95 is not above it
    values = [100.0] * 7 + [320.0, 330.0, 340.0]
    assert p95_p(values, 300.0) < DEFAULT_ALPHA
    assert p95_p(values, 300.0, tolerance=0.15) == 1.0  # limit 345: nothing above


# -- standard deviation and pass-rate variance -------------------------------------------


def test_sd_is_the_studentized_log_sample_variance() -> None:
    expected = log_variance_p(LATENCIES, 300.0**2)
    assert sd_p(LATENCIES, 300.0) == pytest.approx(expected, rel=1e-10)
    with_tolerance = log_variance_p(LATENCIES, (300.0 * 1.2) ** 2)
    assert sd_p(LATENCIES, 300.0, tolerance=0.2) == pytest.approx(with_tolerance, rel=1e-10)
    # n <= 4: kurtosis about the median (2); [1, 2, 10]: s^2 = 73/3, (n - 3) / n = 0
    few = [1.0, 2.0, 10.0]
    s2 = 73 / 3
    kurtosis = 3 * (1 + 0 + 8**4) / (2 * s2) ** 2
    by_hand = stats.t.sf(math.log(s2 / 4.0) / math.sqrt(kurtosis / 2), 2)
    assert sd_p(few, 2.0) == pytest.approx(by_hand, rel=1e-10)


def test_pass_variance_tolerance_is_absolute() -> None:
    rates = [1.0, 0.6, 0.9, 0.5, 1.0, 0.7]
    assert pass_variance_p(rates, 0.01) == pytest.approx(pass_variance_by_hand(rates, 0.01))
    assert pass_variance_p(rates, 0.01, tolerance=0.02) == pytest.approx(
        pass_variance_by_hand(rates, 0.03)
    )
    assert raw_variance_p(rates, 0.03) != pytest.approx(log_variance_p(rates, 0.03))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        pass_variance_p([0.5, 1.2], 0.01)


def test_pass_variance_on_two_points_is_exact_binomial() -> None:
    # 0/1 rates: variance q(1-q) > 0.09 iff q in (0.1, 0.9); 8 of 10 is as central as 2..8
    outcomes = [1.0, 1, 1, 0, 1, 1, 0, 1, 1, 1]
    by_hand = binomial_cdf(8, 10, 0.1) - binomial_cdf(1, 10, 0.1)
    assert pass_variance_p(outcomes, 0.09) == pytest.approx(by_hand, rel=1e-10)
    assert pass_variance_p([1.0, 0.0] * 10, 0.09) < 0.001  # half fail: variance 0.25
    assert pass_variance_p([1.0, 0.0], 0.25) == 1.0  # no 0/1 variance exceeds 1/4
    # two points a < b in general (rare failures of five scenarios): scale to 0/1
    rare = [1.0] * 18 + [0.8] * 2
    scaled = 0.00198 / 0.2**2
    root = (1 - math.sqrt(1 - 4 * scaled)) / 2
    by_hand = binomial_cdf(18, 20, root) - binomial_cdf(1, 20, root)
    assert pass_variance_p(rare, 0.00198) == pytest.approx(by_hand, rel=1e-9)


def test_spread_degenerate_inputs() -> None:
    assert sd_p([900.0], 10.0) == 1.0
    assert sd_p([900.0, 900.0, 900.0], 10.0) == 1.0  # no spread is never above a baseline
    assert sd_p([900.0, 901.0], 0.0) == 0.0  # any spread refutes a baseline of none
    assert sd_p([0.1] * 7, 0.0) == 1.0
    assert pass_variance_p([1.0, 1.0, 1.0], 0.0) == 1.0
    assert pass_variance_p([1.0, 0.8], 0.0) == 0.0
    with pytest.raises(ValueError, match="no values"):
        sd_p([], 1.0)


# -- each kind flags a real regression and leaves an unchanged surface alone ---------------

Draw = Callable[[np.random.Generator, int, float], list[float]]


def lognormal(rng: np.random.Generator, n: int, scale: float) -> list[float]:
    """Latency in ms: lognormal, median 800 ms x scale, sigma 0.5."""
    return list(800.0 * scale * rng.lognormal(0.0, 0.5, n))


def spread(rng: np.random.Generator, n: int, scale: float) -> list[float]:
    """The lognormal latency with its log-spread widened by `scale`, median fixed."""
    return list(800.0 * rng.lognormal(0.0, 0.5 * scale, n))


TRUE_MEAN = 800.0 * math.exp(0.125)
TRUE_P95 = 800.0 * math.exp(0.5 * 1.6448536269514722)
TRUE_SD = TRUE_MEAN * math.sqrt(math.exp(0.25) - 1)


@pytest.mark.parametrize(
    ("test", "draw", "baseline", "worse"),
    [
        (mean_p, lognormal, TRUE_MEAN, 2.0),
        (p95_p, lognormal, TRUE_P95, 2.0),
        (sd_p, spread, TRUE_SD, 2.0),
    ],
    ids=["mean", "p95", "sd"],
)
def test_latency_kinds_flag_regressions_only(
    test: Callable[[list[float], float], float], draw: Draw, baseline: float, worse: float
) -> None:
    rng = np.random.default_rng(29)
    assert test(draw(rng, 50, worse), baseline) < 0.001
    unchanged = [test(draw(rng, 20, 1.0), baseline) for _ in range(400)]
    assert sum(p <= DEFAULT_ALPHA for p in unchanged) <= 0.05 * 400 + 2 * math.sqrt(400 * 0.05)
    assert max(unchanged) > 0.5  # the p-values spread over (0, 1], they are not all 1


def test_pass_rate_flags_regressions_only() -> None:
    rng = np.random.default_rng(29)
    assert pass_rate_p(int(rng.binomial(50, 0.6)), 50, 0.9) < 0.001
    unchanged = [pass_rate_p(int(rng.binomial(20, 0.9)), 20, 0.9) for _ in range(400)]
    assert sum(p <= DEFAULT_ALPHA for p in unchanged) <= 0.05 * 400 + 2 * math.sqrt(400 * 0.05)


def test_pass_variance_flags_flaky_repetitions_only() -> None:
    rng = np.random.default_rng(29)
    scenarios, repetitions, rate = 10, 20, 0.9
    baseline = rate * (1 - rate) / scenarios  # independent scenarios
    # flaky: a quarter of the repetitions lose their environment and half their passes
    broken = rng.random(repetitions) < 0.25
    rates = rng.binomial(scenarios, np.where(broken, 0.45, rate)) / scenarios
    assert pass_variance_p(list(rates), baseline) < DEFAULT_ALPHA / 2
    unchanged = [
        pass_variance_p(list(rng.binomial(scenarios, rate, repetitions) / scenarios), baseline)
        for _ in range(400)
    ]
    assert sum(p <= DEFAULT_ALPHA for p in unchanged) <= 0.05 * 400 + 2 * math.sqrt(400 * 0.05)


# -- the row forms are the scalar tests, run by run --------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 5, 12])
def test_rows_equal_the_scalar_tests(n: int) -> None:
    rng = np.random.default_rng(n)
    latency = rng.lognormal(0.0, 0.7, (30, n))
    latency[0] = 1.0  # a constant row
    rates = rng.binomial(5, 0.8, (30, n)) / 5
    passes = rng.binomial(n, 0.8, 30)
    pairs: list[tuple[np.ndarray, list[float]]] = [
        (mean_p_rows(latency, 1.2, 0.1), [mean_p(list(r), 1.2, 0.1) for r in latency]),
        (p95_p_rows(latency, 2.0), [p95_p(list(r), 2.0) for r in latency]),
        (sd_p_rows(latency, 0.5, 0.2), [sd_p(list(r), 0.5, 0.2) for r in latency]),
        (pass_variance_p_rows(rates, 0.02), [pass_variance_p(list(r), 0.02) for r in rates]),
        (pass_rate_p_rows(passes, n, 0.85), [pass_rate_p(int(k), n, 0.85) for k in passes]),
    ]
    for rows, scalars in pairs:
        assert rows.shape == (30,)
        assert list(rows) == scalars


# -- Holm --------------------------------------------------------------------------------


def test_holm_hand_worked() -> None:
    # sorted: d .005 <= .05/4; a .010 <= .05/3; c .030 > .05/2 stops; b is not reached
    assert holm({"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.005}, 0.05) == {"a", "d"}
    # step-down rejects what Bonferroni (all p <= .05/3) would not: .02 <= .05/2, .04 <= .05
    assert holm({"x": 0.01, "y": 0.02, "z": 0.04}, 0.05) == {"x", "y", "z"}
    # the first failure stops the procedure even if a later p would pass its own level
    assert holm({("c1", "s1"): 0.02, ("c1", "s2"): 0.024, ("c2", "s1"): 0.9}, 0.05) == set()
    assert holm({}, 0.05) == set()
    assert holm({"only": 0.05}, 0.05) == {"only"}


def test_holm_rows_equal_holm_per_family() -> None:
    rng = np.random.default_rng(7)
    families = rng.uniform(0, 0.08, (200, 6)) ** rng.uniform(0.5, 2.0, (200, 1))
    families[0] = [0.01, 0.01, 0.01, 0.5, 0.0125, 0.04]  # ties and a boundary
    rows = holm_rows(families, 0.05)
    for family, rejected in zip(families, rows, strict=True):
        expected = holm(dict(enumerate(float(p) for p in family)), 0.05)
        assert {i for i, r in enumerate(rejected) if r} == expected
    assert 0 < rows.sum() < rows.size


def test_holm_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="alpha"):
        holm({"a": 0.01}, 0.0)
    with pytest.raises(ValueError, match="p-value of 'a'"):
        holm({"a": math.nan}, 0.05)


def test_the_docs_holm_example_runs() -> None:
    text = (Path(__file__).parents[3] / "docs" / "conformance-baselines.md").read_text()
    block = text.split("```python\n", 1)[1].split("```", 1)[0]
    assert "assert holm(" in block
    exec(compile(block, "docs/conformance-baselines.md", "exec"), {})


def test_importing_the_module_leaves_scipy_unloaded() -> None:
    code = "import sys, processors.conformance.significance; print('scipy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
