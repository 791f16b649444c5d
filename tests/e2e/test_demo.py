"""`holonograph demo` against a live `serve` on free ports: the analyses find what it
planted (the vendor change and the deploy timed to it, a fallback-free multiplex, the
day of dropped events, the overrides), the report's headline says so in words, and an
export that fails is exit 1 with the reason (tests/holonograph/demo: the same plan sends
the same spans)."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

import pytest

from schemas.tables import EVALUATION_EVENTS, LESSON_OVERRIDES
from tests.holonograph.cli.test_serve import ServeProcess, holonograph

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

UNTIL = "2026-11-20T00:00:00Z"
DEMO = ["demo", "--days", "14", "--calls-per-day", "48", "--until", UNTIL, "--seed", "5"]


def _json(*args: str) -> tuple[int, Any]:
    done = holonograph(*args, "--json")
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def _count(data_dir: Path, sql: str) -> int:
    code, rows = _json("query", "--data-dir", str(data_dir), sql)
    assert code == 0
    return int(rows[0]["n"])


def _hinted(demo: dict[str, Any], name: str) -> list[str]:
    """The command the demo suggested for `name` (`drift`, `compare`, ...), without the
    leading `holonograph`."""
    (argv,) = [h["command"][1:] for h in demo["tryNext"] if h["command"][1] == name]
    return list(argv)


def test_the_demo_plants_what_the_analyses_find(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    server = ServeProcess(data_dir)
    try:
        http_line = next(line for line in server.lines if line.startswith("OTLP/HTTP"))
        match = re.search(r"(http://127\.0\.0\.1:\d+)/v1/traces", http_line)
        assert match, server.lines
        sent = holonograph(*DEMO, "--endpoint", match[1], "--json")
        assert sent.returncode == 0, sent.stderr
        assert "spans sent (100%)" in sent.stderr  # progress, on stderr
        demo = json.loads(sent.stdout)
        assert demo["calls"] == 3 * 14 * 48
        assert demo["evaluations"] == 2 * demo["calls"] - demo["deliveryGap"]["dropped"]
        events = f"SELECT count() AS n FROM {EVALUATION_EVENTS.qualified} FINAL"
        assert _count(data_dir, events) == demo["evaluations"]
        store = ["--data-dir", str(data_dir)]

        # Every suggested command shows what it says, run as suggested (issue 27): the
        # drift by day, since 2 calls an hour would leave every hour bracketed sparse.
        changed = demo["plantedChange"]
        drift_argv = _hinted(demo, "drift")
        assert drift_argv[-2:] == ["--bucket", "day"]
        code, drift = _json(*drift_argv, *store, "--no-save")
        assert code == 1, json.dumps(drift)[:3000]  # a change point is a finding
        (point,) = drift["changePoints"]
        assert point["timestamp"] == changed["at"]
        assert point["source"] == "light source"
        assert point["effect"]["delta"] < -0.1
        assert not [b for b in drift["bracketedWindows"] if b["reason"] == "sparse"]
        (change,) = [e for e in point["layerChanges"] if e["column"] == "light_source_id"]
        assert (change["fromValue"], change["toValue"]) == ("acme/m/2026-05", "acme/m/2026-10")
        cited = {e["changeId"]: e for e in point["changeEvents"]}
        assert cited[demo["deploy"]["id"]]["kind"] == "deploy"
        assert cited[demo["deploy"]["id"]]["at"] == demo["deploy"]["at"]

        # The report's headline says it in words a newcomer reads: the change and what
        # it followed, and the day of loss (the report reads the latest stored run).
        code, _ = _json(*drift_argv, *store)
        assert code == 1
        surface = drift_argv[drift_argv.index("--surface") + 1]
        at = drift_argv.index("--since")
        _, report = _json("report", *drift_argv[at : at + 4], *store)  # every surface
        headline = report["headline"]
        assert headline.startswith(f"On {surface}, correctness fell by "), headline
        assert (
            f" at {changed['at']}, after a change of light source (the model that served the calls)"
        ) in headline, headline
        dropped = demo["deliveryGap"]["dropped"]
        assert f"; 1 stream lost {dropped} events in the window" in headline, headline
        assert "(s)" not in headline and headline.endswith(".")

        _, reading = _json(*_hinted(demo, "variance"), *store)
        _, verdict = _json("variance", "evaluate", "--target-event-id", reading["eventId"], *store)
        layers = {s["layers"]["light_source_id"] for s in verdict["strata"]}
        assert layers == {"acme/m/2026-05", "acme/m/2026-10"}

        _, compare = _json(*_hinted(demo, "compare"), *store)
        assert compare["fallbacks"] == [] and compare["callsWithoutPrimary"] == 0
        assert compare["multiplexCalls"] == demo["calls"] // 3
        assert all(group["fallbacks"] == 0 for group in compare["groups"])
        assert {p["paired"] for p in compare["paired"]} == {p["calls"] for p in compare["paired"]}
        assert sum(p["paired"] for p in compare["paired"]) == demo["calls"] // 3

        gap = demo["deliveryGap"]
        code, completeness = _json(*_hinted(demo, "completeness"), *store)
        assert code == 1  # a lossy stream is a finding
        (stream,) = completeness["streams"]
        assert stream["status"] == "closed-lossy"
        assert stream["missing"] == stream["loss"]["reportedDropped"] == gap["dropped"] > 0

        code, _ = _json(*_hinted(demo, "lessons"), *store)
        assert code == 0
        overrides = f"SELECT count() AS n FROM {LESSON_OVERRIDES.qualified} FINAL"
        assert _count(data_dir, overrides) == len(demo["overrides"]) == 5
        assert {h["command"][1] for h in demo["tryNext"]} == {
            "drift", "variance", "compare", "completeness", "lessons"
        }  # fmt: skip
    finally:
        code, stderr = server.stop()
    assert code == 0, stderr


def test_a_demo_with_nothing_listening_is_exit_1_with_the_reason() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = holonograph(*DEMO, "--endpoint", f"http://127.0.0.1:{port}", "--timeout", "1")
    assert done.returncode == 1
    assert f"the export to http://127.0.0.1:{port}/v1/traces failed" in done.stderr
    assert "Traceback" not in done.stderr
    assert "sent" not in done.stdout
