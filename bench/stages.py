"""Where the embedded path's CPU goes, stage by stage, in-process and without gRPC:
parse -> decode/validate -> ownership (the commit's one lookup, `ingest.store.owners`)
-> row building -> chDB insert, each timed apart on the same pre-encoded requests (the
Python stages on their thread's CPU clock; chDB's background work apart, as
`chdb_background`), plus the top functions by own time (cProfile).

`--path hot` (default) is what the receiver runs on these all-valid requests: the hot
path (`ingest.export.fast`: protobuf straight to rows, the commit's columns added at
"build_rows"); `--path reference` is `validate_request` (models) + `TableRows.add`.

`--log N` measures the small-request log instead of the direct commit
(`ingest.handoff.smalllog`): "own" is the ownership decided in memory (the claim
index), "log" the frame's encoding, write and fsync, and "insert" the drain, one
insert per table for every N commits. As in the receiver, the hot path is given the
request's bytes there (no serialization again), and a commit of hot-path batches is
framed as the tree's log frames it (`smalllog.Logged` where it has one).

`--insert-ab` measures the commit's insert alone, the way it inserted before this
tree's settings and column-wise rows ("before": placed rows, the block merged at
insert time, chDB's default threads) and as it does now, alternating commit by commit
on the same commits of one process, so both see the same load (medians of each).

Run as `python -m bench.stages --batch 512 --requests 40`; prints one JSON line.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.payload import PayloadSpec, RequestFactory

# Stages of Python alone are timed on their own thread's clock: chDB's background
# threads (merges of the parts the inserts wrote) run meanwhile, and the process clock
# would charge their CPU to whatever Python stage they overlap. Stages that call chDB
# are timed on the process clock (its threads do their work); what is left of the
# process's CPU is `chdb_background`.
_THREAD_STAGES = frozenset({"parse", "decode_validate", "build_rows"})


def _timed(label: str, timings: dict[str, float], work: Any) -> Any:
    clock = time.thread_time if label in _THREAD_STAGES else time.process_time
    cpu0 = clock()
    out = work()
    timings[label] = timings.get(label, 0.0) + clock() - cpu0
    return out


def _decoder(path: str) -> tuple[Any, Any, Any]:
    """(decode(request, wire=None), spans(decoded), add(decoded, rows, receipt, at)) of
    `path` (`wire`: the request's bytes, which the hot path reads as the receiver does)."""
    from ingest.export.fast import FastBatch, fast_batch
    from ingest.export.request import validate_request

    if path == "reference":
        return (
            lambda request, wire=None: validate_request(request),
            lambda d: len(d.emissions),
            lambda d, rows, receipt, at: rows.add(d, receipt, at),
        )

    def decode(request: Any, wire: bytes | None = None) -> FastBatch:
        batch = fast_batch(request, wire=wire)
        if batch is None:
            raise SystemExit("the bench payload must take the hot path")
        return batch

    return (
        decode,
        lambda d: len(d.receipts),
        lambda d, rows, receipt, at: d.add_to(rows, receipt, at),
    )


def measure_stages(
    batch: int, requests: int, requests_per_insert: int, path: str = "hot", log: int = 0
) -> dict[str, Any]:
    from ingest.export.decode import parse_protobuf
    from ingest.store import owners
    from ingest.store.clickhouse import open_store
    from ingest.store.owners import Submission, Writer
    from ingest.store.rows import TableRows, write_rows
    from schemas.migrations import apply_migrations
    from schemas.times import utc_now

    decode, count, add = _decoder(path)
    factory = RequestFactory(PayloadSpec(batch=batch, tag="stages00"))
    bodies = [factory.body(r) for r in range(requests)]
    timings: dict[str, float] = {}
    spans = 0
    with tempfile.TemporaryDirectory(prefix="bench-stages-") as tmp:
        store = open_store(f"chdb://{Path(tmp) / 'store'}")
        apply_migrations(store)
        process0 = time.process_time()
        try:
            if log:
                spans = _log_stages(store, bodies, decode, count, add, requests_per_insert, log,
                                    Path(tmp), timings)  # fmt: skip
            for start in range(0, 0 if log else len(bodies), requests_per_insert):
                rows = TableRows()
                decoded_all = []
                for body in bodies[start : start + requests_per_insert]:
                    request = _timed("parse", timings, lambda b=body: parse_protobuf(b))
                    decoded = _timed("decode_validate", timings, lambda q=request: decode(q))
                    spans += count(decoded)
                    decoded_all.append(decoded)
                at = utc_now()
                submissions = [
                    Submission(d, Writer(None), at, n) for n, d in enumerate(decoded_all)
                ]
                checked = _timed(
                    "own",
                    timings,
                    lambda s=submissions: owners.check(store, s, verify=False),
                )
                for n, decoded in enumerate(checked):
                    _timed(
                        "build_rows",
                        timings,
                        lambda d=decoded, k=start + n, t=rows, a=at: add(d, t, f"r{k}", a),
                    )
                _timed("insert", timings, lambda t=rows: write_rows(store, t))
        finally:
            timings["chdb_background"] = time.process_time() - process0 - sum(timings.values())
            store.close()
    total = sum(timings.values())
    return {
        "path": path,
        "log_commits_per_drain": log,
        "spans": spans,
        "cpu_s": total,
        "spans_per_cpu_s": spans / total,
        "stages": {
            name: {"cpu_s": cpu, "us_per_span": cpu / spans * 1e6, "share": cpu / total}
            for name, cpu in timings.items()
        },
    }


def _log_stages(
    store: Any, bodies: list[bytes], decode: Any, count: Any, add: Any,
    requests_per_commit: int, commits_per_drain: int, tmp: Path, timings: dict[str, float],
) -> int:  # fmt: skip
    """The log's commit path on `bodies`; returns the spans."""
    from ingest.export.decode import parse_protobuf
    from ingest.export.fast import FastBatch
    from ingest.handoff import smalllog
    from ingest.handoff.claims import ClaimIndex, claim_rows, decide
    from ingest.handoff.segments import SegmentLog
    from ingest.handoff.smalllog import Drained, Frame, SmallLog, encode_frame
    from ingest.store.owners import Submission, Writer
    from ingest.store.rows import TableRows
    from schemas.times import utc_now

    def add_logged(d: Any, rows: TableRows, receipt: str, at: Any) -> None:
        # as the receiver's log adds a commit of hot-path batches (`add_shared`)
        if isinstance(d, FastBatch):
            d.add_shared(rows, receipt, at)
        else:
            add(d, rows, receipt, at)

    hot = decode  # with the request's bytes, as the receiver's (`_decoder`)
    of = getattr(smalllog, "Logged", None)
    small = SmallLog(tmp / "log", store)
    index: ClaimIndex = small.index
    segments: SegmentLog = small.segments
    list(segments.recover())
    index.load(store)
    frames: list[Frame] = []
    spans = 0
    for number, start in enumerate(range(0, len(bodies), requests_per_commit), 1):
        decoded_all = []
        for body in bodies[start : start + requests_per_commit]:
            request = _timed("parse", timings, lambda b=body: parse_protobuf(b))
            decoded = _timed("decode_validate", timings, lambda q=request, b=body: hot(q, b))
            spans += count(decoded)
            decoded_all.append(decoded)
        at = utc_now()
        submissions = [Submission(d, Writer(None), at, n) for n, d in enumerate(decoded_all)]
        checked, decided, pinned = _timed(
            "own", timings, lambda s=submissions, k=number: decide(index, store, s, k)
        )
        rows = TableRows()
        for n, batch in enumerate(checked):
            _timed(
                "build_rows",
                timings,
                lambda d=batch, k=start + n, t=rows, a=at: add_logged(d, t, f"r{k}", a),
            )

        def logged(
            t: TableRows = rows, o: Any = decided, k: int = start, c: Any = checked, a: Any = at
        ) -> Any:
            # as the receiver's log frames a commit of hot-path batches with their bytes
            # (`smalllog.Logged`, where the tree has it)
            parts = None
            if of is not None and all(isinstance(d, FastBatch) and d.wire for d in c):
                parts = [of.of(d, f"r{k + n}", a, n) for n, d in enumerate(c)]
            payload = encode_frame(t, *claim_rows(o), *([parts] if parts else []))
            end = segments.append(payload)
            segments.sync()
            return end, len(payload)

        end, size = _timed("log", timings, logged)
        frames.append(Frame(number, end, size, rows, *claim_rows(decided), pinned))
        if len(frames) >= commits_per_drain or start + requests_per_commit >= len(bodies):
            taken, frames[:] = list(frames), []
            _timed("insert", timings, lambda f=taken: small._insert(f))
            _timed("log", timings, lambda f=taken: small._recorded(f, Drained()))
    segments.close()
    return spans


class _Before:
    """The store as the commit wrote to it before (see `--insert-ab`)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.url = inner.url

    def query(self, sql: str, parameters: Any = None) -> Any:
        return self._inner.query(sql, parameters)

    def command(self, sql: str, parameters: Any = None) -> None:
        self._inner.command(sql, parameters)

    def insert(self, table: str, rows: Any, columns: Any, settings: Any = None) -> None:
        before = {**(settings or {}), "optimize_on_insert": 1, "max_threads": 0}
        self._inner.insert(table, rows, columns, before)

    def close(self) -> None:
        self._inner.close()


def insert_ab(batch: int, requests: int, requests_per_insert: int) -> dict[str, Any]:
    """CPU per span of the commit's insert, before and now, alternating (see the module)."""
    import statistics

    from ingest.export.decode import parse_protobuf
    from ingest.store import owners
    from ingest.store.clickhouse import open_store
    from ingest.store.owners import Submission, Writer
    from ingest.store.rows import TableRows, write_rows
    from schemas.migrations import apply_migrations
    from schemas.times import utc_now

    decode, count, add = _decoder("hot")
    factory = RequestFactory(PayloadSpec(batch=batch, tag="stagesab"))
    bodies = [factory.body(r) for r in range(requests)]
    samples: dict[str, list[float]] = {"before": [], "now": []}
    with tempfile.TemporaryDirectory(prefix="bench-stages-") as tmp:
        store = open_store(f"chdb://{Path(tmp) / 'store'}")
        apply_migrations(store)
        try:
            for number, start in enumerate(range(0, len(bodies), requests_per_insert)):
                at = utc_now()
                decoded = [
                    decode(parse_protobuf(b)) for b in bodies[start : start + requests_per_insert]
                ]
                submissions = [Submission(d, Writer(None), at, n) for n, d in enumerate(decoded)]
                checked = owners.check(store, submissions, verify=False)
                rows = TableRows(placements=checked.placements)
                for n, d in enumerate(checked):
                    add(d, rows, f"r{start + n}", at)
                spans = sum(count(d) for d in decoded)
                order = ("before", "now") if number % 2 else ("now", "before")
                for name in order:
                    target: Any = _Before(store) if name == "before" else store
                    cpu0 = time.process_time()
                    write_rows(target, rows)
                    samples[name].append((time.process_time() - cpu0) / spans * 1e6)
        finally:
            store.close()
    medians = {name: statistics.median(values) for name, values in samples.items()}
    return {
        "mode": "insert_ab",
        "batch": batch,
        "commits": len(samples["now"]),
        "insert_us_per_span": medians,
        "now_over_before": medians["now"] / medians["before"],
        "samples_us_per_span": samples,
    }


def top_functions(
    batch: int, requests: int, limit: int = 15, path: str = "hot"
) -> list[dict[str, Any]]:
    """cProfile of decode/validate + row building (the pure-Python part) by own time."""
    from ingest.export.decode import parse_protobuf
    from ingest.store.rows import TableRows
    from schemas.times import utc_now

    decode, _, add = _decoder(path)
    factory = RequestFactory(PayloadSpec(batch=batch, tag="profile0"))
    bodies = [factory.body(r) for r in range(requests)]
    profiler = cProfile.Profile()
    profiler.enable()
    for r, body in enumerate(bodies):
        add(decode(parse_protobuf(body)), TableRows(), f"r{r}", utc_now())
    profiler.disable()
    stats = pstats.Stats(profiler)
    total = sum(row[2] for row in stats.stats.values())  # type: ignore[attr-defined]
    ranked = sorted(stats.stats.items(), key=lambda item: item[1][2], reverse=True)  # type: ignore[attr-defined]
    return [
        {
            "function": f"{Path(file).name}:{line}:{name}",
            "calls": calls,
            "own_s": own,
            "own_share": own / total,
            "cumulative_s": cumulative,
        }
        for (file, line, name), (_, calls, own, cumulative, _) in ranked[:limit]
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.stages", description=__doc__)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--requests-per-insert", type=int, default=4)
    parser.add_argument("--path", choices=("hot", "reference"), default="hot")
    parser.add_argument(
        "--log", type=int, default=0, metavar="N", help="the log, a drain per N commits"
    )
    parser.add_argument(
        "--insert-ab", action="store_true", help="the insert before and now, alternating"
    )
    args = parser.parse_args(argv)
    from ingest.service.gctune import tune_for_throughput

    tune_for_throughput()  # as `serve` runs
    if args.insert_ab:
        print(json.dumps(insert_ab(args.batch, args.requests, args.requests_per_insert)))
        return
    result = measure_stages(
        args.batch, args.requests, args.requests_per_insert, args.path, args.log
    )
    result["top_functions"] = top_functions(args.batch, max(4, args.requests // 4), path=args.path)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
