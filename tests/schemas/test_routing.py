"""The one routing rule: which entry an event answered for, and when a call fell back."""

from __future__ import annotations

import pytest

from ingest.store.clickhouse import ClickHouseStore
from schemas.contracts import Routing, Surface
from schemas.routing import (
    answers_for,
    answers_for_sql,
    entry_answered,
    primary_answer,
    routing_in_force,
)

CASES = [
    ("acme/m", "acme/m", "", True),  # the entry itself
    ("acme/m", "acme/m/2026-05", "", True),  # a version of it
    ("acme/m", "acme/m/2026-10/eu", "", True),
    ("acme/m", "acme/mini", "", False),  # a prefix, but not at a / boundary
    ("acme/m", "acme/m-2026-05", "", False),
    ("acme/m/2026-05", "acme/m", "", False),  # the entry is more specific
    ("openai/gpt-5", "gpt-5-2026-05-13", "openai/gpt-5", True),  # requested as it
    ("openai/gpt-5", "gpt-5-2026-05-13", "openai/gpt-4", False),
    ("", "", "", False),  # an empty entry answers for nothing
    ("", "acme/m", "", False),
]


@pytest.mark.parametrize(("entry", "served", "requested", "expected"), CASES)
def test_answers_for(entry: str, served: str, requested: str, expected: bool) -> None:
    assert answers_for(entry, served, requested) is expected


@pytest.mark.clickhouse
def test_the_sql_rendering_is_the_same_rule(store: ClickHouseStore) -> None:
    """The series' `--light-source` filter runs the rule in ClickHouse: same answers."""
    expression = answers_for_sql("{entry:String}", "{served:String}", "{requested:String}")
    for entry, served, requested, expected in CASES:
        found = store.query(
            f"SELECT {expression}", {"entry": entry, "served": served, "requested": requested}
        ).scalar()
        assert bool(found) is expected, (entry, served, requested)


def test_the_served_id_decides_before_the_requested_one() -> None:
    entries = ("anthropic/claude-sonnet-5", "openai/gpt-5")
    # A fallback vendor's event that records the primary as asked for is its own.
    assert entry_answered(entries, "openai/gpt-5/2026-05", "anthropic/claude-sonnet-5") == (
        "openai/gpt-5"
    )
    assert entry_answered(entries, "gpt-5-0513", "openai/gpt-5") == "openai/gpt-5"
    assert entry_answered(entries, "google/gemini-2-pro", "google/gemini-2-pro") is None


def _surface(*routings: dict[str, object]) -> Surface:
    return Surface.model_validate(
        {"id": "s", "routings": [{"surfaceId": "s", **r} for r in routings]}
    )


def test_the_routing_in_force_is_the_first_active_in_the_run_mode() -> None:
    surface = _surface(
        {"lightSourceId": "acme/test-model", "activeRunModes": ["test"]},
        {"lightSourceId": ["acme/m", "other/x"]},
    )
    assert routing_in_force(surface, "test") == surface.routings[0]
    assert routing_in_force(surface, "production") == surface.routings[1]
    assert routing_in_force(None, "production") is None


def test_fallbacks_under_a_routing() -> None:
    routing = Routing.model_validate(
        {"surfaceId": "s", "lightSourceId": ["acme/m", "other/x", "third/y"]}
    )
    rollover = primary_answer(routing, "acme/m/2026-10", "acme/m")
    assert (rollover.declared, rollover.answered, rollover.fallback) == ("acme/m", "acme/m", False)
    fell_back = primary_answer(routing, "other/x/v2", "other/x")
    assert (fell_back.answered, fell_back.fallback, fell_back.rule) == ("other/x", True, "routing")
    unrouted = primary_answer(routing, "rogue/z", "")
    assert (unrouted.answered, unrouted.fallback) == ("rogue/z", True)


def test_fallbacks_without_a_routing_compare_served_and_requested() -> None:
    rollover = primary_answer(None, "acme/m/2026-10", "acme/m")
    assert (rollover.declared, rollover.fallback, rollover.rule) == ("acme/m", False, "requested")
    fell_back = primary_answer(None, "other/x/v2", "acme/m")
    assert (fell_back.declared, fell_back.answered, fell_back.fallback) == (
        "acme/m",
        "other/x/v2",
        True,
    )
    unknown = primary_answer(None, "acme/m", "")
    assert (unknown.declared, unknown.fallback) == ("acme/m", False)
