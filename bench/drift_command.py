"""Wall time of the whole `holonograph drift` command on 30 days of hourly buckets.

Seeds a fresh chDB store with four kinds of surface like the regime tests' (wandering
with a daily cycle, wandering, a silent vendor change, a two-day prompt rollout), each
with three siblings on its alias where it has an alias, then runs the command as a user
would (a new process: start-up, chDB, the job, persisting the run) `--repeats` times per
surface and reports each wall time with what it found.

    python bench/drift_command.py --repeats 2 --json-out drift_command.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ingest.store.clickhouse import open_store
from schemas.migrations import apply_migrations
from testkit.scenarios import Change, SurfaceSpec, generate, write_cells

HOURS = 720
SINCE, UNTIL = "2026-06-01T00:00:00Z", "2026-07-01T00:00:00Z"


def specs() -> list[SurfaceSpec]:
    def group(name: str, alias: str, **kw: object) -> list[SurfaceSpec]:
        return [
            SurfaceSpec(f"{name}-{i}", events=(100, 300), buckets=HOURS, alias=alias, **kw)  # type: ignore[arg-type]
            for i in range(4)
        ]

    return [
        *group("cycled", "acme/cycled", tau=0.02, rho=0.97, seasonal=0.03),
        *group("wander", "acme/wander", tau=0.05, rho=0.97),
        *group("vendor", "acme/pro", tau=0.01, changes=(Change(400, -0.06, ("silent",)),)),
        SurfaceSpec("rollout-days", tau=0.01, events=(100, 300), buckets=HOURS, alias="solo",
                    changes=(Change(300, -0.07, ("substrate",), rollout=48),)),
    ]  # fmt: skip


def seed_store(path: Path, seed: int) -> None:
    store = open_store(f"chdb://{path}")
    try:
        apply_migrations(store)
        cells = [c for s in specs() for c in generate(s, seed=seed)]
        write_cells(store, cells, ingested_at=dt.datetime(2026, 7, 1))
    finally:
        store.close()


def run_command(path: Path, surface: str) -> dict[str, object]:
    started = time.perf_counter()
    done = subprocess.run(
        ["holonograph", "drift", "--store", f"chdb://{path}", "--surface", surface,
         "--since", SINCE, "--until", UNTIL, "--json"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - started
    report = json.loads(done.stdout)
    return {
        "surface": surface,
        "seconds": round(wall, 2),
        "exit": done.returncode,
        "changePoints": [
            {"source": p["source"], "confident": p["confident"]} for p in report["changePoints"]
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--json-out", help="write the results JSON here")
    args = parser.parse_args()
    runs = []
    with tempfile.TemporaryDirectory(prefix="drift-command-") as tmp:
        path = Path(tmp) / "store"
        print("seeding the store ...", file=sys.stderr, flush=True)
        seed_store(path, args.seed)
        for surface in ("cycled-0", "wander-0", "vendor-0", "rollout-days"):
            for _ in range(args.repeats):
                runs.append(run_command(path, surface))
                print(f"  {surface}: {runs[-1]['seconds']} s", file=sys.stderr, flush=True)
    text = json.dumps({"seed": args.seed, "runs": runs}, indent=2)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(text + "\n")


if __name__ == "__main__":
    main()
