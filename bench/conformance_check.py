"""How long a conformance check takes over N stored events (chDB, one process).

    python -m bench.conformance_check --events 100000

Inserts seeded synthetic events (markers, tool calls, dimensions, latency) into a
temporary chDB store, then times `check_fixture` for a guarded tool fixture and for a
fixture mixing dimension, judge and latency assertions. Small defaults for smoke runs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import tempfile
import time
from typing import Any

from ingest.store.clickhouse import open_store
from processors.conformance.check import check_fixture
from schemas.conformance import Fixture
from schemas.migrations import apply_migrations

T0 = dt.datetime(2026, 7, 1, tzinfo=dt.UTC)
SURFACE = "classify-intent"


def synthetic_rows(n: int, seed: int) -> tuple[list[list[Any]], list[list[Any]]]:
    rng = random.Random(seed)
    events, dims = [], []
    now = dt.datetime.now(dt.UTC)
    for i in range(n):
        ts = T0 + dt.timedelta(seconds=i * 86400 / max(n, 1))
        refund = rng.random() < 0.3
        tools = ["refund_lookup"] if refund and rng.random() < 0.9 else []
        markers = {
            "user_message": ["I want a refund" if refund else "where is my order"],
            "response_text": ["You are owed $40." if tools else "Let me check."],
        }
        if rng.random() < 0.95:
            markers["tool_invocations"] = tools
        eid = f"evt_{i:08d}"
        events.append([eid, SURFACE, "production", ts, markers, [], rng.uniform(200, 2000), now])
        dims.append([eid, "correctness", rng.random() < 0.9, None, "", SURFACE, ts, now])
        if rng.random() < 0.5:
            dims.append([eid, "judge:polite-01", rng.random() < 0.95, None, "j", SURFACE, ts, now])
    return events, dims


def fixtures() -> list[Fixture]:
    base = {"appliesTo": {"surfaceId": SURFACE}, "description": "bench"}
    return [
        Fixture.model_validate({**base, "fixtureId": "refund", "ruleId": "r1",
                                "enforceability": "trace-enforceable",
                                "when": [{"kind": "marker-contains", "column": "user_message",
                                          "value": "refund"}],
                                "assertion": {"kind": "tool-invoked", "tool": "refund_lookup"}}),
        Fixture.model_validate({**base, "fixtureId": "mixed", "ruleId": "polite-01",
                                "enforceability": "judge-required",
                                "assertions": [{"kind": "dimension-passed",
                                                "dimension": "correctness"},
                                               {"kind": "judge", "criterion": "Be polite."},
                                               {"kind": "latency-at-most", "maxMs": 1500}]}),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"chdb://{tmp}")
        try:
            apply_migrations(store)
            events, dims = synthetic_rows(args.events, args.seed)
            started = time.perf_counter()
            for i in range(0, len(events), 50_000):
                store.insert("holonograph.evaluation_events", events[i : i + 50_000],
                             ["event_id", "surface_id", "run_mode", "timestamp", "markers",
                              "cohort_tags", "latency_ms", "ingested_at"])  # fmt: skip
            for i in range(0, len(dims), 50_000):
                store.insert("holonograph.evaluation_dimensions", dims[i : i + 50_000],
                             ["event_id", "dimension_id", "passed", "score", "judge",
                              "surface_id", "timestamp", "ingested_at"])  # fmt: skip
            print(f"inserted {len(events)} events, {len(dims)} dimensions"
                  f" in {time.perf_counter() - started:.2f}s")  # fmt: skip
            until = T0 + dt.timedelta(days=1)
            for fixture in fixtures():
                times = []
                for _ in range(args.repeat):
                    started = time.perf_counter()
                    result = check_fixture(store, fixture, since=T0, until=until, persist=False)
                    times.append(time.perf_counter() - started)
                rate = args.events / min(times)
                print(f"{fixture.fixture_id}: best {min(times) * 1000:.0f} ms of {args.repeat}"
                      f" ({rate:,.0f} events/s) verdict={result.verdict}"
                      f" counts={result.counts}")  # fmt: skip
        finally:
            store.close()


if __name__ == "__main__":
    main()
