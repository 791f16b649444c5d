"""Wall time of the analysis commands on an offline embedded store of 1,000 events,
beside `holonograph --help` measured in the same run (issue 24: at most one second).

Seeds a fresh chDB store with 1,000 evaluation events of the bench payload (and their
sentinels) through the receiver's own row path, then runs each command as a user
would, a new process every time (`python -m holonograph ...` from the tree), no
`serve` holding the store, alternating commands and trees for `--repeats` rounds.
Each tree's packages are compiled to bytecode first, as an installed package is (`pip
install` compiles; with `PYTHONDONTWRITEBYTECODE` set, as on these machines, a source
tree would otherwise be compiled again by every run: 0.1-0.7 s of it).
Prints one JSON document: the median wall seconds per command and tree, each median
over `--help`'s of the same tree, and the median CPU seconds (user + system) of each.

    python -m bench.cli_wall --repeats 5
    python -m bench.cli_wall --repeats 5 --baseline-ref main   # the old tree alongside
"""

from __future__ import annotations

import argparse
import compileall
import datetime as dt
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.paths import ROOT, baseline_tree, python_module
from bench.payload import PayloadSpec, RequestFactory

EVENTS = 1000
PACKAGES = ("holonograph", "ingest", "processors", "schemas")


def compile_tree(root: Path) -> None:
    """Bytecode for the tree's packages (in their `__pycache__`, as an install has)."""
    for package in PACKAGES:
        compileall.compile_dir(root / package, quiet=1)


def seed(path: Path) -> tuple[str, str, str]:
    """A store of `EVENTS` events; returns (surface, since, until) covering them."""
    from ingest.export.decode import parse_protobuf
    from ingest.export.request import validate_request
    from ingest.store.clickhouse import open_store
    from ingest.store.rows import TableRows, write_rows
    from schemas.migrations import apply_migrations

    store = open_store(f"chdb://{path}")
    try:
        apply_migrations(store)
        factory = RequestFactory(PayloadSpec(batch=512, tag="cliwall0"))
        rows, events, number = TableRows(), 0, 0
        now = dt.datetime.now(dt.UTC)
        while events < EVENTS:
            batch = validate_request(parse_protobuf(factory.body(number)))
            rows.add(batch, f"seed{number}", now)
            events, number = events + len(batch.events), number + 1
        write_rows(store, rows)
    finally:
        store.close()
    hour = now.replace(minute=0, second=0, microsecond=0)
    since = (hour - dt.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    until = (hour + dt.timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return "draft-reply", since, until


def commands(data_dir: Path, surface: str, since: str, until: str) -> dict[str, list[str]]:
    store = ["--data-dir", str(data_dir), "--json"]
    window = ["--since", since, "--until", until]
    return {
        "--help": ["--help"],
        "drift": ["drift", "--surface", surface, *window, *store],
        "completeness": ["completeness", *store],
        "compare": ["compare", "--surface", surface, *window, *store],
        "quarantine": ["quarantine", *store],
    }


def wall(root: Path, args: list[str]) -> tuple[float, int, float]:
    """(wall seconds, exit code, CPU seconds) of one run: on a loaded machine the CPU
    (user + system of the process) says what the command costs, the wall what a user
    waited."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        python_module("holonograph", *args), cwd=root, capture_output=True, timeout=300
    )
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return seconds, done.returncode, cpu


def render(result: dict[str, Any], command: str) -> str:
    """The markdown table of one result document."""
    trees = result["trees"]
    names = list(next(iter(trees.values()))["median_wall_s"])
    head = " | ".join(f"{t} wall s (x `--help`) | {t} CPU s" for t in trees)
    out = [
        f"Command: `{command}`; median of {result['repeats']} runs each, a new process per"
        f" run, offline store of {result['events']:,} events.",
        "",
        f"| command | {head} |",
        "|---|" + "---|---|" * len(trees),
    ]
    for name in names:
        cells = [
            f"{trees[t]['median_wall_s'][name]:.2f} ({trees[t]['over_help'][name]:.1f}x)"
            f" | {trees[t].get('median_cpu_s', {}).get(name, float('nan')):.2f}"
            for t in trees
        ]
        out.append(f"| `{name}` | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--render"]:  # python -m bench.cli_wall --render result.json "command"
        print(render(json.loads(Path(argv[1]).read_text()), " ".join(argv[2:])))
        return
    parser = argparse.ArgumentParser(prog="python -m bench.cli_wall", description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--baseline-ref", default="", help="git ref of a tree to run alongside")
    args = parser.parse_args(argv)
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    load_before = os.getloadavg()  # the wall is the measure: say how busy the machine was
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        work = Path(tmp)
        trees = {"this tree": ROOT}
        if args.baseline_ref:
            trees["baseline tree"] = baseline_tree(args.baseline_ref, work)
        data_dir = work / "store"
        surface, since, until = seed(data_dir)
        runs = commands(data_dir, surface, since, until)
        for root in trees.values():  # the first run migrates the store for that tree
            compile_tree(root)
            wall(root, runs["quarantine"])
        times: dict[str, dict[str, list[float]]] = {t: {c: [] for c in runs} for t in trees}
        cpus: dict[str, dict[str, list[float]]] = {t: {c: [] for c in runs} for t in trees}
        codes: dict[str, dict[str, set[int]]] = {t: {c: set() for c in runs} for t in trees}
        for _ in range(args.repeats):
            for name, argv_ in runs.items():
                for label, root in trees.items():
                    seconds, code, cpu = wall(root, argv_)
                    times[label][name].append(seconds)
                    cpus[label][name].append(cpu)
                    codes[label][name].add(code)
            last = {t: {c: round(v[-1], 2) for c, v in times[t].items()} for t in trees}
            print(f"round done: {json.dumps(last)}", file=sys.stderr, flush=True)
    out: dict[str, Any] = {
        "events": EVENTS,
        "repeats": args.repeats,
        "started_at": started,
        "load_average_1_5_15": {"start": load_before, "end": os.getloadavg()},
        "baseline_ref": args.baseline_ref or None,
        "trees": {},
    }
    for label in trees:
        medians = {c: statistics.median(v) for c, v in times[label].items()}
        out["trees"][label] = {
            "median_wall_s": medians,
            "over_help": {c: m / medians["--help"] for c, m in medians.items()},
            "median_cpu_s": {c: statistics.median(v) for c, v in cpus[label].items()},
            "exit_codes": {c: sorted(v) for c, v in codes[label].items()},
            "runs_s": times[label],
        }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
