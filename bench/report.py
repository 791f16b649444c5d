"""results.json -> RESULTS.md tables and the scaling plot."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

TARGET_EMBEDDED = 0.20
TARGET_KAFKA = 0.13
TARGET_P99_MS = 250.0
PHASE_HEADER = (
    "| phase | seconds | offered spans/s | accepted spans/s | throttled requests |"
    " not sent (client cap) | unknown outcome | response codes | p50 ms | p99 ms |"
)
PHASE_RULE = "|---|---|---|---|---|---|---|---|---|---|"


# Figures behind choices in the code: their comments point here, so they live in RESULTS.md.
CODE_FIGURES = [
    "## Measurements behind settings in the code",
    "",
    "Measured once when each setting was chosen (not by this run); the code points here.",
    "",
    "- **Merge tuning** (`schemas/tuning.py`, `merge_selector_base` 10 instead of 5):"
    " measured in-process, about 10 µs less CPU per span, at 25 instead of 19 active"
    " parts after 60k spans.",
    "- **GC thresholds** (`ingest/service/gctune.py`, `(100_000, 10, 10)`): under 3x"
    " overload, 1,007 MiB peak RSS against 1,216 MiB with `(100_000, 50, 100)`, at the"
    " same CPU per span.",
    "- **Producer compression** (`ingest/handoff/kafka.py`, zstd by default): on the"
    " benchmark's spans zstd compresses 15.7x against gzip's 17.4x, for 4 instead of 32"
    " microseconds of CPU per span (aiokafka gzips at level 9, on the event loop).",
]


def _n(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.{digits}f}"


def _ratio(ours: float | None, base: float | None) -> str:
    if not ours or not base:
        return "n/a"
    return f"{ours / base:.2f}"


def _ok(flag: bool | None) -> str:
    return {True: "yes", False: "**NO**", None: "n/a"}[flag]


def _store_ok(result: dict[str, Any]) -> bool | None:
    store = result.get("store")
    return None if store is None else bool(store["ok"])


def _bases(results: dict[str, Any]) -> dict[str, float | None]:
    insert = results.get("baseline_chdb_insert", {})
    return {
        "a": results.get("baseline_grpc", {}).get("spans_per_cpu_s"),
        "b": results.get("baseline_walk", {}).get("spans_per_cpu_s"),
        "c": insert.get("row", {}).get("spans_per_cpu_s"),
    }


def _machine(results: dict[str, Any]) -> list[str]:
    m = results["machine"]
    packages = ", ".join(f"{k} {v}" for k, v in m["packages"].items())
    load = ", ".join(f"{x:.2f}" for x in m["load_average_at_start"])
    return [
        f"- Date: {m['date_utc']} (commit `{m['commit']}`), whole run took "
        f"{results.get('elapsed_s', 0) / 60:.1f} min",
        f"- Machine: {m['cpu']}, **{m['cores']} cores**, {m['memory_gib']} GiB RAM, "
        f"Linux {m['kernel']}, Python {m['python']}",
        f"- Packages: {packages}",
        f"- Load average when the run started: {load}. The machine is shared: other work "
        "was running, so absolute rates are noisy; the ratios to baselines measured in "
        "the same run are the figures to compare.",
        "- The load generator runs in its own process on the same 2 cores as the service "
        "(loopback only). Its CPU is not counted as the service's; the *client CPU* column "
        "shows how much of a core it used.",
    ]


def _path_row(name: str, result: dict[str, Any], bases: dict[str, float | None]) -> str:
    phase = result["phases"][0]
    ours = result["spans_per_cpu_s"]
    return (
        f"| {name} | {_n(phase['accepted_spans_per_s'])} | {_n(result['service_cpu_s'], 1)} | "
        f"{_n(ours)} | {_ratio(ours, bases['a'])} | {_ratio(ours, bases['b'])} | "
        f"{_ratio(ours, bases['c'])} | {_n(phase['latency_p50_ms'])} | "
        f"{_n(phase['latency_p99_ms'])} | {_n(result['queryable_after_s'], 2)} | "
        f"{_n(result['peak_rss_mib'])} | {_ok(_store_ok(result))} |"
    )


def _targets(results: dict[str, Any], bases: dict[str, float | None]) -> list[str]:
    lines = ["| target | measured | met |", "|---|---|---|"]
    for name, target in (("embedded", TARGET_EMBEDDED), ("kafka", TARGET_KAFKA)):
        path = results.get("paths", {}).get(name)
        if path is None:
            lines.append(
                f"| {name}: >= {target} of baseline (a) per CPU-second | not measured | n/a |"
            )
            continue
        ours = path["headline"]["spans_per_cpu_s"]
        ratio = ours / bases["a"] if ours and bases["a"] else None
        lines.append(
            f"| {name}: >= {target} of baseline (a) per CPU-second | {_n(ours)} vs "
            f"{_n(bases['a'])} spans/CPU-s = **{_n(ratio, 2)}** | "
            f"{_ok(ratio is not None and ratio >= target)} |"
        )
        half = path["half_rate"]["phases"][0]
        p99 = half["latency_p99_ms"]
        lines.append(
            f"| {name}: p99 export latency < {TARGET_P99_MS:.0f} ms at 50% of sustainable "
            f"({_n(half['scenario']['rate'])} spans/s) | {_n(p99)} ms | "
            f"{_ok(p99 is not None and p99 < TARGET_P99_MS)} |"
        )
        over = path["overload"]
        store = over["store"] or {}
        first, last = over["phases"][0], over["phases"][-1]
        throttled = first["requests"].get("throttled", 0)
        timeouts = first["requests"].get("unknown", 0)
        lines.append(
            f"| {name}: 3x overload answered with retryable throttling | {throttled} requests "
            f"throttled, {timeouts} client timeouts (30 s), p99 {_n(first['latency_p99_ms'])} ms"
            f" | {_ok(throttled > 0 and timeouts == 0)} |"
        )
        tail = last["timeline_accepted"][-6:-1] or last["timeline_accepted"]
        rate = sum(tail) / len(tail) / last["scenario"]["rate"] if tail else 0.0
        lines.append(
            f"| {name}: throughput recovers when load drops to 50% | last seconds: "
            f"{100 * rate:.0f}% of offered accepted | {_ok(rate >= 0.9)} |"
        )
        headline_rss = path["headline"]["peak_rss_mib"]
        lines.append(
            f"| {name}: 3x overload, peak RSS bounded by configuration | "
            f"{_n(over['peak_rss_mib'])} MiB with `{' '.join(over['serve_flags'])}` "
            f"({_n(headline_rss)} MiB at the sustainable rate)"
            + ("" if throttled else "; the in-flight limit never engaged")
            + f" | {_ok(throttled > 0)} |"
        )
        lines.append(
            f"| {name}: 3x overload, zero loss of accepted spans | accepted "
            f"{store.get('spans_accepted', 'n/a')}, lost {store.get('spans_lost', 'n/a')}"
            f"{_retryable_note(store)} | "
            f"{_ok(_store_ok(over))} |"
        )
    return lines


def _phase_rows(result: dict[str, Any]) -> list[str]:
    rows = []
    for phase in result["phases"]:
        scenario = phase["scenario"]
        offered = scenario["rate"] or (
            phase["offered_spans"] / phase["elapsed_s"] if phase["elapsed_s"] else 0
        )
        throttled = phase["requests"].get("throttled", 0)
        codes = ", ".join(f"{k} {v}" for k, v in sorted(phase["codes"].items()))
        rows.append(
            f"| {scenario['name']} | {scenario['duration']:.0f} | {_n(offered)} | "
            f"{_n(phase['accepted_spans_per_s'])} | {throttled} | {phase['overrun_requests']} | "
            f"{phase['requests'].get('unknown', 0)} | {codes} | {_n(phase['latency_p50_ms'])} | "
            f"{_n(phase['latency_p99_ms'])} |"
        )
    return rows


def _retryable_note(store: dict[str, Any]) -> str:
    stored = store.get("retryable_spans_stored")
    if not stored:
        return ""
    return f"; stored but answered retryable: {stored} (allowed: at-least-once)"


def _stored_of(store: dict[str, Any], key: str) -> str:
    """`N of M spans` when the run counted what was stored, else the old figure."""
    stored = store.get(f"{key}_stored")
    return f"{store.get(key, 0)} spans" if stored is None else f"{stored} of {store.get(key)}"


def _overload(result: dict[str, Any]) -> list[str]:
    store = result["store"] or {}
    recovery = result["phases"][-1]
    tail = recovery["timeline_accepted"][-6:-1] or recovery["timeline_accepted"]
    tail_rate = sum(tail) / len(tail) if tail else 0
    offered = recovery["scenario"]["rate"]
    samples = result["rss_samples_mib"]
    by_process = result.get("peak_rss_by_process_mib") or {}
    split = (
        " (" + ", ".join(f"{role} {_n(mib)}" for role, mib in by_process.items()) + ")"
        if len(by_process) > 1
        else ""
    )
    return [
        PHASE_HEADER,
        PHASE_RULE,
        *_phase_rows(result),
        "",
        f"- Service: `serve {' '.join(result['serve_flags'])}`. Peak RSS (VmHWM) "
        f"**{_n(result['peak_rss_mib'])} MiB**{split}; RSS sampled every 0.5 s: max "
        f"{_n(max(samples, default=0))} MiB, at the end {_n(samples[-1] if samples else None)}"
        " MiB.",
        f"- Accepted spans: {store.get('spans_accepted')}, stored: {store.get('spans_stored')}, "
        f"lost: **{store.get('spans_lost')}**; stored but not acknowledged (client timeout, "
        f"allowed): {_stored_of(store, 'unknown_outcome_spans')}; stored but answered "
        f"retryable: {_stored_of(store, 'retryable_spans')} (allowed: at-least-once, the "
        "client retries and the store collapses the repeat on the event id); stored but "
        f"never sent or refused (not allowed): {store.get('spans_unexpected')}; event rows "
        f"{store.get('event_rows')} for {store.get('evaluations_accepted')} accepted "
        "evaluations.",
        f"- Recovery: in the last seconds of the 50% phase the service accepted "
        f"{_n(tail_rate)} spans/s of {_n(offered)} offered "
        f"({_n(100 * tail_rate / offered if offered else 0)}%); accepted per second over the "
        f"recovery phase: {recovery['timeline_accepted']}; throttled per second: "
        f"{recovery['timeline_throttled']}.",
        f"- Overload phase, accepted spans per second: {result['phases'][0]['timeline_accepted']}",
    ]


def _scaling(points: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| batch | connections | accepted spans/s | spans/CPU-s | CPU-s per 1000 spans |"
        " service CPU % | p50 ms | p99 ms | client CPU % | rows ok |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in points:
        phase = p["phases"][0]
        per = 1000 / p["spans_per_cpu_s"] if p["spans_per_cpu_s"] else None
        client = 100 * phase["client_cpu_s"] / phase["elapsed_s"] if phase["elapsed_s"] else None
        lines.append(
            f"| {p['batch']} | {p['clients']} | {_n(phase['accepted_spans_per_s'])} | "
            f"{_n(p['spans_per_cpu_s'])} | {_n(per, 3)} | {_n(100 * p['cpu_utilisation'])} | "
            f"{_n(phase['latency_p50_ms'])} | "
            f"{_n(phase['latency_p99_ms'])} | {_n(client)} | {_ok(_store_ok(p))} |"
        )
    return lines


def _cpu_split(name: str, result: dict[str, Any]) -> list[str]:
    split = result.get("cpu_by_process") or {}
    if len(split) < 2 and not result.get("excluded_cpu_s"):
        return []
    parts = ", ".join(f"{role} {cpu:.1f} s" for role, cpu in split.items())
    return [
        f"- {name}: service CPU by process: {parts}; broker (not counted) "
        f"{result.get('excluded_cpu_s', 0):.1f} s."
    ]


def _thread_split(name: str, result: dict[str, Any]) -> list[str]:
    """CPU per span by thread name: Python's own threads apart from chDB's merges and
    insert workers (a measurement's threads that ended before it did are missed)."""
    by_role = result.get("cpu_by_thread") or {}
    accepted = result.get("accepted_spans") or 0
    if not by_role or not accepted:
        return []
    parts = []
    for role, threads in by_role.items():
        top = [f"{thread} {_n(1e6 * cpu / accepted)}" for thread, cpu in list(threads.items())[:4]]
        parts.append(f"{role}: {', '.join(top)}")
    return [f"- {name}: CPU µs per span by thread name: " + "; ".join(parts) + "."]


def _small(runs: list[dict[str, Any]]) -> list[str]:
    if not runs:
        return []
    lines = [
        "",
        "Small requests (1 span per request, 32 connections), group commit with and without a"
        " linger (`HOLONOGRAPH_LINGER_MS`, default 10):",
        "",
        "| linger ms | accepted spans/s | spans/CPU-s | p50 ms | p99 ms | rows ok |",
        "|---|---|---|---|---|---|",
    ]
    for run in runs:
        phase = run["phases"][0]
        lines.append(
            f"| {run['linger_ms']:.0f} | {_n(phase['accepted_spans_per_s'])} | "
            f"{_n(run['spans_per_cpu_s'])} | {_n(phase['latency_p50_ms'])} | "
            f"{_n(phase['latency_p99_ms'])} | {_ok(_store_ok(run))} |"
        )
    return lines


def _transports(path: dict[str, Any]) -> list[str]:
    lines = [
        "| transport (batch 512, 4 conn, closed loop) | accepted spans/s | spans/CPU-s |"
        " p50 ms | p99 ms | request bytes | client CPU % | rows ok |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for result in [path["headline"], *path["transports"]]:
        phase = result["phases"][0]
        client = 100 * phase["client_cpu_s"] / phase["elapsed_s"] if phase["elapsed_s"] else None
        lines.append(
            f"| {phase['scenario']['name']} | {_n(phase['accepted_spans_per_s'])} | "
            f"{_n(result['spans_per_cpu_s'])} | {_n(phase['latency_p50_ms'])} | "
            f"{_n(phase['latency_p99_ms'])} | {_n(phase['mean_request_bytes'])} | {_n(client)} | "
            f"{_ok(_store_ok(result))} |"
        )
    return lines


def _profile(results: dict[str, Any]) -> list[str]:
    lines = []
    stages = results.get("stages")
    if stages:
        lines += [
            "In-process, without gRPC (`python -m bench.stages`: the receiver's own functions on "
            f"the same requests, 4 requests per insert): **{_n(stages['spans_per_cpu_s'])} "
            "spans/CPU-s** end to end.",
            "",
            "| stage | µs CPU per span | share |",
            "|---|---|---|",
        ]
        for name, stage in stages["stages"].items():
            lines.append(
                f"| {name} | {_n(stage['us_per_span'], 1)} | {100 * stage['share']:.0f}% |"
            )
        lines += [
            "",
            "Top functions by own time in decode/validate + row building (cProfile; "
            "its per-call overhead inflates small functions):",
            "",
            "| function | calls | own s | share |",
            "|---|---|---|---|",
        ]
        for f in stages["top_functions"][:12]:
            lines.append(
                f"| `{f['function']}` | {f['calls']} | {f['own_s']:.3f} |"
                f" {100 * f['own_share']:.1f}% |"
            )
    for key in ("profile", "profile_batch1"):
        lines += _spy(results.get(key))
    kafka = results.get("profile_kafka") or {}
    for role, summary in (kafka.get("by_process") or {}).items():
        lines += _spy({**summary, "scenario": kafka["scenario"]}, f"kafka path `{role}`")
    return lines


def _spy(profile: dict[str, Any] | None, process: str = "`serve`") -> list[str]:
    if not profile:
        return []
    if not profile.get("samples"):
        return ["", f"py-spy profile: {profile.get('error', 'no samples')}"]
    scenario = profile.get("scenario", {"name": "gRPC, batch 512"})
    lines = [
        "",
        f"Live {process} process, py-spy, {scenario['name']} closed loop ({profile['samples']} "
        "samples of non-idle Python threads; a sample goes to the first stage on its stack; "
        "*other threads* are mostly the insert thread pool and gRPC pollers waiting in native "
        "code, which py-spy's idle heuristic does not always recognise):",
        "",
        "| stage | share of samples |",
        "|---|---|",
    ]
    for name, share in profile["stages"].items():
        lines.append(f"| {name} | {100 * share:.1f}% |")
    lines += ["", "| function (inclusive) | share |", "|---|---|"]
    for f in profile["inclusive"][:12]:
        lines.append(f"| `{f['function']}` | {100 * f['share']:.1f}% |")
    return lines


def _findings(results: dict[str, Any]) -> list[str]:
    """What the figures say, computed from them (text changes with the numbers)."""
    path = results.get("paths", {}).get("embedded")
    stages = results.get("stages")
    walk = results.get("baseline_walk", {}).get("spans_per_cpu_s")
    if path is None or not stages or not walk:
        return []
    ours = path["headline"]["spans_per_cpu_s"]
    per = {name: stage["us_per_span"] for name, stage in stages["stages"].items()}
    headline = path["headline"]
    threads = (headline.get("cpu_by_thread") or {}).get("serve", {})
    accepted = headline.get("accepted_spans") or 1
    python_us = 1e6 * threads.get("python", 0.0) / accepted
    merge_us = 1e6 * threads.get("MergeMutate", 0.0) / accepted
    insert_us = 1e6 * threads.get("ThreadPool", 0.0) / accepted
    out = [
        f"- **Per span.** The live service spends {_n(1e6 / ours)} µs CPU per span"
        + (
            f": Python threads {_n(python_us)} µs, chDB's background merges (`MergeMutate`) "
            f"{_n(merge_us)} µs, chDB's insert workers (`ThreadPool`) {_n(insert_us)} µs"
            if threads
            else ""
        )
        + f". Baseline (b) parses and walks a span in {_n(1e6 / walk, 1)} µs. In-process, the "
        f"receiver's own stages cost: decode/validate {_n(per.get('decode_validate'), 1)} µs, "
        f"row building {_n(per.get('build_rows'), 1)} µs, chDB insert {_n(per.get('insert'), 1)}"
        f" µs, parse {_n(per.get('parse'), 1)} µs. Decode/validate is "
        f"{_n(per.get('decode_validate', 0) * walk / 1e6, 1)}x a parse-and-walk: reading the "
        "attributes into Python values alone costs about what (b) does (`decode.attributes`, "
        "span and dimension events); the wire-contract checks (`validate.*`) and building the "
        "event's pydantic models (eight per evaluation, 1-2 µs each) make up the rest. Row "
        "building and the insert serialisation are Python too (clickhouse-connect's Native "
        "writer); the chDB share is parsing that block, sorting it and writing one part per "
        "table, then merging parts in the background.",
    ]
    points = {(p["batch"], p["clients"]): p for p in path["scaling"]}
    small = points.get((1, 4))
    if small and small["spans_per_cpu_s"]:
        ms = 1000 / small["spans_per_cpu_s"]
        share = (
            (results.get("profile_batch1") or {}).get("stages", {}).get("chDB insert (write_rows)")
        )
        out.append(
            f"- **Small requests.** At 1 span per request a request costs {_n(ms, 1)} ms of "
            f"CPU ({_n(small['spans_per_cpu_s'])} spans/CPU-s)"
            + (f"; {100 * share:.0f}% of the profile is the chDB insert" if share else "")
            + ": each group commit issues one INSERT per table, and an INSERT into a chDB "
            "MergeTree costs milliseconds however few rows it carries (it writes a part)"
            + (
                f"; baseline (c) measured {_n(commit['cpu_ms_per_commit'], 1)} ms CPU per "
                "1-span commit of 3 INSERTs"
                if (commit := results.get("baseline_chdb_insert", {}).get("single_span_commits"))
                else ""
            )
            + ". With 4 closed-loop clients a commit holds at most 4 requests; more "
            "connections or a linger batch more requests per commit (table below)."
        )
    over = path["overload"]["phases"][0]
    if not over["requests"].get("throttled"):
        out.append(
            "- **Overload.** Nothing was throttled: admission (`ingest/edge/admission.py`) counts "
            "request bytes on arrival against `--max-inflight-bytes`, and at this offered load "
            f"they stayed under it; latency reached p50 {_n(over['latency_p50_ms'])} ms and RSS "
            f"{_n(path['overload']['peak_rss_mib'])} MiB."
        )
    half = path["half_rate"]["phases"][0]
    request_ms = 512 / ours * 1000
    out.append(
        f"- **Latency.** At 50% of the sustainable rate: p50 {_n(half['latency_p50_ms'])} ms, "
        f"p99 {_n(half['latency_p99_ms'])} ms. A 512-span request costs about "
        f"{_n(request_ms)} ms of CPU: decoding on the decode thread, then one group commit "
        "(one INSERT per table) before the answer. A commit waits for requests already "
        "received and still being decoded (at most `HOLONOGRAPH_COMMIT_WAIT_MS`, 100 ms), so "
        "under load commits grow and parts are fewer, while a request arriving alone is "
        "written at once. The tail comes from requests that overlap: they share the one "
        "decode thread and the GIL with the writer."
    )
    out += _kafka_findings(results)
    json_run = next((t for t in path["transports"] if t["phases"][0]["scenario"]["name"]
                     == "HTTP JSON"), None)  # fmt: skip
    if json_run and json_run["spans_per_cpu_s"]:
        out.append(
            f"- **OTLP/JSON** costs {_n(ours / json_run['spans_per_cpu_s'], 1)}x protobuf per "
            "span (`json.loads` + hex-id rewriting + `json_format.ParseDict` before the same "
            "decode)."
        )
    return out


def _share(profile: dict[str, Any], function: str) -> str:
    entries = profile.get("inclusive", [])
    for entry in entries:
        if entry["function"] == function:
            return f"{100 * entry['share']:.0f}%"
    if entries:  # below the last listed function's share
        return f"<{100 * entries[-1]['share']:.0f}%"
    return "n/a"


def _kafka_findings(results: dict[str, Any]) -> list[str]:
    path = results.get("paths", {}).get("kafka")
    if path is None:
        return []
    headline = path["headline"]
    accepted = headline["accepted_spans"] or 1
    split = headline.get("cpu_by_process", {})
    costs = ", ".join(f"{role} {_n(1e6 * cpu / accepted)} µs" for role, cpu in split.items())
    text = (
        f"- **Kafka path.** CPU per span: {costs} (broker "
        f"{_n(1e6 * headline.get('excluded_cpu_s', 0) / accepted)} µs, not counted)."
    )
    by_process = (results.get("profile_kafka") or {}).get("by_process", {})
    receiver, sink = by_process.get("serve --kafka"), by_process.get("sink")
    if receiver:
        text += (
            " In the receiver (share of samples, inclusive): `validate_request` "
            f"{_share(receiver, 'validate_request (ingest/export/request.py)')}; record building: "
            "`screen` (serializes every event once) "
            f"{_share(receiver, 'screen (ingest/handoff/kafka_packing.py)')}, `pack` "
            f"(joins those bytes) {_share(receiver, 'pack (ingest/handoff/kafka_packing.py)')}; "
            "sending (`KafkaHandoff._send_all`, the producer and compression) "
            f"{_share(receiver, 'KafkaHandoff._send_all (ingest/handoff/kafka.py)')}."
        )
    if sink:
        text += (
            " In the sink: record decoding (one pydantic JSON pass, `model_validate_json`) "
            f"{_share(sink, 'BaseModel.model_validate_json (pydantic/main.py)')}, row building "
            f"{_share(sink, 'TableRows.add (ingest/store/rows.py)')}, the chDB insert "
            f"{_share(sink, 'write_rows (ingest/store/rows.py)')}."
        )
    return [text]


def markdown(results: dict[str, Any], png_name: str) -> str:
    bases = _bases(results)
    paths = results.get("paths", {})
    out = ["# Ingest benchmark results", "", *_machine(results), ""]
    out += [
        "Command: `/work/venv/bin/python -m bench.run` (see `bench/README.md`). Spans per "
        "CPU-second divide accepted spans by the user+system CPU of every process of the "
        "path (from `/proc/<pid>/stat`, children included) between the release of the load "
        "and the moment the last accepted span was queryable.",
        "",
        "## Targets",
        "",
        *_targets(results, bases),
        "",
        "## Paths and baselines (gRPC, batch 512, closed loop)",
        "",
        "| path | accepted spans/s | service CPU-s | spans/CPU-s | ratio to (a) | ratio to (b) |"
        " ratio to (c) | p50 ms | p99 ms | queryable after s | peak RSS MiB | rows == accepted |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, path in paths.items():
        out.append(_path_row(name, path["headline"], bases))
    if "baseline_grpc" in results:
        out.append(_path_row("(a) bare grpcio parse+walk", results["baseline_grpc"], bases))
    walk = results.get("baseline_walk", {})
    insert = results.get("baseline_chdb_insert", {})
    runs = [_n(r["spans_per_cpu_s"]) for r in results.get("baseline_grpc_runs", [])]
    out += [
        "",
        f"- (a) was measured before and after the path runs ({', '.join(runs)} spans/CPU-s); "
        "ratios use the mean.",
        f"- (b) parse-and-walk in-process: **{_n(bases['b'])} spans/CPU-s** "
        f"({walk.get('spans')} spans).",
        f"- (c) chDB insert of the receiver's rows (events, 2 dimensions, receipt per span), "
        f"{insert.get('requests_per_insert')} requests per insert: row-oriented (as "
        f"`ingest.store.rows` does) **{_n(bases['c'])} spans/CPU-s**; column-oriented "
        f"{_n(insert.get('columnar', {}).get('spans_per_cpu_s'))} spans/CPU-s.",
    ]
    if "kafka" not in paths:
        out += [
            "- Kafka path (`serve --kafka` + `sink`): **not measured** in this run: "
            + str(results.get("kafka_skipped", "not requested with --paths")),
        ]
    for name, path in paths.items():
        out += _cpu_split(name, path["headline"])
        out += _thread_split(name, path["headline"])
    for name, path in paths.items():
        half = path["half_rate"]
        if "transports" in path:
            out += ["", f"## {name}: transports", "", *_transports(path)]
        out += [
            "",
            f"## {name}: latency at 50% of sustainable ({_n(path['sustainable_spans_per_s'])} "
            "spans/s sustained closed loop)",
            "",
            "Open loop, latency measured from each request's scheduled send time.",
            "",
            PHASE_HEADER,
            PHASE_RULE,
            *_phase_rows(half),
            "",
            f"## {name}: overload at 3x sustainable, then 50%",
            "",
            *_overload(path["overload"]),
        ]
        if "scaling" in path:
            out += [
                "",
                f"## {name}: scaling",
                "",
                *_scaling(path["scaling"]),
                *_small(path.get("small_requests", [])),
                "",
                f"![scaling]({png_name})",
            ]
    out += ["", "## Where the time goes", "", *_findings(results), "", *_profile(results)]
    failures = results.get("failures") or []
    out += ["", "## Data loss check", ""]
    out.append(
        "Every run compared the store with the requests the client was told were accepted: "
        + ("**no accepted span was missing.**" if not failures else f"**FAILED**: {failures}")
    )
    out += ["", *CODE_FIGURES]
    return "\n".join(out) + "\n"


def write_plot(results: dict[str, Any], png: Path) -> None:
    os.environ.setdefault("MPLBACKEND", "Agg")
    import matplotlib.pyplot as plt

    paths = {name: path for name, path in results.get("paths", {}).items() if "scaling" in path}
    if not paths:
        return
    figure, (by_batch, by_clients) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, path in paths.items():
        batch = [p for p in path.get("scaling", []) if p["clients"] == 4]
        clients = [p for p in path.get("scaling", []) if p["batch"] == 512]
        for axis, points, key in ((by_batch, batch, "batch"), (by_clients, clients, "clients")):
            points = sorted(points, key=lambda p: p[key])
            xs = [p[key] for p in points]
            axis.plot(xs, [p["phases"][0]["accepted_spans_per_s"] for p in points], "o-",
                      label=f"{name}: accepted spans/s")  # fmt: skip
            axis.plot(xs, [p["spans_per_cpu_s"] or 0 for p in points], "s--",
                      label=f"{name}: spans per CPU-second")  # fmt: skip
    base = results.get("baseline_grpc", {}).get("spans_per_cpu_s")
    for axis in (by_batch, by_clients):
        if base:
            axis.axhline(base, color="grey", linestyle=":", label="baseline (a) spans/CPU-s")
        axis.set_yscale("log")
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=8)
    by_batch.set_xscale("log", base=2)
    by_batch.set_xlabel("spans per request (4 connections)")
    by_clients.set_xlabel("concurrent connections (batch 512)")
    by_batch.set_ylabel("spans")
    figure.suptitle("Ingest scaling (gRPC, closed loop)")
    figure.tight_layout()
    figure.savefig(png, dpi=110)
    plt.close(figure)
