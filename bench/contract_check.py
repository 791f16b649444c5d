"""What checking evaluations against their contract costs the receiver.

Two measurements, each with and without a registered contract in the same run,
alternating so machine noise hits both alike:

- `serve` as a real process (the embedded path, closed-loop gRPC load from the bench
  load generator): spans per CPU-second of the receiver, the figure the budget is
  stated in (checking may cost at most 10% of it: ratio >= 0.90);
- the decode/validate stage in-process (`validate_request` with and without the
  contract book), where the check runs, to show what it costs per span.

The contract declares exactly what the bench payload sends (agent, its four surfaces,
both dimensions, the cohort tags, the substrate column and every light source), so
every event is checked in full and none is flagged or rejected: the common case.

Run: `python -m bench.contract_check [--duration 10] [--rounds 2]`; prints one JSON line
and exits 1 when the receiver ratio is below the budget.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.measure import Scenario, run_fresh
from bench.paths import ROOT, EmbeddedPath, Endpoints, python_module
from bench.payload import _MODELS, _SURFACES, PayloadSpec, RequestFactory

BUDGET = 0.90  # spans per CPU-second with a contract / without


def bench_contract() -> dict[str, Any]:
    """The contract of the bench payload's agent (see `bench.payload`)."""
    surface = {
        "dimensions": [
            {"id": "correctness", "type": "boolean"},
            {"id": "tone", "type": "score"},
        ],
        "cohortTags": ["customer-tier"],
        "substrateColumns": [
            {"id": "prompt_hash", "control": "operator", "visibility": "transparent",
             "semantic": "deployment-state"},
            {"id": "fix_tier", "control": "operator", "visibility": "transparent",
             "semantic": "diagnostic", "values": ["tool-input-schema", "prompt", "retrieval"]},
        ],
    }  # fmt: skip
    return {
        "agentId": "billing-triage",
        "surfaces": [
            {"id": s, **surface, "routings": [{"surfaceId": s, "lightSourceId": list(_MODELS)}]}
            for s in _SURFACES
        ],
    }


class ContractPath(EmbeddedPath):
    """`holonograph serve` on a store where the bench contract is registered first."""

    name = "embedded+contract"

    def start(self, workdir: Path) -> Endpoints:
        document = workdir / "contract.json"
        document.write_text(json.dumps(bench_contract()))
        subprocess.run(
            python_module(
                "holonograph", "contract", "register", str(document),
                "--data-dir", str(workdir / "data"),
            ),
            cwd=ROOT, check=True, capture_output=True, timeout=300,
        )  # fmt: skip
        return super().start(workdir)


def receiver_rounds(duration: float, rounds: int, work: Path) -> dict[str, Any]:
    scenario = Scenario("contract check", duration=duration, clients=4)
    figures: dict[str, list[float]] = {"without": [], "with": []}
    for round_no in range(rounds):
        for label, make_path in (("without", EmbeddedPath), ("with", ContractPath)):
            result = run_fresh(make_path, [scenario], work / f"{label}{round_no}")
            if result.get("store") is not None and not result["store"]["ok"]:
                raise RuntimeError(f"{label}: accepted spans missing from the store")
            figures[label].append(result["spans_per_cpu_s"])
    without, with_ = statistics.mean(figures["without"]), statistics.mean(figures["with"])
    return {
        "spans_per_cpu_s_without": without,
        "spans_per_cpu_s_with": with_,
        "ratio": with_ / without,
        "runs": figures,
    }


def stage_rounds(requests: int, rounds: int) -> dict[str, Any]:
    """decode/validate CPU per span, with and without the contract book."""
    from ingest.export.contracts import ContractBook
    from ingest.export.decode import parse_protobuf
    from ingest.export.request import validate_request
    from schemas.contracts import Contract, ContractVersion

    version = ContractVersion(
        tenant_id="default", version_id="cv_bench", previous_version_id=None,
        registered_at=dt.datetime.now(dt.UTC), contract=Contract.model_validate(bench_contract()),
    )  # fmt: skip
    book = ContractBook([version])
    factory = RequestFactory(PayloadSpec(batch=512, tag="contract"))
    parsed = [parse_protobuf(factory.body(r)) for r in range(requests)]
    cpu: dict[str, float] = {"without": 0.0, "with": 0.0}
    spans = 0
    for _ in range(rounds):
        for label, contracts in (("without", None), ("with", book)):
            start = time.process_time()
            for request in parsed:
                batch = validate_request(request, contracts=contracts)
                if batch.quarantined or any(e.contract_findings for e in batch.events):
                    raise RuntimeError("the bench contract must accept the payload unflagged")
            cpu[label] += time.process_time() - start
        spans += sum(len(r.resource_spans[0].scope_spans[0].spans) for r in parsed)
    return {
        "us_per_span_without": cpu["without"] / spans * 1e6,
        "us_per_span_with": cpu["with"] / spans * 1e6,
        "ratio": cpu["without"] / cpu["with"],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.contract_check", description=__doc__)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per receiver run")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each, alternating")
    parser.add_argument("--requests", type=int, default=20, help="requests for the stage measure")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-contract-") as tmp:
        receiver = receiver_rounds(args.duration, args.rounds, Path(tmp))
    stage = stage_rounds(args.requests, args.rounds)
    ok = receiver["ratio"] >= BUDGET
    print(json.dumps({"receiver": receiver, "stage": stage, "budget": BUDGET, "ok": ok}))
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
