"""The scenario generator: seeded, faithful to its spec, and loaded as the store expects."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from schemas.migrations import apply_migrations
from testkit.scenarios import Change, SurfaceSpec, generate, write_cells


def test_same_seed_same_cells_and_seeds_differ() -> None:
    spec = SurfaceSpec("s", buckets=24, tau=0.02)
    assert generate(spec, 1) == generate(spec, 1)
    assert generate(spec, 1) != generate(spec, 2)


def test_expected_labels() -> None:
    assert Change(1, 0.1, ("lens",)).expected == "lens"
    assert Change(1, 0.1, ("lens", "substrate")).expected == "confounded"
    assert Change(1, 0.1, ("silent",)).expected == "light source"
    assert Change(1, 0.1, ("cohort-mix",)).expected == "cohort-mix"
    with pytest.raises(ValueError):
        Change(1, 0.1, ("model",))


def _rate(cells: list, lo: int, hi: int, start: dt.datetime) -> float:  # type: ignore[type-arg]
    picked = [c for c in cells if lo <= (c.bucket_start - start) / dt.timedelta(hours=1) < hi]
    return sum(c.passes for c in picked) / sum(c.offered for c in picked)


def test_shift_is_tied_to_the_recorded_layer() -> None:
    spec = SurfaceSpec("s", buckets=100, events=(400, 500), changes=(Change(50, -0.1, ("lens",)),))
    cells = generate(spec, 3)
    assert _rate(cells, 0, 50, spec.start) == pytest.approx(0.8, abs=0.01)
    assert _rate(cells, 50, 100, spec.start) == pytest.approx(0.7, abs=0.01)
    assert {
        c.lens_version for c in cells if c.bucket_start < spec.start + dt.timedelta(hours=50)
    } == {"lv_0"}
    assert {
        c.lens_version for c in cells if c.bucket_start >= spec.start + dt.timedelta(hours=50)
    } == {"lv_1"}
    assert {c.light_source_id for c in cells} == {spec.served}


def test_rollout_overlaps_old_and_new_values_within_buckets() -> None:
    spec = SurfaceSpec("s", buckets=20, changes=(Change(5, -0.1, ("substrate",), rollout=6),))
    cells = generate(spec, 4)
    mid = spec.start + dt.timedelta(hours=7)
    assert {c.substrate["prompt_hash"] for c in cells if c.bucket_start == mid} == {"ph_0", "ph_1"}


def test_cohort_mix_moves_shares_not_rates() -> None:
    spec = SurfaceSpec("s", buckets=100, events=(400, 500),
                       changes=(Change(50, -0.06, ("cohort-mix",)),))  # fmt: skip
    cells = generate(spec, 5)
    late = [c for c in cells if c.bucket_start >= spec.start + dt.timedelta(hours=50)]
    share = sum(c.offered for c in late if c.cohort == ("tier=enterprise",)) / sum(
        c.offered for c in late
    )
    assert share == pytest.approx(0.5 - 0.06 / 0.2, abs=0.02)
    ent = [c for c in late if c.cohort == ("tier=enterprise",)]
    assert sum(c.passes for c in ent) / sum(c.offered for c in ent) == pytest.approx(0.9, abs=0.01)
    assert _rate(cells, 50, 100, spec.start) == pytest.approx(0.74, abs=0.01)


def test_written_events_and_emission_gaps(tmp_path: Path) -> None:
    from ingest.store.clickhouse import open_store

    spec = SurfaceSpec("s", buckets=48, events=(50, 80), loss=((10, 20, 0.5),))
    cells = generate(spec, 6)
    dropped = sum(c.dropped for c in cells)
    assert dropped > 0 and all(c.dropped <= c.offered - c.passes for c in cells)
    store = open_store(f"chdb://{tmp_path}")
    try:
        apply_migrations(store)
        delivered = write_cells(store, cells, dt.datetime(2026, 7, 1))
        assert delivered == sum(c.offered for c in cells) - dropped
        counts = store.query(
            "SELECT (SELECT count() FROM holonograph.evaluation_events FINAL),"
            " (SELECT count() FROM holonograph.evaluation_dimensions FINAL),"
            " (SELECT countIf(passed) FROM holonograph.evaluation_dimensions FINAL),"
            " (SELECT sum(m + 1 - c) FROM (SELECT max(emission_seq) AS m, count() AS c"
            "   FROM holonograph.emission_records GROUP BY emission_stream)),"
            " (SELECT uniqExact(emission_stream) FROM holonograph.emission_records)"
        ).rows[0]
        assert counts[:3] == (delivered, delivered, sum(c.passes for c in cells))
        # Every drop is a gap in its stream's ordinals, unless it sat at a stream's tail.
        assert dropped - counts[4] <= counts[3] <= dropped
        hours = store.query(
            "SELECT uniqExact(toStartOfHour(timestamp)) FROM holonograph.evaluation_events"
        ).scalar()
        assert hours == 48
    finally:
        store.close()


def test_events_for_the_receiver_match_the_stored_expansion() -> None:
    from testkit.scenarios import events_from_cells

    spec = SurfaceSpec("s", buckets=3, events=(5, 8), loss=((1, 2, 1.0),), scored=True)
    cells = generate(spec, 2)
    events = events_from_cells(cells)
    assert len(events) == sum(c.delivered for c in cells)
    assert len({e.event_id for e in events}) == len(events)
    assert all(e.score in (3.0, 5.0) for e in events)
    assert sum(e.passed for e in events) == sum(c.passes for c in cells)
    by_stream = sorted(e.seq for e in events)
    assert by_stream == sorted(set(by_stream))
    assert events[0].attributes["holonograph.lens.version"] == "lv_0"
