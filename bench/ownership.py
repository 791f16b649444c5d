"""What the ownership check (`ingest.store.owners`) costs a commit, beside writing the
same commit's rows (building them and `write_rows`), measured in the same run on an
embedded store that already holds `--owned` claimed event ids.

Each commit is `--requests-per-commit` requests of `--batch` spans (the bench payload:
one agent, one stream per request). Timed apart, in CPU and wall seconds: the check
(one lookup, then the claims of the new ids; `--verify` adds the read-back several
writers do) and the commit's write. Requests take the receiver's hot path (a
`FastBatch`, checked on its rows), or with `--path reference` its models. Ids are
the payload's, which sort after the claimed ones as time-ordered ids do, or with
`--random-ids` spread uniformly among them (the worst case for the lookup: a granule
per id; these requests are rewritten as models, so they take the reference path).

Run as `python -m bench.ownership --batch 512 --requests-per-commit 4 --commits 10`;
prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.payload import PayloadSpec, RequestFactory


def measure(
    batch: int,
    per_commit: int,
    commits: int,
    owned: int,
    random_ids: bool,
    verify: bool,
    path: str = "fast",
) -> dict[str, Any]:
    from ingest.export.decode import parse_protobuf
    from ingest.export.fast import FastBatch, fast_batch
    from ingest.export.principal import Principal
    from ingest.export.request import validate_request
    from ingest.store import owners
    from ingest.store.clickhouse import open_store
    from ingest.store.rows import TableRows, write_rows
    from schemas.migrations import apply_migrations
    from schemas.tables import EVENT_OWNERS
    from schemas.times import utc_now

    principal = Principal(tenant_id="acme", agents=frozenset({"billing-triage"}))
    factory = RequestFactory(PayloadSpec(batch=batch, tag="owners00"))
    rng = random.Random(7)
    cpu = {"check": 0.0, "write": 0.0}
    wall = {"check": 0.0, "write": 0.0}
    spans = 0
    with tempfile.TemporaryDirectory(prefix="bench-owners-") as tmp:
        store = open_store(f"chdb://{Path(tmp) / 'store'}")
        apply_migrations(store)
        # Claimed ids before the payload's (`evt_owners00_...` sorts after `evt_0...`).
        store.command(
            f"INSERT INTO {EVENT_OWNERS.qualified} (tenant_id, event_id, agent_id,"
            " first_received_at, first_ingest_version)"
            " SELECT 'acme', concat('evt_0', leftPad(toString(number * 2), 12, '0')),"
            f" 'billing-triage', now64(3), number FROM numbers({owned})"
        )
        store.command(f"OPTIMIZE TABLE {EVENT_OWNERS.qualified} FINAL")
        try:
            for commit in range(commits):
                submissions = []
                rows = TableRows()
                at = utc_now()
                for r in range(per_commit):
                    n = commit * per_commit + r
                    request = parse_protobuf(factory.body(n))
                    writer = owners.Writer(principal.agents)
                    hot = path == "fast" and not random_ids
                    fast = fast_batch(request, principal) if hot else None
                    if fast is not None:
                        spans += len(fast.receipts)
                        submissions.append(owners.Submission(fast, writer, at, r))
                        continue
                    validated = validate_request(request, principal=principal)
                    if random_ids:  # spread over the claimed ones (never equal to one)
                        events = tuple(
                            e.model_copy(
                                update={"event_id": f"evt_0{rng.randrange(owned) * 2 + 1:012d}"}
                            )
                            for e in validated.events
                        )
                        validated = validated.model_copy(update={"events": events})
                    spans += len(validated.emissions)
                    submissions.append(owners.Submission(validated, writer, at, r))
                cpu0, wall0 = time.process_time(), time.perf_counter()
                checked = owners.check(store, submissions, verify=verify)
                cpu1, wall1 = time.process_time(), time.perf_counter()
                for r, stored in enumerate(checked):
                    if isinstance(stored, FastBatch):
                        stored.add_to(rows, f"r{commit}-{r}", at, r)
                    else:
                        rows.add(stored, f"r{commit}-{r}", at, r)
                write_rows(store, rows)
                cpu["check"] += cpu1 - cpu0
                wall["check"] += wall1 - wall0
                cpu["write"] += time.process_time() - cpu1
                wall["write"] += time.perf_counter() - wall1
        finally:
            store.close()
    return {
        "batch": batch,
        "requestsPerCommit": per_commit,
        "commits": commits,
        "owned": owned,
        "randomIds": random_ids,
        "verify": verify,
        "path": "reference" if random_ids else path,
        "spans": spans,
        "checkCpuMicrosPerSpan": round(cpu["check"] / spans * 1e6, 2),
        "writeCpuMicrosPerSpan": round(cpu["write"] / spans * 1e6, 2),
        "checkWallMicrosPerSpan": round(wall["check"] / spans * 1e6, 2),
        "writeWallMicrosPerSpan": round(wall["write"] / spans * 1e6, 2),
        "checkToWriteCpu": round(cpu["check"] / cpu["write"], 3),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--requests-per-commit", type=int, default=4)
    parser.add_argument("--commits", type=int, default=10)
    parser.add_argument("--owned", type=int, default=1_000_000)
    parser.add_argument("--random-ids", action="store_true")
    parser.add_argument("--verify", action="store_true")
    parser.add_argument("--path", choices=["fast", "reference"], default="fast")
    args = parser.parse_args(argv)
    result = measure(
        args.batch, args.requests_per_commit, args.commits, args.owned, args.random_ids,
        args.verify, args.path,
    )  # fmt: skip
    print(json.dumps(result))


if __name__ == "__main__":
    main()
