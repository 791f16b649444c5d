"""One measurement: drive a load generator process against a running path and
account for the service's CPU, memory, latency and stored rows.

The load generator builds its requests first and says READY; only then are the
service's CPU counters read and the load released, so template building never
counts. The CPU window closes once every accepted span is queryable, so a path
that keeps working after answering (a Kafka sink) pays for that work too.
"""

from __future__ import annotations

import json
import secrets
import statistics
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import procstat
from bench.paths import ROOT, Endpoints, IngestPath, python_module
from bench.verify import Expected, verify, wait_queryable


@dataclass(frozen=True)
class Scenario:
    name: str
    transport: str = "grpc"  # grpc | http
    encoding: str = "protobuf"
    gzip: bool = False
    batch: int = 512
    clients: int = 4
    rate: float = 0.0  # spans/s; 0 = closed loop
    duration: float = 10.0
    max_outstanding: int = 0
    timeout: float = 30.0
    minimal: bool = False

    @property
    def label(self) -> str:
        wire = "gRPC" if self.transport == "grpc" else f"HTTP/{self.encoding}"
        return f"{wire}{' +gzip' if self.gzip else ''}, batch {self.batch}, {self.clients} conn"


def new_tag() -> str:
    return secrets.token_hex(4)


class LoadProcess:
    """`python -m bench.loadgen` as a child process, released on `go()`."""

    def __init__(self, scenario: Scenario, endpoints: Endpoints, tag: str) -> None:
        target = f"grpc://{endpoints.grpc}" if scenario.transport == "grpc" else endpoints.http
        argv = python_module(
            "bench.loadgen", "--target", target, "--encoding", scenario.encoding,
            "--batch", str(scenario.batch), "--clients", str(scenario.clients),
            "--rate", str(scenario.rate), "--duration", str(scenario.duration),
            "--timeout", str(scenario.timeout), "--tag", tag,
            "--max-outstanding", str(scenario.max_outstanding), "--wait-go",
            *(["--gzip"] if scenario.gzip else []),
            *(["--minimal"] if scenario.minimal else []),
        )  # fmt: skip
        self.popen = subprocess.Popen(
            argv, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.popen.stdout is not None
        ready = self.popen.stdout.readline().strip()
        if ready != "READY":
            self.popen.kill()
            raise RuntimeError(f"load generator did not start: {ready!r}")

    def go(self) -> None:
        assert self.popen.stdin is not None
        self.popen.stdin.write("go\n")
        self.popen.stdin.flush()

    def result(self) -> dict[str, Any]:
        out, _ = self.popen.communicate(timeout=3600)
        if self.popen.returncode != 0:
            raise RuntimeError(f"load generator failed with {self.popen.returncode}")
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return result


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=1000, method="inclusive")[int(q * 10) - 1]


@dataclass
class Phase:
    """A load phase's figures; `store` is filled by the verification."""

    scenario: dict[str, Any]
    offered_spans: int
    accepted_spans: int
    elapsed_s: float
    accepted_spans_per_s: float
    requests: dict[str, int]
    codes: dict[str, int]
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    latency_max_ms: float | None
    client_cpu_s: float
    mean_request_bytes: float
    overrun_requests: int
    timeline_accepted: list[int]
    timeline_throttled: list[int]


def phase_of(scenario: Scenario, result: dict[str, Any]) -> Phase:
    latencies = result["latencies_ms"]
    elapsed = result["elapsed_s"]
    return Phase(
        scenario=asdict(scenario),
        offered_spans=result["offered_spans"],
        accepted_spans=result["accepted_spans"],
        elapsed_s=elapsed,
        accepted_spans_per_s=result["accepted_spans"] / elapsed if elapsed else 0.0,
        requests=result["requests"],
        codes=result["codes"],
        latency_p50_ms=percentile(latencies, 50),
        latency_p99_ms=percentile(latencies, 99),
        latency_max_ms=max(latencies, default=None),
        client_cpu_s=result["client_cpu_s"],
        mean_request_bytes=result["mean_request_bytes"],
        overrun_requests=result["overrun_requests"],
        timeline_accepted=result["timeline_accepted"],
        timeline_throttled=result["timeline_throttled"],
    )


def measure(
    path: IngestPath, endpoints: Endpoints, scenarios: list[Scenario], verify_rows: bool = True
) -> dict[str, Any]:
    """Run `scenarios` back to back against one running path and account for them."""
    pids = path.pids()
    expected = Expected()
    phases: list[Phase] = []
    with procstat.RssSampler(pids) as rss:
        excluded = list(getattr(path, "excluded_pids", lambda: [])())
        cpu0: list[float] = []
        threads0: list[dict[str, float]] = []
        wall0 = 0.0
        for index, scenario in enumerate(scenarios):
            load = LoadProcess(scenario, endpoints, new_tag())
            if index == 0:
                cpu0 = [procstat.tree_cpu_seconds([pid]) for pid in [*pids, *excluded]]
                threads0 = [procstat.thread_cpu_seconds(pid) for pid in pids]
                wall0 = time.monotonic()
            load.go()
            result = load.result()
            expected.add(result)
            phases.append(phase_of(scenario, result))
        reader = path.reader() if verify_rows else None
        queryable = wait_queryable(reader, expected) if reader is not None else None
        cpu1 = [procstat.tree_cpu_seconds([pid]) for pid in [*pids, *excluded]]
        threads1 = [procstat.thread_cpu_seconds(pid) for pid in pids]
        wall = time.monotonic() - wall0
    deltas = [after - before for before, after in zip(cpu0, cpu1, strict=True)]
    cpu = sum(deltas[: len(pids)])
    roles = list(getattr(path, "roles", [f"pid {pid}" for pid in pids]))
    store = verify(reader, expected) if reader is not None else None
    accepted = sum(p.accepted_spans for p in phases)
    return {
        "path": path.name,
        "phases": [asdict(p) for p in phases],
        "accepted_spans": accepted,
        "service_cpu_s": cpu,
        "cpu_by_process": dict(zip(roles, deltas[: len(pids)], strict=True)),
        "cpu_by_thread": {
            role: _thread_deltas(before, after)
            for role, before, after in zip(roles, threads0, threads1, strict=True)
        },
        "excluded_cpu_s": sum(deltas[len(pids) :]),
        "service_wall_s": wall,
        "spans_per_cpu_s": accepted / cpu if cpu else None,
        "cpu_utilisation": cpu / wall if wall else None,
        "queryable_after_s": queryable,
        "peak_rss_mib": procstat.peak_rss_mib(pids),
        "peak_rss_by_process_mib": {
            role: procstat.peak_rss_mib([pid]) for role, pid in zip(roles, pids, strict=True)
        },
        "rss_samples_mib": rss.samples,
        "store": store,
    }


def _thread_deltas(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU seconds per thread name over the measurement (threads that ended are missed,
    so the sum can fall short of the process's CPU)."""
    deltas = {name: seconds - before.get(name, 0.0) for name, seconds in after.items()}
    return dict(sorted(((n, d) for n, d in deltas.items() if d > 0), key=lambda nd: -nd[1]))


def run_fresh(
    make_path: Any, scenarios: list[Scenario], workdir: Path, verify_rows: bool = True
) -> dict[str, Any]:
    """Start a fresh path in `workdir`, measure, stop it (a stop failure fails the run)."""
    workdir.mkdir(parents=True, exist_ok=True)
    path: IngestPath = make_path()
    endpoints = path.start(workdir)
    try:
        return measure(path, endpoints, scenarios, verify_rows)
    finally:
        path.stop()
