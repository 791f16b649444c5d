"""Clustering in memory: deterministic (any input order, the same clusters and ids),
key first (different tags or failed dimensions never share a cluster), text second,
and the benchmark's bound (adjusted Rand index >= 0.9) on a few of its seeded sets."""

from __future__ import annotations

import numpy as np
import pytest

from bench.lessons_cluster import BOUND, adjusted_rand_index, score
from processors.lessons.cluster import Item, cluster_id, cluster_items, terms, tfidf


def item(
    n: int,
    rationale: str,
    tags: tuple[str, ...] = ("fix_tier=prompt",),
    failed: tuple[str, ...] = (),
) -> Item:
    return Item(f"ovr_{n:03d}", f"corr_{n:03d}", tags, failed, rationale, {"a": "x"}, {"a": "y"})


ITEMS = [
    item(1, "refund lookup was not invoked before answering"),
    item(2, "agent never invoked the refund lookup"),
    item(3, "refund lookup skipped, it guessed"),
    item(4, "far too curt, apologise for the delay"),
    item(5, "curt reply, no apology for the delay"),
    item(6, "refund lookup not invoked", tags=("fix_tier=tool-input-schema",)),
    item(7, "refund lookup not invoked", failed=("tool_use",)),
]


def test_clusters_are_deterministic_and_key_first() -> None:
    forward = cluster_items("s", ITEMS)
    backward = cluster_items("s", list(reversed(ITEMS)))
    assert [c.to_json() for c in forward] == [c.to_json() for c in backward]
    groups = sorted(sorted(c.member_ids) for c in forward)
    assert groups == [
        ["ovr_001", "ovr_002", "ovr_003"], ["ovr_004", "ovr_005"], ["ovr_006"], ["ovr_007"],
    ]  # fmt: skip
    for c in forward:
        assert c.cluster_id == cluster_id(list(reversed(c.member_ids)))
    lone = next(c for c in forward if c.member_ids == ["ovr_007"])
    assert lone.failed_dimensions == ("tool_use",)
    assert "no other override" in lone.members[0].reason


def test_the_text_of_a_correction_counts_and_numbers_do_not() -> None:
    shown = terms(
        Item("o", "c", (), (), "Wrong total 1234", {"t": "total 10"}, {"t": "total 12 vat"})
    )
    assert shown == ["wrong", "total", "+vat"]
    rows, vocabulary = tfidf([["a", "b"], ["a", "c"]])
    assert vocabulary == ["a"] and np.allclose(np.linalg.norm(rows, axis=1), 1.0)


def test_adjusted_rand_index_matches_known_values() -> None:
    same = np.array([0, 0, 1, 1])
    assert adjusted_rand_index(same, np.array([5, 5, 7, 7])) == 1.0
    assert adjusted_rand_index(
        np.array([0, 0, 0, 1, 1, 1]), np.array([0, 0, 1, 1, 2, 2])
    ) == pytest.approx(0.2424, abs=1e-4)


@pytest.mark.parametrize("seed", range(3))
def test_the_benchmark_bound_holds_on_seeded_sets(seed: int) -> None:
    result = score(seed, groups=12, per_group=15, missing=0.0, threshold=0.2)
    assert result["ari"] >= BOUND, result
