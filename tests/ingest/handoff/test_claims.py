"""The claim index (`ingest.handoff.claims`). Its Bloom filter: a key added is always
held, through the filter's growth, and a key never added is rarely held (each such
answer costs a store lookup, never a wrong decision). Its memory: a commit's keys are
known until drained, then recent for two generations, then the store's to say."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ingest.handoff.claims import Bloom, ClaimIndex, Key
from ingest.store.owners import Owners


def _keys(prefix: str, count: int) -> list[tuple[str, str, str]]:
    return [("e", "tenant", f"{prefix}-{n}") for n in range(count)]


def test_every_key_added_is_held_through_growth() -> None:
    bloom = Bloom(capacity=1000)
    added = _keys("held", 7000)  # three growths: 1000 + 2000 + 4000
    for key in added:
        bloom.add(key)
    assert all(key in bloom for key in added)
    assert bloom.nbytes <= 7000 * 10 // 8 + 64  # ~10 bits a key


def test_keys_never_added_are_rarely_held() -> None:
    bloom = Bloom(capacity=50_000)
    for key in _keys("in", 50_000):
        bloom.add(key)
    others = _keys("out", 50_000)
    false_positives = sum(key in bloom for key in others)
    assert false_positives < 0.03 * len(others)
    assert ("s", "tenant", "out-0") not in Bloom()  # an empty filter holds nothing


def test_held_or_add_answers_then_holds_every_key() -> None:
    bloom = Bloom(capacity=1000)
    first = [("tenant", f"k-{n}") for n in range(3000)]  # grows twice on the way
    assert len(bloom.held_or_add("e", first)) < 0.03 * len(first)
    assert bloom.held_or_add("e", first) == set(first)
    assert all(("e", *key) in bloom for key in first)
    assert ("s", "tenant", "k-0") not in bloom  # another kind, another key


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
    first = index.pin(_decided(index, store, keys, "agent-1"), set(keys), set(), frame=1)
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
        index.unpin(index.pin(_decided(index, store, more, "x"), set(more), set(), frame), True)
    assert index.owners(store, {("t", "f")}, set()).events == {("t", "f"): "x"}  # type: ignore[arg-type]
    assert store.queries == 0
    assert index.owners(store, {("t", "a")}, set()).events == {}  # type: ignore[arg-type]
    assert store.queries == 1  # forgotten by memory, held by the filter: the store says


def test_keys_never_made_durable_or_refused_are_asked_of_the_store() -> None:
    store, index = _Store(), ClaimIndex()
    lost, kept = [("t", "lost")], [("t", "kept"), ("t", "refused")]
    failed = index.pin(_decided(index, store, lost, "a"), set(lost), set(), frame=1)
    logged = index.pin(_decided(index, store, kept, "a"), set(kept), set(), frame=2)
    index.unpin(failed, stored=False)  # its frame was never durable
    assert index.owners(store, set(lost), set()).events == {}  # type: ignore[arg-type]
    assert store.queries == 1
    index.forget([("e", "t", "refused")])  # the drain's store refused its claim
    index.unpin(logged, stored=True)
    found = index.owners(store, set(kept), set())  # type: ignore[arg-type]
    assert found.events == {("t", "kept"): "a"} and store.queries == 2
