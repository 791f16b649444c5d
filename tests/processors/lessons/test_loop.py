"""The lessons loop on a real store: overrides in, clusters with stable ids, drafts,
the gate, publication with its change event, and a published fixture re-run."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from processors.jobs import JobError, NotFound
from processors.lessons import approve, cluster, draft, listing, overrides, publish, reject, rerun
from schemas.store import QueryResult, Store
from schemas.tables import CHANGE_EVENTS, CONFORMANCE_FIXTURES, LESSON_ARTIFACTS, LESSON_OVERRIDES
from testkit.faulty_store import StoreDown
from tests.processors.lessons.support import (
    SURFACE,
    T0,
    Clock,
    call,
    insert_calls,
    override_body,
)

pytestmark = pytest.mark.clickhouse
WINDOW = {"surfaceId": SURFACE, "since": "2026-07-01T00:00:00Z", "until": "2026-07-02T00:00:00Z"}
REFUND = {"tool_invocations": ["refund_lookup"], "user_message": ["where is my refund"]}
GUESSED = {"tool_invocations": [], "user_message": ["where is my refund"]}


def _count(store: Store, table: str) -> int:
    return int(store.query(f"SELECT count() FROM {table} FINAL").scalar())


def _seeded(store: Store, clock: Clock) -> dict[str, Any]:
    """Six refund overrides (calls that failed tool_use) and three tone ones."""
    calls = [(f"evt_{n:03d}", f"corr_{n:03d}", {"tool_use": False}, GUESSED) for n in range(6)]
    calls += [(f"evt_{n:03d}", f"corr_{n:03d}", {"tone": False}, GUESSED) for n in range(6, 9)]
    calls += [("evt_good", "corr_good", {"tool_use": True}, REFUND)]
    insert_calls(store, calls)
    for n in range(6):
        call(store, overrides.JOB, override_body(n), clock)
    for n in range(6, 9):
        body = override_body(
            n,
            rationale=f"Too curt with the customer, case {n}; apologise for the delay.",
            tags=["fix_tier=prompt"],
            correctedOutput={"answer": "Sorry for the wait! Your refund is being processed."},
        )
        call(store, overrides.JOB, body, clock)
    shown: dict[str, Any] = call(store, cluster.JOB, {**WINDOW, "record": True}, clock).to_json()
    return shown


def test_an_override_is_stored_once_and_a_resend_writes_nothing(store: Store) -> None:
    clock = Clock()
    first = call(store, overrides.JOB, override_body(1), clock).to_json()
    assert first["created"] and first["eventId"].startswith("ovr_")
    again = call(store, overrides.JOB, override_body(1), clock).to_json()
    assert not again["created"] and again["eventId"] == first["eventId"]
    assert again["recordedAt"] == first["recordedAt"]
    assert _count(store, LESSON_OVERRIDES.qualified) == 1
    explicit = override_body(2, eventId="ovr_client_1")
    assert call(store, overrides.JOB, explicit, clock).override.event_id == "ovr_client_1"
    with pytest.raises(JobError) as refused:
        call(store, overrides.JOB, {**explicit, "rationale": "something else"}, clock)
    assert refused.value.kind == "conflict" and refused.value.code == "event_id_conflict"
    assert _count(store, LESSON_OVERRIDES.qualified) == 2


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"surfaceId": "bad surface"}, "surfaceId"),
        ({"originalOutput": "x" * 70_000}, "originalOutput"),
        ({"tags": ["t"] * 51}, "tags"),
        ({"at": "3000-01-01T00:00:00Z"}, "at"),
        ({"unknown": 1}, "unknown"),
    ],
)
def test_a_bad_override_is_refused_and_nothing_is_stored(
    store: Store, change: dict[str, Any], problem: str
) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=problem):
        call(store, overrides.JOB, override_body(1, **change), Clock())
    assert _count(store, LESSON_OVERRIDES.qualified) == 0


def test_listing_names_the_calls_evaluation_events(store: Store) -> None:
    clock = Clock()
    insert_calls(store, [("evt_001", "corr_001", {"tool_use": False}, GUESSED)])
    call(store, overrides.JOB, override_body(1), clock)
    call(store, overrides.JOB, override_body(2), clock)
    shown = call(store, listing.JOB, WINDOW, clock).to_json()
    assert shown["count"] == 2
    assert [o["evaluationEventIds"] for o in shown["overrides"]] == [["evt_001"], []]
    outside = call(store, listing.JOB, {**WINDOW, "since": "2026-07-01T00:02:00Z"}, clock)
    assert [o.correlation_id for o in outside.overrides] == ["corr_002"]  # since: inclusive
    before = call(store, listing.JOB, {**WINDOW, "until": "2026-07-01T00:01:00Z"}, clock)
    assert before.overrides == ()  # until: exclusive


def test_clusters_group_by_key_then_text_with_stable_ids_and_reasons(store: Store) -> None:
    clock = Clock()
    shown = _seeded(store, clock)
    assert shown["eventCount"] == 9 and shown["recorded"]
    sizes = [(c["size"], c["failedDimensions"], c["tags"]) for c in shown["clusters"]]
    assert sizes == [
        (6, ["tool_use"], ["fix_tier=tool-input-schema", "tool=refund_lookup"]),
        (3, ["tone"], ["fix_tier=prompt"]),
    ]
    biggest = shown["clusters"][0]
    assert biggest["summary"]["fixTier"] == "tool-input-schema"
    assert all("failed dimensions tool_use" in m["reason"] for m in biggest["members"])
    assert all(m["nearestEventId"] in biggest["memberIds"] for m in biggest["members"])
    again = call(store, cluster.JOB, WINDOW, clock).to_json()
    assert [c["clusterId"] for c in again["clusters"]] == [
        c["clusterId"] for c in shown["clusters"]
    ]


def test_the_loop_from_cluster_to_a_published_lesson_and_fixture(store: Store) -> None:
    clock = Clock()
    clusters = _seeded(store, clock)["clusters"]
    refund = clusters[0]["clusterId"]
    # A fixture draft, derived by the conformance derive step, passing on its seed.
    drafted = call(
        store, draft.JOB,
        {"kind": "fixture", "clusterId": refund, "seedEventId": "evt_good"}, clock,
    ).to_json()  # fmt: skip
    assert drafted["enqueued"] and drafted["status"] == "drafted"
    fixture = drafted["draft"]["content"]["fixture"]
    assert fixture["assertion"] == {"kind": "tool-invoked", "tool": "refund_lookup"}
    assert drafted["draft"]["content"]["seedCheck"] == {"seed": "evt_good", "verdict": "pass"}
    assert drafted["classification"] == "fix_tier=tool-input-schema"
    same = call(
        store, draft.JOB, {"kind": "fixture", "clusterId": refund, "seedEventId": "evt_good"}, clock
    )
    assert same.to_json()["draftId"] == drafted["draftId"] and not same.decision.created
    # On a seed that shows the failure, it is not offered.
    with pytest.raises(JobError) as failing:
        call(
            store,
            draft.JOB,
            {"kind": "fixture", "clusterId": refund, "seedEventId": "evt_001"},
            clock,
        )
    assert failing.value.code == "seed_does_not_pass"
    # Publish before approval: refused, nothing written.
    draft_id = drafted["draftId"]
    with pytest.raises(JobError) as early:
        call(store, publish.JOB, {"draftId": draft_id}, clock)
    assert early.value.code == "not_approved"
    assert _count(store, LESSON_ARTIFACTS.qualified) == 0
    assert _count(store, CONFORMANCE_FIXTURES.qualified) == 0
    gate = call(store, approve.JOB, {"draftId": draft_id, "approverId": "brian"}, clock).to_json()
    assert gate["status"] == "approved"
    assert [h["action"] for h in gate["history"]] == ["drafted", "approved"]
    published = call(store, publish.JOB, {"draftId": draft_id}, clock).to_json()
    assert published["status"] == "published"
    assert published["artifact"]["artifactId"] == fixture["fixtureId"]
    assert published["changeEvent"]["kind"] == "fixture"
    assert published["changeEvent"]["actor"] == "brian"
    # The published fixture is live: a rerun answers actual beside expected.
    rerun_body = {"fixtureId": fixture["fixtureId"], **{k: WINDOW[k] for k in ("since", "until")}}
    ran = call(store, rerun.JOB, rerun_body, clock).to_json()
    assert ran["expected"] == [fixture["assertion"]]
    assert ran["actual"]["verdict"] == "fail"
    assert ran["actual"]["counts"]["pass"] == 1 and ran["actual"]["counts"]["fail"] == 9
    # A lesson for the same cluster, then its successor replacing it.
    lesson = call(store, draft.JOB, {"kind": "lesson", "clusterId": refund}, clock).to_json()
    call(store, approve.JOB, {"draftId": lesson["draftId"], "approverId": "ana"}, clock)
    first = call(store, publish.JOB, {"draftId": lesson["draftId"]}, clock).to_json()
    assert first["artifact"]["version"] == 1 and first["changeEvent"]["kind"] == "lesson"
    assert first["changeEvent"]["layer"] == "substrate"
    tone = clusters[1]["clusterId"]
    other = call(store, draft.JOB, {"kind": "lesson", "clusterId": tone}, clock).to_json()
    call(store, approve.JOB, {"draftId": other["draftId"], "approverId": "ana"}, clock)
    candidates = [first["artifact"]["artifactId"]]
    body = {"draftId": other["draftId"], "candidateExistingLessonIds": candidates}
    linked = call(store, publish.JOB, body, clock).to_json()
    assert linked["linked"] == [
        {"artifactId": first["artifact"]["artifactId"], "version": 1, "mode": "linked"}
    ]
    assert linked["superseded"] == []
    changes = store.query(
        f"SELECT kind, artifact_id FROM {CHANGE_EVENTS.qualified} FINAL ORDER BY at"
    ).rows
    assert [k for k, _ in changes] == ["fixture", "lesson", "lesson"]


def test_the_gate_refuses_a_reject_without_comment_and_a_rejected_draft_stays_unpublished(
    store: Store,
) -> None:
    from pydantic import ValidationError

    clock = Clock()
    refund = _seeded(store, clock)["clusters"][0]["clusterId"]
    lesson = call(store, draft.JOB, {"kind": "lesson", "clusterId": refund}, clock).to_json()
    with pytest.raises(ValidationError, match="comment"):
        call(store, reject.JOB, {"draftId": lesson["draftId"], "approverId": "brian"}, clock)
    with pytest.raises(ValidationError, match="comment"):
        call(
            store,
            reject.JOB,
            {"draftId": lesson["draftId"], "approverId": "brian", "comment": "  "},
            clock,
        )
    why = "The customer was testing us."
    body = {"draftId": lesson["draftId"], "approverId": "brian", "comment": why}
    done = call(store, reject.JOB, body, clock).to_json()
    assert done["status"] == "rejected" and done["history"][-1]["comment"].startswith(
        "The customer"
    )
    with pytest.raises(JobError) as refused:
        call(store, publish.JOB, {"draftId": lesson["draftId"]}, clock)
    assert refused.value.code == "not_approved"
    with pytest.raises(JobError) as final:
        call(store, approve.JOB, {"draftId": lesson["draftId"], "approverId": "ana"}, clock)
    assert final.value.code == "draft_rejected"
    with pytest.raises(NotFound):
        call(store, approve.JOB, {"draftId": "draft_nope", "approverId": "ana"}, clock)
    assert _count(store, LESSON_ARTIFACTS.qualified) == 0


def _published_then_grown(
    store: Store, clock: Clock
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The refund cluster's lesson published, then a grown copy of the cluster (a new
    cluster id with overlapping members) drafted and approved: (the first publication,
    the grown cluster, its approved draft)."""
    refund = _seeded(store, clock)["clusters"][0]
    first_draft = call(
        store, draft.JOB, {"kind": "lesson", "clusterId": refund["clusterId"]}, clock
    )
    draft_id = first_draft.to_json()["draftId"]
    call(store, approve.JOB, {"draftId": draft_id, "approverId": "ana"}, clock)
    first: dict[str, Any] = call(store, publish.JOB, {"draftId": draft_id}, clock).to_json()
    # The same cluster drafted on another surface id is another draft; here: the inline
    # cluster document with one more member is a new cluster id with overlapping members.
    grown = {**refund, "clusterId": "cl_grown", "memberIds": [*refund["memberIds"], "ovr_new"]}
    second: dict[str, Any] = call(
        store, draft.JOB, {"kind": "lesson", "cluster": grown}, clock
    ).to_json()
    call(store, approve.JOB, {"draftId": second["draftId"], "approverId": "ana"}, clock)
    return first, grown, second


def test_a_successor_lesson_merges_or_replaces_its_predecessor_as_its_next_version(
    store: Store,
) -> None:
    clock = Clock()
    first, grown, second_draft = _published_then_grown(store, clock)
    artifact_id = first["artifact"]["artifactId"]
    second = call(
        store, publish.JOB,
        {"draftId": second_draft["draftId"], "candidateExistingLessonIds": [artifact_id]}, clock,
    ).to_json()  # fmt: skip
    assert second["artifact"]["artifactId"] == artifact_id
    assert second["artifact"]["version"] == 2
    assert second["superseded"] == [{"artifactId": artifact_id, "version": 1, "mode": "merged"}]
    again = call(store, publish.JOB, {"draftId": second_draft["draftId"]}, clock).to_json()
    assert not again["created"] and again["artifact"]["version"] == 2
    assert again["changeEvent"]["changeId"] == second["changeEvent"]["changeId"]
    # A lesson of the same cluster (the same clusterId, re-drafted) replaces it.
    same = {**grown, "memberIds": [*grown["memberIds"], "ovr_newer"]}
    third_draft = call(store, draft.JOB, {"kind": "lesson", "cluster": same}, clock).to_json()
    call(store, approve.JOB, {"draftId": third_draft["draftId"], "approverId": "ana"}, clock)
    body = {"draftId": third_draft["draftId"], "candidateExistingLessonIds": [artifact_id]}
    third = call(store, publish.JOB, body, clock).to_json()
    assert (third["artifact"]["artifactId"], third["artifact"]["version"]) == (artifact_id, 3)
    assert third["superseded"] == [{"artifactId": artifact_id, "version": 2, "mode": "replaced"}]
    assert third["changeEvent"]["artifactVersion"] == "3"


def test_a_surface_nothing_was_ever_recorded_for_is_unknown(store: Store) -> None:
    with pytest.raises(NotFound, match=f"unknown surface '{SURFACE}'; the tenant has no"):
        call(store, cluster.JOB, WINDOW, Clock())


def test_a_window_too_long_or_empty_is_refused(store: Store) -> None:
    call(store, overrides.JOB, override_body(0), Clock())  # the surface is known
    with pytest.raises(JobError, match="empty window"):
        call(store, cluster.JOB, {**WINDOW, "until": WINDOW["since"]}, Clock())
    with pytest.raises(JobError, match="longer than"):
        call(store, cluster.JOB, {**WINDOW, "until": "2028-01-01T00:00:00Z"}, Clock())


def test_times_are_utc_in_the_answer(store: Store) -> None:
    shown = call(store, overrides.JOB, override_body(3), Clock()).to_json()
    assert shown["at"] == T0 + dt.timedelta(minutes=3)


class _DownAfterInserts:
    """The store, until `inserts` inserts have gone through: then down (a crash between
    two writes of one job)."""

    def __init__(self, inner: Store, inserts: int) -> None:
        self._inner, self._left, self.inserted = inner, inserts, list[str]()
        self.url = inner.url

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None) -> QueryResult:
        return self._inner.query(sql, parameters)

    def command(self, sql: str, parameters: Mapping[str, Any] | None = None) -> None:
        self._inner.command(sql, parameters)

    def insert(
        self, table: str, rows: Sequence[Sequence[Any]], column_names: Sequence[str],
        settings: Mapping[str, Any] | None = None,
    ) -> None:  # fmt: skip
        if self._left == 0:
            raise StoreDown("the store went away between two writes (injected)")
        self._left -= 1
        self._inner.insert(table, rows, column_names, settings)
        self.inserted.append(table)

    def close(self) -> None:
        self._inner.close()


def test_a_publication_stopped_after_its_artifact_converges_when_published_again(
    store: Store,
) -> None:
    clock = Clock()
    first, _, second = _published_then_grown(store, clock)
    first_id, artifact_id = first["draftId"], first["artifact"]["artifactId"]
    body = {"draftId": second["draftId"], "candidateExistingLessonIds": [artifact_id]}
    # The artifact is written, then the store goes away before the `published` record.
    faulty = _DownAfterInserts(store, 1)
    with pytest.raises(StoreDown):
        call(faulty, publish.JOB, body, clock)
    assert faulty.inserted == [LESSON_ARTIFACTS.qualified]
    again = call(store, publish.JOB, body, clock).to_json()
    assert again["created"] and again["status"] == "published"
    assert (again["artifact"]["artifactId"], again["artifact"]["version"]) == (artifact_id, 2)
    assert again["superseded"] == [{"artifactId": artifact_id, "version": 1, "mode": "merged"}]
    versions = store.query(
        f"SELECT version, draft_id FROM {LESSON_ARTIFACTS.qualified} FINAL"
        " WHERE artifact_id = {id:String} ORDER BY version",
        {"id": artifact_id},
    ).dicts()
    assert versions == [
        {"version": 1, "draft_id": first_id},
        {"version": 2, "draft_id": second["draftId"]},
    ]
    changes = store.query(
        f"SELECT count() FROM {CHANGE_EVENTS.qualified} FINAL WHERE change_id = {{id:String}}",
        {"id": f"lesson:{artifact_id}:2"},
    ).scalar()
    assert changes == 1
