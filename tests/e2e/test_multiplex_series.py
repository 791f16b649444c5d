"""A month of multiplex calls sent as raw OTLP through the real receiver: a primary and
one observer per call sharing a correlation id, where only the primary moves (0.85 ->
0.65 across its served-version rollover `acme/m/2026-05 -> acme/m/2026-10`) while the
observer stays at 0.80, and 1 % of calls fall back to the observer. Every number an
operator reads is the primary's or the observer's, never a blend: drift, compare's
fallbacks, the topology scan over the alias routing, variance and the report."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from scipy import stats

from holonograph.cli import cli
from schemas.contracts import parse_contract
from schemas.registry import register
from testkit.backends import migrated_store
from testkit.multiplex_series import MultiplexSurface, MxCall, generate, otlp_requests
from tests.conftest import RunningReceiver
from tests.ingest.helpers import http_export, http_response

pytestmark = [pytest.mark.e2e, pytest.mark.clickhouse]

SPEC = MultiplexSurface()
WINDOW = ["--since", "2026-05-01T00:00:00Z", "--until", "2026-05-31T00:00:00Z"]
SURFACE = ["--surface", SPEC.surface_id]
CONTRACT = {
    "agentId": SPEC.agent_id,
    "surfaces": [
        {
            "id": SPEC.surface_id,
            "dimensions": [{"id": SPEC.dimension_id, "type": "boolean"}],
            # the alias, not a served version: events carry acme/m/2026-05 and -10
            "routings": [
                {"surfaceId": SPEC.surface_id, "lightSourceId": [SPEC.primary, SPEC.observer]}
            ],
        }
    ],
}


@pytest.fixture(scope="module")
def multiplexed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[MxCall]]]:
    path = tmp_path_factory.mktemp("multiplex") / "store"
    calls = generate(SPEC, seed=3)
    with migrated_store(path) as store:
        register(store, "default", parse_contract(CONTRACT), SPEC.start - dt.timedelta(days=1))
        receiver = RunningReceiver(store)
        try:
            for body in otlp_requests(SPEC, calls):
                reply = http_export(receiver.http_endpoint, body)
                assert reply.status_code == 200, reply.text
                assert http_response(reply).partial_success.rejected_spans == 0
        finally:
            receiver.stop()
    yield path, calls


def run(path: Path, *args: str) -> tuple[int, Any]:
    result = CliRunner().invoke(cli, [*args, "--data-dir", str(path), "--json"])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def drift(path: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    code, report = run(path, "drift", *SURFACE, *WINDOW, "--no-save", *extra)
    return code, report


def test_drift_reads_the_primary_series_and_its_full_shift(
    multiplexed: tuple[Path, list[MxCall]],
) -> None:
    path, calls = multiplexed
    code, report = drift(path, "--delta-threshold", "0.15")
    assert code == 1
    observers = sum(1 for c in calls for e in c.events if e.role == "observer")
    primaries = sum(1 for c in calls for e in c.events if e.role == "primary")
    assert report["series"] == {
        "role": "primary", "lightSource": None, "multiplexed": True, "events": primaries,
        "leftOut": observers, "observers": [SPEC.observer],
    }  # fmt: skip
    assert report["eventCount"] == primaries
    (point,) = report["changePoints"]
    # The primary's own shift, not the blend with the observer's unchanged events.
    assert point["effect"]["delta"] == pytest.approx(-0.20, abs=0.025)
    assert point["effect"]["ciLow"] < -0.20 < point["effect"]["ciHigh"]
    assert point["source"] == "light source" and point["confident"] is True
    (change,) = [c for c in point["layerChanges"] if c["column"] == "light_source_id"]
    assert (change["fromValue"], change["toValue"]) == SPEC.versions
    assert "2026-05-15T" in point["timestamp"] or point["window"]["from"] <= "2026-05-16"


def test_the_observer_is_its_own_series_with_no_change(
    multiplexed: tuple[Path, list[MxCall]],
) -> None:
    path, calls = multiplexed
    code, report = drift(path, "--role", "observer")
    assert code == 0
    assert report["changePoints"] == []
    assert report["series"]["role"] == "observer"
    assert report["eventCount"] == sum(1 for c in calls for e in c.events if e.role == "observer")
    assert report["dimensions"][0]["tested"] is True
    # By light source: the same observer series, and the primary's fallbacks apart.
    code, named = drift(path, "--role", "observer", "--light-source", SPEC.observer)
    assert (code, named["eventCount"], named["changePoints"]) == (0, report["eventCount"], [])


def test_all_roles_blend_only_on_request(multiplexed: tuple[Path, list[MxCall]]) -> None:
    path, _ = multiplexed
    _, report = drift(path, "--role", "all")
    assert report["series"]["role"] == "all" and report["series"]["leftOut"] == 0
    (point,) = report["changePoints"]
    assert point["effect"]["delta"] == pytest.approx(-0.10, abs=0.025)  # what a blend reads
    assert any("blended" in note for note in report["notes"])


def test_compare_counts_exactly_the_seeded_fallbacks(
    multiplexed: tuple[Path, list[MxCall]],
) -> None:
    path, calls = multiplexed
    _, report = run(path, "compare", *SURFACE, *WINDOW)
    fell_back = sum(1 for c in calls if c.fallback)
    assert 100 < fell_back < 300
    (rate,) = report["fallbacks"]
    assert rate == {
        "declaredPrimary": SPEC.primary, "answeredBy": SPEC.observer, "rule": "routing",
        "calls": len(calls), "fallbacks": fell_back, "rate": rate["rate"],
    }  # fmt: skip
    assert rate["rate"]["estimate"] == pytest.approx(fell_back / len(calls))
    assert rate["rate"]["ciLow"] < SPEC.fallback < rate["rate"]["ciHigh"]
    # The rollover is no fallback: the new version answered for the routing's primary.
    groups = {g["group"]: g for g in report["groups"]}
    assert groups[SPEC.versions[1]]["fallbacks"] == 0 and groups[SPEC.versions[0]]["fallbacks"] == 0
    assert groups[SPEC.observer_served]["fallbacks"] == fell_back
    assert groups[SPEC.versions[1]]["asPrimary"] > 5000
    # The paired difference on the same calls, per served version of the primary.
    after = [p for p in report["paired"] if p["primary"] == SPEC.versions[1]]
    (pair,) = after
    assert pair["difference"]["ciLow"] < 0.15 < pair["difference"]["ciHigh"]


def test_the_fallback_interval_holds_by_the_binomial(
    multiplexed: tuple[Path, list[MxCall]],
) -> None:
    """The Wilson interval reported is the one of the seeded count (its coverage is the
    Wilson interval's; here: it holds the true rate and matches a reference)."""
    path, _ = multiplexed
    _, report = run(path, "compare", *SURFACE, *WINDOW)
    (rate,) = report["fallbacks"]
    reference = stats.binomtest(rate["fallbacks"], rate["calls"]).proportion_ci(method="wilson")
    assert (rate["rate"]["ciLow"], rate["rate"]["ciHigh"]) == pytest.approx(
        (reference.low, reference.high), rel=1e-9
    )


def test_the_topology_scan_finds_no_false_gap_for_the_alias_routing(
    multiplexed: tuple[Path, list[MxCall]],
) -> None:
    path, _ = multiplexed
    code, report = run(
        path, "topology", "scan", "--agent", SPEC.agent_id, *WINDOW, "--tenant", "default"
    )
    (surface,) = report["surfaces"]
    light = surface["lightSources"]
    assert light["declaredNotObserved"]["count"] == 0
    assert light["observedNotDeclared"]["count"] == 0
    assert {e["id"] for e in light["declaredAndObserved"]["examples"]} == {
        SPEC.primary,
        SPEC.observer,
    }
    assert (code, report["gaps"]) == (0, 0)


def test_variance_and_the_report_read_the_primary_by_default(
    multiplexed: tuple[Path, list[MxCall]], tmp_path: Path
) -> None:
    path, _ = multiplexed
    _, primary = run(path, "variance", "decompose", *SURFACE, "--dimension", SPEC.dimension_id,
                     *WINDOW)  # fmt: skip
    _, observer = run(path, "variance", "decompose", *SURFACE, "--dimension", SPEC.dimension_id,
                      *WINDOW, "--role", "observer")  # fmt: skip
    assert primary["series"]["role"] == "primary" and observer["series"]["role"] == "observer"
    assert primary["mean"] == pytest.approx(0.75, abs=0.02)
    assert observer["mean"] == pytest.approx(0.80, abs=0.02)
    # The verdict reads the reading's own series again: the primary's moved with its
    # version rollover, the observer's did not.
    code, verdict = run(path, "variance", "evaluate", "--target-event-id", primary["eventId"])
    assert (code, verdict["verdict"]) == (1, "confounded")
    assert "light_source_id" in verdict["checks"]["varyingLayers"]
    code, verdict = run(path, "variance", "evaluate", "--target-event-id", observer["eventId"])
    assert (code, verdict["verdict"]) == (0, "viable"), verdict
    page = tmp_path / "report.html"
    written = CliRunner().invoke(
        cli,
        # until after the verdicts (made now): the report shows verdicts made in its window
        ["report", "--since", "2026-05-01T00:00:00Z", "--until", "2030-01-01T00:00:00Z",
         *SURFACE, "--as-of", "2026-05-31T00:00:00Z", "--data-dir", str(path), "--out",
         str(page)],
    )  # fmt: skip
    assert written.exit_code == 0, written.output
    html = page.read_text()
    assert f'data-metric="series/{SPEC.surface_id}/role">primary<' in html
    # The primary's verdict, though the observer's reading was evaluated after it.
    assert f'data-metric="variance/{SPEC.surface_id}/{SPEC.dimension_id}">confounded<' in html
