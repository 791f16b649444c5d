"""Ingest latency beside heavy reads: does a steady ingest keep its p99 while eight
clients run heavy queries through `serve`'s admin endpoint?

    python -m bench.read_isolation                     # ~5 min: READ_ISOLATION_RESULTS.md
    python -m bench.read_isolation --quick            # smoke run into bench/out/
    python -m bench.read_isolation --compare-ref main # the same phases on another tree too

One `holonograph serve` (embedded, default flags) takes an open-loop gRPC ingest
(`bench.loadgen`, latencies from each request's scheduled send) in phases of
`--duration` seconds, alternated `--rounds` times in the same run:

- `none`: the ingest alone (the baseline of the same run);
- `sleeping`: eight clients each running, one after another, a query that holds its
  thread for ~2.9 s and little CPU (`sleepEachRow`, as the probe of issue 23 did);
- `cpu`: eight clients each running a query that computes for seconds
  (`sum(cityHash64(number))` over 3e8 rows).

Per phase: p50/p99/max latency of accepted requests, answers by code, spans offered
and accepted, reads completed. The run ends by checking that every accepted
evaluation is in the store. With `--compare-ref`, the same phases run against that
ref's tree (extracted with `git archive`) first, so before/after come from one run.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from bench import machine
from bench.measure import percentile
from bench.paths import ADMIN_FILE, ROOT, EmbeddedPath, baseline_tree

READS = {
    "none": "",
    "sleeping": "SELECT count() FROM numbers(290) WHERE NOT ignore(sleepEachRow(0.01))",
    "cpu": "SELECT sum(cityHash64(number)) FROM numbers(300000000)",
}


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Readers:
    """`clients` threads, each sending `sql` to the admin endpoint until stopped."""

    def __init__(self, data_dir: Path, sql: str, clients: int) -> None:
        info = json.loads((data_dir / ADMIN_FILE).read_text())
        self._url = f"{info['url']}/admin/query"
        self._token = info["read_token"]
        self._sql = sql
        self._stop = threading.Event()
        self.outcomes: dict[str, int] = {}
        self._lock = threading.Lock()
        self._pool = concurrent.futures.ThreadPoolExecutor(clients)
        self._running = [self._pool.submit(self._loop) for _ in range(clients)] if sql else []

    def _loop(self) -> None:
        while not self._stop.is_set():
            request = urllib.request.Request(
                self._url,
                data=json.dumps({"sql": self._sql}).encode(),
                headers={"Authorization": f"Bearer {self._token}"},
                method="POST",
            )
            try:
                with urllib.request.urlopen(request, timeout=120) as reply:
                    reply.read()
                    outcome = str(reply.status)
            except urllib.error.HTTPError as err:
                outcome = str(err.code)
            except OSError as err:
                outcome = type(err).__name__
            with self._lock:
                self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def stop(self) -> dict[str, int]:
        self._stop.set()
        for running in self._running:
            running.result(timeout=180)
        self._pool.shutdown()
        return dict(self.outcomes)


def ingest(grpc: str, args: argparse.Namespace, tag: str, first: int) -> dict[str, Any]:
    argv = [
        sys.executable, "-m", "bench.loadgen", "--target", f"grpc://{grpc}",
        "--rate", str(args.rate), "--batch", str(args.batch), "--clients", str(args.clients),
        "--duration", str(args.duration), "--tag", tag, "--first-request", str(first),
        "--timeout", "60",
    ]  # fmt: skip
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def run_tree(root: Path, label: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    workdir = work / label
    workdir.mkdir(parents=True)
    path = EmbeddedPath(root=root)
    endpoints = path.start(workdir)
    data_dir = workdir / "data"
    phases: list[dict[str, Any]] = []
    accepted = 0
    try:
        warmup = argparse.Namespace(**{**vars(args), "duration": 3})
        accepted += ingest(endpoints.grpc, warmup, "warmupxx", 0)["accepted_evaluations"]
        first = 1_000_000
        for round_no in range(args.rounds):
            for kind in args.kinds:
                readers = Readers(data_dir, READS[kind], args.reads)
                started = time.monotonic()
                result = ingest(endpoints.grpc, args, f"{kind[:4]:x<4}{round_no:04d}", first)
                reads = readers.stop()
                first += 1_000_000
                accepted += result["accepted_evaluations"]
                latencies = result["latencies_ms"]
                phases.append(
                    {
                        "tree": label,
                        "reads": kind,
                        "round": round_no + 1,
                        "seconds": time.monotonic() - started,
                        "offered_spans": result["offered_spans"],
                        "accepted_spans": result["accepted_spans"],
                        "codes": result["codes"],
                        "p50_ms": percentile(latencies, 50),
                        "p99_ms": percentile(latencies, 99),
                        "max_ms": max(latencies) if latencies else None,
                        "read_outcomes": reads,
                    }
                )
                last = phases[-1]
                _log(
                    f"  {label} {kind} #{round_no + 1}: p50 {_ms(last['p50_ms'])} p99"
                    f" {_ms(last['p99_ms'])} max {_ms(last['max_ms'])} ms, accepted"
                    f" {last['accepted_spans']}/{last['offered_spans']}, reads {reads}"
                )
        stored = path.reader().query("SELECT count() FROM holonograph.evaluation_events FINAL")[0][
            0
        ]
    finally:
        path.stop()
    shutil.rmtree(workdir, ignore_errors=True)
    return {"tree": label, "phases": phases, "accepted": accepted, "stored": stored}


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def summary(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Per tree and read kind: the worst p99 over the rounds, and its ratio to the
    same tree's no-read baseline."""
    rows = []
    for tree in results["trees"]:
        by_kind: dict[str, list[dict[str, Any]]] = {}
        for phase in tree["phases"]:
            by_kind.setdefault(phase["reads"], []).append(phase)
        base = max((p["p99_ms"] or 0.0) for p in by_kind.get("none", [])) or None
        for kind, phases in by_kind.items():
            worst = max((p["p99_ms"] or 0.0) for p in phases)
            rows.append(
                {
                    "tree": tree["tree"],
                    "reads": kind,
                    "p99_ms": worst,
                    "ratio": worst / base if base else None,
                    "accepted": sum(p["accepted_spans"] for p in phases),
                    "offered": sum(p["offered_spans"] for p in phases),
                }
            )
    return rows


def markdown(results: dict[str, Any]) -> str:
    info = results["machine"]
    out = [
        "# Ingest beside heavy reads",
        "",
        f"- Date: {results['date']} (commit `{results['commit']}`), command:"
        f" `{results['command']}`",
        f"- Machine: {info.get('cpu', '?')}, {info.get('cores', '?')} cores, shared with other"
        " work: absolute figures are noisy, ratios to the no-read phase of the same tree and"
        " run are what to compare.",
        f"- Ingest: gRPC open loop, {results['args']['rate']:g} spans/s in requests of"
        f" {results['args']['batch']} spans from {results['args']['clients']} connections,"
        f" {results['args']['duration']:g} s per phase; {results['args']['reads']} read clients"
        " per read phase, each sending its query again as soon as it is answered.",
        "- Reads: `sleeping` = `"
        + READS["sleeping"]
        + "` (~2.9 s, little CPU); `cpu` = `"
        + READS["cpu"]
        + "`.",
        "",
        "| tree | reads | round | p50 ms | p99 ms | max ms | accepted / offered spans |"
        " answers | reads answered |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for tree in results["trees"]:
        for p in tree["phases"]:
            codes = ", ".join(f"{k} {v}" for k, v in sorted(p["codes"].items()))
            reads = ", ".join(f"{k} {v}" for k, v in sorted(p["read_outcomes"].items())) or "-"
            out.append(
                f"| {p['tree']} | {p['reads']} | {p['round']} | {_ms(p['p50_ms'])}"
                f" | {_ms(p['p99_ms'])} | {_ms(p['max_ms'])}"
                f" | {p['accepted_spans']:,} / {p['offered_spans']:,} | {codes} | {reads} |"
            )
    out += [
        "",
        "Worst p99 over the rounds, and its ratio to the same tree's no-read phase:",
        "",
        "| tree | reads | p99 ms | × no reads | accepted / offered |",
        "|---|---|---|---|---|",
    ]
    for row in results["summary"]:
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.2f}"
        out.append(
            f"| {row['tree']} | {row['reads']} | {_ms(row['p99_ms'])} | {ratio}"
            f" | {row['accepted']:,} / {row['offered']:,} |"
        )
    out += ["", "Every accepted evaluation stored: " + results["stored_check"], ""]
    return "\n".join(out)


def _cap_sys_nice() -> bool:
    """Whether serve (started by this process) may lower its threads' priority: reads'
    `os_thread_priority` applies only then."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) & (1 << 23))  # CAP_SYS_NICE
    return False


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.read_isolation", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per phase")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--rate", type=float, default=1000.0, help="ingest spans/s")
    parser.add_argument("--batch", type=int, default=50, help="spans per request")
    parser.add_argument("--clients", type=int, default=4, help="ingest connections")
    parser.add_argument("--reads", type=int, default=8, help="concurrent read clients")
    parser.add_argument("--kinds", default="none,sleeping,cpu")
    parser.add_argument("--compare-ref", help="also run the phases on this git ref's tree")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    parser.add_argument("--md", type=Path, help="[bench/READ_ISOLATION_RESULTS.md]")
    args = parser.parse_args(argv)
    if args.quick:
        args.duration, args.rounds = 5.0, 1
    args.kinds = [k for k in args.kinds.split(",") if k]
    unknown = set(args.kinds) - set(READS)
    if unknown:
        parser.error(f"unknown read kinds: {', '.join(sorted(unknown))}")
    args.md = args.md or (args.out if args.quick else ROOT / "bench") / "READ_ISOLATION_RESULTS.md"
    return args


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    results: dict[str, Any] = {
        "machine": machine.describe(),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": commit,
        "command": "python -m bench.read_isolation " + " ".join(argv or sys.argv[1:]),
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "load_average": os.getloadavg(),
        "cap_sys_nice": _cap_sys_nice(),
        "trees": [],
    }
    with tempfile.TemporaryDirectory(prefix="holonograph-reads-") as tmp:
        work = Path(tmp)
        trees: list[tuple[Path, str]] = []
        if args.compare_ref:
            trees.append((baseline_tree(args.compare_ref, work), args.compare_ref))
        trees.append((ROOT, "this tree"))
        for root, label in trees:
            _log(f"{label}: serve with default flags")
            results["trees"].append(run_tree(root, label, args, work))
    missing = [
        f"{t['tree']}: {t['stored']} stored < {t['accepted']} accepted"
        for t in results["trees"]
        if t["stored"] < t["accepted"]
    ]
    results["stored_check"] = "NO (" + "; ".join(missing) + ")" if missing else "yes"
    results["summary"] = summary(results)
    (args.out / "read_isolation.json").write_text(json.dumps(results, indent=1, default=str))
    args.md.write_text(markdown(results))
    _log(f"wrote {args.out / 'read_isolation.json'} and {args.md}")
    if missing:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
