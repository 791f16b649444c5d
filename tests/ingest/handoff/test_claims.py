"""The claim index's Bloom filter (`ingest.handoff.claims.Bloom`): a key added is always
held, through the filter's growth, and a key never added is rarely held (each such
answer costs a store lookup, never a wrong decision)."""

from __future__ import annotations

from ingest.handoff.claims import Bloom


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
