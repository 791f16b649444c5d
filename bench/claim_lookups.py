"""The small-request log's claim index against a store that already holds many claims:
how many commits of new event ids the index sends to the store (a lookup of the keys it
cannot rule out: ~7 ms of CPU and 15-300 ms on the log's thread live), and its CPU a key.

In a fresh process per tree and size (this tree and `--baseline-ref`, alternating): the
index is filled as at start (`ClaimIndex.load`, from a store answering its paged reads
with N claimed keys), then takes `--commits` commits of `--keys` new event ids each, as
the log's thread does (`owners`, `pin`, and after every 4 commits `unpin`, a drain). The
store answers every lookup with no owner, at no cost: the CPU figure is the index's own.

    python -m bench.claim_lookups --claimed 150000,1000000,3000000 --baseline-ref 96284ca
"""

from __future__ import annotations

import argparse
import bisect
import json
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any


class _ClaimedStore:
    """Answers the index's reads of `event_owners`/`stream_owners` with `keys`."""

    url = "chdb:///unused"

    def __init__(self, keys: list[tuple[str, str]]) -> None:
        self.keys = sorted(keys)

    def query(self, sql: str, parameters: Any = None) -> Any:
        from schemas.store import QueryResult

        events = "event_owners" in sql
        if sql.startswith("SELECT count()"):
            rows = [(len(self.keys), 1)] if events and self.keys else [(0, 0)]
            return QueryResult(("count", "max"), rows)
        if "DISTINCT" in sql and events:
            start = 0
            if parameters:
                start = bisect.bisect_right(self.keys, (parameters["t"], parameters["k"]))
            limit = int(sql.rsplit("LIMIT", 1)[1])
            return QueryResult(("tenant_id", "event_id"), self.keys[start : start + limit])
        return QueryResult((), [])  # a stream page, or a lookup: no owner


def measure(claimed: int, commits: int, keys: int) -> dict[str, Any]:
    """In this process (the tree on `sys.path`): lookups a commit, µs of CPU a key."""
    import gc

    from ingest.handoff.claims import ClaimIndex
    from ingest.store.owners import Owners

    store = _ClaimedStore([("default", uuid.uuid4().hex) for _ in range(claimed)])
    index = ClaimIndex()
    started = time.process_time()
    index.load(store)  # type: ignore[arg-type]
    load_s = time.process_time() - started
    store.keys = []
    gc.freeze()
    batches = [{("default", uuid.uuid4().hex) for _ in range(keys)} for _ in range(commits)]
    pinned = []
    cpu = 0.0
    for number, events in enumerate(batches, 1):
        started = time.process_time()
        found: Owners = index.owners(store, events, set())  # type: ignore[arg-type]
        for key in events:
            if key not in found.events:
                found.events[key] = "agent"
                found.placements[key] = ("surface", 0)
        pinned.append(_pin(index, found, events, number))
        if len(pinned) == 4:
            for frame in pinned:
                index.unpin(frame, stored=True)
            pinned = []
        cpu += time.process_time() - started
    return {
        "claimed": claimed,
        "lookups_per_commit": index.store_lookups / commits,
        "us_per_key": cpu / commits / keys * 1e6,
        "load_s": load_s,
    }


def _pin(index: Any, found: Any, events: set[Any], frame: int) -> Any:
    """`ClaimIndex.pin` in this tree or a baseline's: trees before issue 24's tenth round
    also passed the commit's keys (`pin(decided, events, streams, frame)`)."""
    try:
        return index.pin(found, frame)
    except TypeError:
        return index.pin(found, events, set(), frame)


def _run(root: Path, claimed: int, commits: int, keys: int) -> dict[str, Any]:
    """`measure` in a fresh process importing `root`'s code (this file run as a script)."""
    argv = [sys.executable, __file__, "--measure", str(claimed), str(commits), str(keys)]
    out = subprocess.run(
        argv, capture_output=True, text=True, check=True, env={"PYTHONPATH": str(root)}
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--measure"]:
        print(json.dumps(measure(*(int(value) for value in argv[1:4]))))
        return
    from bench.paths import ROOT, baseline_tree

    parser = argparse.ArgumentParser(prog="python -m bench.claim_lookups", description=__doc__)
    parser.add_argument("--claimed", default="150000,1000000,3000000")
    parser.add_argument("--commits", type=int, default=40)
    parser.add_argument("--keys", type=int, default=2048, help="new event ids a commit")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--baseline-ref", default="main")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-claims-") as tmp:
        trees = {"this": ROOT}
        if args.baseline_ref:
            trees[args.baseline_ref] = baseline_tree(args.baseline_ref, Path(tmp))
        for round_ in range(args.rounds):
            for claimed in (int(n) for n in args.claimed.split(",")):
                for name, root in trees.items():
                    result = _run(root, claimed, args.commits, args.keys)
                    print(json.dumps({"round": round_, "tree": name, **result}), flush=True)


if __name__ == "__main__":
    main()
