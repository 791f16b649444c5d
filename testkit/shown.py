"""What a page should show for an analysis's JSON, in the page's own `data-metric`
keys and text: one definition for every browser test that reads a compare report,
so a format change on the page is mended in one place."""

from __future__ import annotations

from typing import Any


def interval(value: dict[str, float] | None) -> str:
    """An estimate with its interval as the pages print it (`-` when there is none)."""
    if value is None:
        return "-"
    return f"{value['estimate']:.3f} [{value['ciLow']:.3f}, {value['ciHigh']:.3f}]"


def compare_metrics(report: dict[str, Any], *, adjusted: bool) -> dict[str, str]:
    """The metrics a compare section shows: every group's counts, latency, cost and
    per-dimension rates, and every paired comparison (`adjusted`: with the
    Holm-adjusted p-value, which the report prints and the UI leaves out)."""
    sid = report["surfaceId"]
    expected: dict[str, str] = {}
    for group in report["groups"]:
        key = f"compare/{sid}/groups/{group['group']}"
        expected[f"{key}/events"] = str(group["events"])
        expected[f"{key}/latencyMs/p50"] = f"{group['latencyMs']['p50']:.1f}"
        expected[f"{key}/costPerEvaluationUsd"] = f"{group['costPerEvaluationUsd']:.6f}"
        for d in group["dimensions"]:
            metric = "passRate" if d["kind"] == "pass-fail" else "mean"
            expected[f"{key}/{d['dimensionId']}/{metric}"] = interval(d[metric])
            expected[f"{key}/{d['dimensionId']}/missing"] = str(d["missing"])
    for p in report["paired"]:
        key = f"compare/{sid}/paired/{p['dimensionId']}/{p['primary']}/{p['observer']}"
        for field in ("paired", "improved", "regressed", "equal"):
            expected[f"{key}/{field}"] = str(p[field])
        expected[f"{key}/missing/observer"] = str(p["missing"]["observer"])
        expected[f"{key}/difference"] = interval(p["difference"])
        expected[f"{key}/pValue"] = f"{p['pValue']:.3g}"
        if adjusted:
            expected[f"{key}/adjustedPValue"] = f"{p['adjustedPValue']:.3g}"
    return expected
