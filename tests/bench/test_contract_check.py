"""The contract-check benchmark measures what it says (not a timing test): its contract
is valid and declares exactly the bench payload, so every event is checked in full and
none is flagged or rejected."""

from __future__ import annotations

from bench.contract_check import bench_contract, stage_rounds
from schemas.contracts import Contract


def test_the_bench_contract_accepts_the_bench_payload_unflagged() -> None:
    assert Contract.model_validate(bench_contract()).agent_id == "billing-triage"
    figures = stage_rounds(requests=2, rounds=1)  # raises when an event is flagged
    assert figures["us_per_span_with"] > 0 and figures["us_per_span_without"] > 0
