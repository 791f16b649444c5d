"""Picture of a drift report: pass rate (or mean score) per bucket with the fitted levels
and their noise bands, change points labelled by source, bracketed windows shaded."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.patches import Rectangle

from processors.drift.job import DimensionTrace
from schemas.analysis import DriftReport
from schemas.times import to_store_time

SOURCE_COLOURS = {
    "lens": "tab:purple",
    "light source": "tab:orange",
    "substrate": "tab:green",
    "noise": "tab:gray",
}
REASON_COLOURS = {
    "sparse": "#bbbbbb",
    "delivery-loss": "#e377c2",
    "delivery-unmeasurable": "#f7b6d2",
    "confounded": "#d62728",
    "unattributed": "#8c564b",
    "cohort-mix": "#17becf",
    "availability": "#bcbd22",
}


def plot_drift(report: DriftReport, traces: dict[str, DimensionTrace], path: str | Path) -> None:
    """Write a PNG with one panel per analysed dimension."""
    dims = list(traces) or [""]
    fig, axes = plt.subplots(len(dims), 1, figsize=(12, 3.6 * len(dims)), squeeze=False)
    for ax, dim in zip(axes[:, 0], dims, strict=True):
        if dim in traces:
            _panel(ax, report, dim, traces[dim])
        ax.set_title(f"{report.surface_id} / {dim or 'no data'}", loc="left", fontsize=10)
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _panel(ax: Axes, report: DriftReport, dim: str, trace: DimensionTrace) -> None:
    series = trace.series
    idx = series.index
    times = [series.grid[i] for i in idx]
    n = series.n[idx]
    rate = series.y[idx] / n
    band = 1.96 * np.sqrt(trace.unit_variance / n + trace.tau2)
    ax.scatter(times, rate, s=4, color="tab:blue", alpha=0.5, label="bucket rate")
    ax.plot(times, trace.levels, color="black", lw=1.2, label="fitted level")
    ax.fill_between(
        times, trace.levels - band, trace.levels + band, color="tab:blue", alpha=0.12, lw=0,
        label="95 % noise band",
    )  # fmt: skip
    for window in report.bracketed_windows:
        if window.dimension_id in ("", dim):
            ax.axvspan(
                _date_number(window.from_), _date_number(window.to),
                color=REASON_COLOURS[window.reason], alpha=0.25, lw=0,
            )  # fmt: skip
    top = float(np.nanmax(rate)) if rate.size else 1.0
    for point in report.change_points:
        if point.dimension_id != dim:
            continue
        colour = SOURCE_COLOURS[point.source]
        ax.axvline(
            _date_number(point.timestamp), color=colour, lw=1.5, ls="-" if point.confident else "--"
        )
        label = point.source + ("" if point.confident else "?")
        ax.annotate(
            f"{label} {point.effect.delta:+.3f}", (_date_number(point.timestamp), top), fontsize=8,
            color=colour, rotation=90, va="top", ha="right",
        )  # fmt: skip
    handles = [Rectangle((0, 0), 1, 1, color=c, alpha=0.3) for c in REASON_COLOURS.values()]
    first = ax.legend(loc="lower left", fontsize=7)
    ax.add_artist(first)
    ax.legend(handles, list(REASON_COLOURS), loc="lower right", fontsize=7, title="bracketed")
    ax.set_ylabel("pass rate" if series.binary else "mean score")
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M"))  # type: ignore[no-untyped-call]


def _date_number(value: dt.datetime) -> float:
    """Matplotlib's date number of a UTC time."""
    return float(mdates.date2num(to_store_time(value)))  # type: ignore[no-untyped-call]
