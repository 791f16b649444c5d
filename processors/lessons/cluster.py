"""Clustering overrides: one fix for a pattern instead of one per instance.

Deterministic and explainable, with no model (docs/lessons.md, Clustering):

1. **Key.** Overrides group first by what is structured about them: their tags
   (`fix_tier=...`) and the dimensions their call failed (the evaluation events with
   the override's correlation id). Two overrides with different keys never share a
   cluster.
2. **Text.** Within a key, overrides are split by the similarity of their text: the
   rationale's words and the words the correction added (`+word`) or removed
   (`-word`), weighted by TF-IDF over the run's overrides, compared by cosine, grouped
   by average linkage and cut at `threshold` (default 0.2: a cluster's members are on
   average at least that similar to each other).

A cluster's id is a function of its members (`cl_` + a digest of the sorted override
ids): the same members give the same id on any re-run. Each member carries the reason
it is in its cluster (its key, and its nearest fellow member with their cosine).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from pydantic import ConfigDict, Field, JsonValue, with_config
from typing_extensions import TypedDict

from processors.jobs import Job, JobError, JobRequest, never_a_finding
from processors.lessons.common import canonical, check_window, short_id
from processors.lessons.overrides import in_window
from schemas.contracts import Id
from schemas.events import DEFAULT_TENANT
from schemas.overrides import Override
from schemas.store import Store
from schemas.tables import EVALUATION_DIMENSIONS, LESSON_CLUSTERS
from schemas.times import Clock, from_store_time
from schemas.utctime import UtcTime

DEFAULT_THRESHOLD = 0.2
# Pairwise similarity is quadratic: one run clusters at most this many overrides
# (about 36 MB of distances); a longer window is refused with the count, not truncated.
MAX_OVERRIDES = 3000
REPRESENTATIVES = 3
EXAMPLES = 3
TOP_TERMS = 8
_WORD = re.compile(r"[a-z0-9][a-z0-9_]+")
STOPWORDS = frozenset(
    [
        "the",
        "a",
        "an",
        "and",
        "or",
        "of",
        "to",
        "in",
        "on",
        "for",
        "is",
        "was",
        "were",
        "be",
        "been",
        "it",
        "its",
        "this",
        "that",
        "with",
        "as",
        "at",
        "by",
        "from",
        "but",
        "not",
        "no",
        "so",
        "if",
        "then",
        "than",
        "when",
        "which",
        "who",
        "what",
        "agent",
        "user",
    ]
)


@dataclass(frozen=True)
class Item:
    """What clustering reads of one override."""

    event_id: str
    correlation_id: str
    tags: tuple[str, ...]
    failed_dimensions: tuple[str, ...]
    rationale: str
    original: Any
    corrected: Any

    @property
    def key(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        return self.tags, self.failed_dimensions


def words(text: str) -> list[str]:
    """Lower-case words of two or more characters, without stopwords and numbers (ids,
    amounts: what differs in every instance of a pattern)."""
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS and not w.isdigit()]


def _output_words(value: Any) -> set[str]:
    return set(words(value if isinstance(value, str) else canonical(value)))


def terms(item: Item) -> list[str]:
    """The rationale's words, and the words the correction added or removed."""
    before, after = _output_words(item.original), _output_words(item.corrected)
    return (
        words(item.rationale)
        + [f"+{w}" for w in sorted(after - before)]
        + [f"-{w}" for w in sorted(before - after)]
    )


def tfidf(documents: Sequence[list[str]]) -> tuple[np.ndarray, list[str]]:
    """L2-normalised TF-IDF rows (sublinear tf, smoothed idf) and the vocabulary. A term
    of one document only links nothing but would dilute that document's weight: left
    out."""
    frequency = Counter(t for d in documents for t in set(d))
    n = len(documents)
    vocabulary = sorted(t for t, df in frequency.items() if df > 1 or n == 1)
    index = {t: i for i, t in enumerate(vocabulary)}
    matrix = np.zeros((len(documents), len(vocabulary)))
    idf = np.array([math.log((1 + n) / (1 + frequency[t])) + 1 for t in vocabulary])
    for row, document in enumerate(documents):
        for term, count in Counter(document).items():
            if term in index:
                matrix[row, index[term]] = 1 + math.log(count)
    matrix *= idf
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms, vocabulary


@dataclass(frozen=True)
class Member:
    event_id: str
    correlation_id: str
    reason: str
    nearest: str | None
    similarity: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "eventId": self.event_id,
            "correlationId": self.correlation_id,
            "reason": self.reason,
            "nearestEventId": self.nearest,
            "similarity": self.similarity,
        }


@dataclass(frozen=True)
class Cluster:
    cluster_id: str
    surface_id: str
    members: tuple[Member, ...]
    tags: tuple[str, ...]
    failed_dimensions: tuple[str, ...]
    representative_rationales: tuple[str, ...]
    top_terms: tuple[str, ...]
    examples: tuple[dict[str, Any], ...]

    @property
    def member_ids(self) -> list[str]:
        return [m.event_id for m in self.members]

    @property
    def fix_tier(self) -> str | None:
        tiers = [t.split("=", 1)[1] for t in self.tags if t.startswith("fix_tier=")]
        return tiers[0] if tiers else None

    def summary(self) -> dict[str, Any]:
        """The shape the drafter consumes."""
        return {
            "surfaceId": self.surface_id,
            "size": len(self.members),
            "tags": list(self.tags),
            "fixTier": self.fix_tier,
            "failedDimensions": list(self.failed_dimensions),
            "representativeRationales": list(self.representative_rationales),
            "topTerms": list(self.top_terms),
            "examples": list(self.examples),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "clusterId": self.cluster_id,
            "surfaceId": self.surface_id,
            "size": len(self.members),
            "memberIds": self.member_ids,
            "members": [m.to_json() for m in self.members],
            "tags": list(self.tags),
            "failedDimensions": list(self.failed_dimensions),
            "representativeRationales": list(self.representative_rationales),
            "summary": self.summary(),
        }


def cluster_id(member_ids: Sequence[str]) -> str:
    return short_id("cl", sorted(member_ids), 20)


def _labels(similarity: np.ndarray, threshold: float) -> list[int]:
    """Average-linkage groups of rows whose mean cosine is at least `threshold`."""
    # Imported at the first clustering: serve mounts this job and does not pay for
    # scipy at start (tests/holonograph/cli/test_startup.py).
    from scipy.cluster.hierarchy import fcluster, linkage

    n = similarity.shape[0]
    if n == 1:
        return [1]
    distance = np.clip(1.0 - similarity, 0.0, None)
    condensed = distance[np.triu_indices(n, k=1)]
    tree = linkage(condensed, method="average")
    return [int(x) for x in fcluster(tree, t=1.0 - threshold, criterion="distance")]


def _key_text(tags: tuple[str, ...], failed: tuple[str, ...]) -> str:
    parts = []
    if tags:
        parts.append(f"tags {', '.join(tags)}")
    if failed:
        parts.append(f"failed dimensions {', '.join(failed)}")
    return " and ".join(parts) if parts else "no tags and no failed dimension"


def _build(
    surface_id: str, items: list[Item], rows: np.ndarray, vocabulary: list[str], threshold: float
) -> Cluster:
    ids = [item.event_id for item in items]
    similarity = rows @ rows.T
    tags, failed = items[0].key
    key = _key_text(tags, failed)
    members = []
    for i, item in enumerate(items):
        if len(items) == 1:
            reason = f"shares {key} with no other override within the text threshold {threshold}"
            members.append(Member(item.event_id, item.correlation_id, reason, None, None))
            continue
        others = [j for j in range(len(items)) if j != i]
        j = max(others, key=lambda k: (similarity[i, k], -k))
        cosine = round(float(similarity[i, j]), 4)
        reason = f"shares {key}; its text is nearest to {ids[j]} (cosine {cosine})"
        members.append(Member(item.event_id, item.correlation_id, reason, ids[j], cosine))
    centrality = similarity.mean(axis=1)
    order = sorted(range(len(items)), key=lambda k: (-centrality[k], ids[k]))
    representatives: list[str] = []
    for k in order:
        text = items[k].rationale
        if text and text not in representatives:
            representatives.append(text)
        if len(representatives) == REPRESENTATIVES:
            break
    centroid = rows.sum(axis=0)
    top = [
        vocabulary[t] for t in np.argsort(-centroid, kind="stable")[:TOP_TERMS] if centroid[t] > 0
    ]
    examples = tuple(
        {
            "eventId": items[k].event_id,
            "correlationId": items[k].correlation_id,
            "originalOutput": items[k].original,
            "correctedOutput": items[k].corrected,
            "rationale": items[k].rationale,
        }
        for k in order[:EXAMPLES]
    )
    return Cluster(
        cluster_id(ids), surface_id, tuple(members), tags, failed, tuple(representatives),
        tuple(top), examples,
    )  # fmt: skip


def cluster_items(
    surface_id: str, items: Sequence[Item], threshold: float = DEFAULT_THRESHOLD
) -> list[Cluster]:
    """Clusters of `items`, largest first (then by id): by key, then by text."""
    if not items:
        return []
    items = sorted(items, key=lambda item: item.event_id)
    rows, vocabulary = tfidf([terms(item) for item in items])
    by_key: dict[tuple[tuple[str, ...], tuple[str, ...]], list[int]] = {}
    for index, item in enumerate(items):
        by_key.setdefault(item.key, []).append(index)
    clusters = []
    for indexes in by_key.values():
        sub = rows[indexes]
        labels = _labels(sub @ sub.T, threshold)
        for label in sorted(set(labels)):
            chosen = [indexes[k] for k, value in enumerate(labels) if value == label]
            clusters.append(
                _build(surface_id, [items[k] for k in chosen], rows[chosen], vocabulary, threshold)
            )
    return sorted(clusters, key=lambda c: (-len(c.members), c.cluster_id))


def failed_dimensions(
    store: Store, tenant: str, surface_id: str, correlation_ids: list[str]
) -> dict[str, tuple[str, ...]]:
    """The dimensions each call failed (its newest grade per event and dimension)."""
    if not correlation_ids:
        return {}
    sql = (
        "SELECT correlation_id, arraySort(groupUniqArray(dimension_id)) FROM ("
        " SELECT correlation_id, event_id, dimension_id, argMax(passed, ingested_at) AS passed"
        f" FROM {EVALUATION_DIMENSIONS.qualified}"
        " WHERE tenant_id = {tenant:String} AND surface_id = {surface:String}"
        " AND correlation_id IN {ids:Array(String)}"
        " GROUP BY correlation_id, event_id, dimension_id)"
        " WHERE passed = false GROUP BY correlation_id"
    )
    parameters = {"tenant": tenant, "surface": surface_id, "ids": correlation_ids}
    return {cid: tuple(dims) for cid, dims in store.query(sql, parameters).rows}


def items_of(store: Store, tenant: str, overrides: Sequence[Override]) -> list[Item]:
    if not overrides:
        return []
    surface = overrides[0].surface_id
    failed = failed_dimensions(
        store, tenant, surface, sorted({o.correlation_id for o in overrides})
    )
    return [
        Item(
            o.event_id,
            o.correlation_id,
            o.tags,
            failed.get(o.correlation_id, ()),
            o.rationale,
            o.original_output,
            o.corrected_output,
        )
        for o in overrides
    ]


# --- the job: POST /lessons/cluster -----------------------------------------------------


class ClusterRequest(JobRequest):
    """The Guide's POST /lessons/cluster body: a surface's overrides over [since, until)."""

    named_fields: ClassVar[Mapping[str, str]] = {"surface_id": "surface"}

    surface_id: Id = Field(description="The surface whose overrides are clustered.")
    since: UtcTime = Field(description="Window start, inclusive.")
    until: UtcTime = Field(description="Window end, exclusive.")
    threshold: float = Field(
        DEFAULT_THRESHOLD, ge=0.0, le=1.0,
        description="Least average cosine of a cluster's texts (docs/lessons.md).",
    )  # fmt: skip
    record: bool = Field(
        False, description="Store the clusters, so `lessons draft --cluster ID` can name one."
    )

    def persists(self) -> bool:
        return self.record


@dataclass(frozen=True)
class Clustering:
    tenant_id: str
    surface_id: str
    since: dt.datetime
    until: dt.datetime
    threshold: float
    event_count: int
    clusters: tuple[Cluster, ...]
    computed_at: dt.datetime
    recorded: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "surfaceId": self.surface_id,
            "since": self.since,
            "until": self.until,
            "threshold": self.threshold,
            "eventCount": self.event_count,
            "clusters": [c.to_json() for c in self.clusters],
            "recorded": self.recorded,
        }


Request = ClusterRequest
Report = Clustering


def run(store: Store, request: Request, clock: Clock) -> Clustering:
    check_window(request.since, request.until)
    tenant = request.tenant or DEFAULT_TENANT
    found = in_window(
        store, tenant, request.surface_id, request.since, request.until, MAX_OVERRIDES + 1
    )
    if len(found) > MAX_OVERRIDES:
        raise JobError(
            f"more than {MAX_OVERRIDES} overrides of {request.surface_id} in the window:"
            " cluster a shorter window",
            "too_many_overrides",
            details={"limit": MAX_OVERRIDES},
        )
    clusters = cluster_items(request.surface_id, items_of(store, tenant, found), request.threshold)
    return Clustering(
        tenant, request.surface_id, request.since, request.until, request.threshold, len(found),
        tuple(clusters), clock().astimezone(dt.UTC),
    )  # fmt: skip


def persist(store: Store, report: Clustering) -> Clustering:
    rows = [
        [
            report.tenant_id,
            c.cluster_id,
            c.surface_id,
            report.since,
            report.until,
            c.member_ids,
            canonical(c.to_json()),
            report.computed_at,
        ]
        for c in report.clusters
    ]
    if rows:
        store.insert(LESSON_CLUSTERS.qualified, rows, LESSON_CLUSTERS.columns)
    return Clustering(**{**report.__dict__, "recorded": True})


def recorded_cluster(store: Store, tenant: str, cluster_id: str) -> dict[str, Any] | None:
    """A recorded cluster's document (its newest recording), or None."""
    import json

    sql = (
        f"SELECT payload, computed_at FROM {LESSON_CLUSTERS.qualified} FINAL"
        " WHERE tenant_id = {tenant:String} AND cluster_id = {id:String}"
    )
    rows = store.query(sql, {"tenant": tenant, "id": cluster_id}).rows
    if not rows:
        return None
    document: dict[str, Any] = json.loads(rows[0][0])
    document["recordedAt"] = from_store_time(rows[0][1])
    return document


finding = never_a_finding


@with_config(ConfigDict(extra="forbid"))
class ClusteringDocument(TypedDict):
    """`Clustering.to_json()`: the Guide's `clusters[]` and `eventCount`."""

    surfaceId: str
    since: dt.datetime
    until: dt.datetime
    threshold: float
    eventCount: int
    clusters: list[dict[str, JsonValue]]
    recorded: bool


JOB = Job("lessons.cluster", Request, ClusteringDocument, run, persist, finding)
