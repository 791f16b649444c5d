"""The conformance false-regression bench at a tiny size: the production tests hold
alpha on unchanged runs, the old rule's figures come out as the issue states them, a
regression is seen, and the bench's own check fails on a rate above alpha."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bench.conformance_false_regression import (
    LAYOUTS,
    TRIALS,
    discrete_pass_variance,
    excesses,
    markdown,
    run,
    shapes,
)
from processors.conformance.significance import DEFAULT_ALPHA


@pytest.fixture(scope="module")
def result() -> dict[str, Any]:
    out = run(120, seed=7, alpha=DEFAULT_ALPHA)
    out["discretePassVariance"] = discrete_pass_variance(120, seed=7)
    return out


def setting(result: dict[str, Any], shape: str, trials: int, cells: int) -> dict[str, Any]:
    rows = [
        r
        for r in result["settings"]
        if (r["shape"], r["trials"], r["cells"]) == (shape, trials, cells)
    ]
    assert len(rows) == 1
    return rows[0]


def test_every_setting_is_simulated(result: dict[str, Any]) -> None:
    assert len(result["settings"]) == len(shapes()) * len(TRIALS) * len(LAYOUTS)
    assert {r["trials"] for r in result["settings"]} == set(TRIALS)


def test_the_old_rule_fails_unchanged_runs_as_the_issue_says(result: dict[str, Any]) -> None:
    exact = [round(result["oldRuleExact"][str(n)], 3) for n in TRIALS]
    assert exact == [0.264, 0.323, 0.384, 0.417]
    one_cell = setting(result, "gamma k=4", 20, 1)["unchanged"]
    assert abs(one_cell["oldFlagged"]["passRate"] - 0.323) < 0.15
    assert setting(result, "gamma k=4", 20, 20)["unchanged"]["oldRunFailed"] > 0.9


def test_unchanged_runs_stay_within_alpha_and_regressions_are_seen(
    result: dict[str, Any],
) -> None:
    assert excesses(result) == []
    regressed = setting(result, "lognormal sigma=0.3", 100, 1)["regressed"]["detected"]
    assert regressed["meanLatency"] > 0.8 and regressed["meanTokens"] > 0.8


def test_the_check_fails_on_a_rate_above_alpha(result: dict[str, Any]) -> None:
    broken = copy.deepcopy(result)
    broken["settings"][3]["unchanged"]["flagged"]["latencySd"] = 0.3
    found = excesses(broken)
    assert len(found) == 1 and "latencySd 0.3000" in found[0]


def test_the_results_page_renders(result: dict[str, Any]) -> None:
    text = markdown(result, "python bench/conformance_false_regression.py", 1.0)
    assert "| P(rate < baseline) | 26.4% | 32.3% | 38.4% | 41.7% |" in text
    assert "## Power against a modest regression" in text
    assert "at most alpha" in text
