"""The claim index (`ingest.handoff.claims`). Its key hashes: a key added is always
held, through the runs' merges, and a key never added is not (only two keys of one
64-bit hash would be: a store lookup, never a wrong decision). Its memory: a commit's
keys are known until drained, then recent for two generations, then the store's to say."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from ingest.handoff.claims import ClaimIndex, Key, KeyHashes
from ingest.store.owners import Owners


def _keys(prefix: str, count: int) -> list[Key]:
    return [("tenant", f"{prefix}-{n}") for n in range(count)]


@pytest.fixture
def small_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs of 64 hashes, so that a few thousand keys make several runs and merges."""
    monkeypatch.setattr(KeyHashes, "FRESH", 64)


@pytest.mark.usefixtures("small_runs")
def test_every_key_added_is_held_through_the_merges() -> None:
    hashes = KeyHashes()
    added = _keys("held", 7000)
    for start in range(0, len(added), 500):  # commits of 500 new keys
        assert hashes.held_or_add(added[start : start + 500]) == set()
    assert all(key in hashes for key in added)
    assert hashes.held_or_add(added) == set(added)  # asked of every run at once
    assert len(hashes) == 7000 and hashes.nbytes <= 7000 * 8 + 60 * 64
    runs = [len(run) for run in hashes._runs]
    assert runs == sorted(runs, reverse=True) and len(runs) <= 6  # merged as it went


@pytest.mark.usefixtures("small_runs")
def test_keys_never_added_are_not_held() -> None:
    hashes = KeyHashes()
    hashes.extend(_keys("in", 50_000))  # as the store's claims are read at start
    assert hashes.held_or_add(_keys("in", 3)) == set(_keys("in", 3))
    assert hashes.held_or_add(_keys("out", 50_000)) == set()
    assert ("tenant", "none") not in KeyHashes()  # empty: holds nothing


def test_a_commit_with_two_keys_of_one_hash_is_asked_key_by_key() -> None:
    """Two keys of one hash in a commit cannot share the one-step answer: each is asked
    alone, and one claimed before is held whichever of the two comes first."""

    class Same(tuple[str, str]):
        def __hash__(self) -> int:
            return 7

    hashes = KeyHashes()
    claimed, new = Same(("t", "claimed")), Same(("t", "new"))
    assert hashes.held_or_add([claimed]) == set()
    assert hashes.held_or_add([new, claimed]) == {new, claimed}  # a collision: both held


class _Store:
    """Answers every lookup with no owner, and counts them."""

    url = "chdb:///unused"

    def __init__(self) -> None:
        self.queries = 0

    def query(self, sql: str, parameters: Any = None) -> Any:
        self.queries += 1
        return SimpleNamespace(rows=[])


def _decided(index: ClaimIndex, store: _Store, keys: list[Key], agent: str) -> Owners:
    """A decision that claims every new key of `keys` for `agent` (as `decide` would)."""
    found = index.owners(store, set(keys), set())  # type: ignore[arg-type]
    for key in keys:
        if key not in found.events:
            found.events[key] = agent
            found.placements[key] = ("surface", 7)
    return found


def test_pinned_keys_are_known_until_drained_then_recent_then_asked_of_the_store() -> None:
    store, index = _Store(), ClaimIndex(recent=4)
    keys = [("t", "a"), ("t", "b")]
    first = index.pin(_decided(index, store, keys, "agent-1"), frame=1)
    assert index.pending == 2 and store.queries == 0  # new keys: no lookup
    again = index.owners(store, {("t", "a")}, set())  # type: ignore[arg-type]
    assert again.events == {("t", "a"): "agent-1"} and again.placements[("t", "a")] == (
        "surface",
        7,
    )
    assert store.queries == 0  # pending
    index.unpin(first, stored=True)
    assert index.pending == 0
    assert index.owners(store, {("t", "b")}, set()).events == {("t", "b"): "agent-1"}  # type: ignore[arg-type]
    assert store.queries == 0  # recent
    # Two generations of two keys each: four more keys push "a" and "b" out.
    for frame, names in ((2, ["c", "d"]), (3, ["e", "f"])):
        more = [("t", n) for n in names]
        index.unpin(index.pin(_decided(index, store, more, "x"), frame), True)
    assert index.owners(store, {("t", "f")}, set()).events == {("t", "f"): "x"}  # type: ignore[arg-type]
    assert store.queries == 0
    assert index.owners(store, {("t", "a")}, set()).events == {}  # type: ignore[arg-type]
    assert store.queries == 1  # forgotten by memory, held by the filter: the store says


def test_keys_never_made_durable_or_refused_are_asked_of_the_store() -> None:
    store, index = _Store(), ClaimIndex()
    lost, kept = [("t", "lost")], [("t", "kept"), ("t", "refused")]
    failed = index.pin(_decided(index, store, lost, "a"), frame=1)
    logged = index.pin(_decided(index, store, kept, "a"), frame=2)
    index.unpin(failed, stored=False)  # its frame was never durable
    assert index.owners(store, set(lost), set()).events == {}  # type: ignore[arg-type]
    assert store.queries == 1
    index.forget([("e", "t", "refused")])  # the drain's store refused its claim
    index.unpin(logged, stored=True)
    found = index.owners(store, set(kept), set())  # type: ignore[arg-type]
    assert found.events == {("t", "kept"): "a"} and store.queries == 2


def test_keys_pinned_by_any_undrained_frame_are_known_without_a_lookup() -> None:
    store, index = _Store(), ClaimIndex()
    frames = []
    for frame, name in ((1, "a"), (2, "b"), (3, "c")):
        keys = [("t", name)]
        frames.append(index.pin(_decided(index, store, keys, name), frame))
    assert index.pending == 3
    found = index.owners(store, {("t", "a"), ("t", "b"), ("t", "c")}, set())  # type: ignore[arg-type]
    assert found.events == {("t", "a"): "a", ("t", "b"): "b", ("t", "c"): "c"}
    index.unpin(frames[1], stored=True)  # drains need not come in order for the index
    assert index.pending == 2 and store.queries == 0
    assert index.owners(store, {("t", "b")}, set()).events == {("t", "b"): "b"}  # type: ignore[arg-type]
    assert store.queries == 0  # recent now


def test_forgetting_a_pinned_key_leaves_the_decisions_placements_as_its_rows_hold_them() -> None:
    """A frame's rows are written under its decision's placements (the same dict the
    index pins): a key the store refused is dropped from the index, not from them."""
    store, index = _Store(), ClaimIndex()
    keys = [("t", "kept"), ("t", "refused")]
    decided = _decided(index, store, keys, "a")
    pinned = index.pin(decided, frame=1)
    assert pinned.placements is decided.placements  # not copied
    index.forget([("e", "t", "refused")])
    assert set(decided.placements) == set(keys)
    assert set(pinned.placements) == {("t", "kept")} and set(pinned.events) == {("t", "kept")}
    assert index.owners(store, {("t", "refused")}, set()).events == {}  # type: ignore[arg-type]
    assert store.queries == 1  # the store decides it again
