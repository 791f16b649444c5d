"""`POST /lessons/draft`, `holonograph lessons draft`: the drafter proposes an artifact
for a cluster, and the draft waits at the gate.

The cluster is a recorded one (`clusterId`, from `lessons cluster --record`) or the
cluster document itself (the Guide's `cluster`). A fixture draft is a real
conformance fixture: the drafter's rule goes through the conformance derive step (a
rule derive cannot formalise is refused with derive's reason, never a weak fixture),
and the fixture is checked on the seed (a stored event, `seedEventId`, or a
hand-authored one, `seedRawRequest`) before it is offered: it must pass there.

A draft's id is a function of what was asked (kind, cluster, surface, seed, parent
fixture, drafter), so asking again is the same draft, never a duplicate in the queue.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from pydantic import ConfigDict, Field, JsonValue, ValidationError, model_validator, with_config
from typing_extensions import TypedDict

from processors.conformance.approve import live_fixture
from processors.conformance.check import check_fixture
from processors.conformance.derive import derive
from processors.conformance.eval import DimensionView, EventView, evaluate_event
from processors.jobs import Job, JobError, JobRequest, NotFound, never_a_finding
from processors.lessons.cluster import recorded_cluster
from processors.lessons.common import digest, short_id
from processors.lessons.drafter import DEFAULT_DRAFTER, Drafter, Kind, tools_of
from processors.lessons.gate import Decision, DraftRecord, append, first_record, history
from schemas.conformance import Fixture, RecordedEvent, RuleInput, SurfaceInput, ToolDeclaration
from schemas.contracts import Id
from schemas.events import DEFAULT_TENANT
from schemas.store import Store
from schemas.tables import EVALUATION_EVENTS
from schemas.times import Clock, from_store_time

_ONE_MS = dt.timedelta(milliseconds=1)


class DraftRequest(JobRequest):
    """The Guide's POST /lessons/draft body."""

    kind: Kind = Field(description="skill, lesson, fixture or code-change-recommendation.")
    cluster_id: Id | None = Field(
        None, description="A recorded cluster (lessons cluster --record)."
    )
    cluster: dict[str, JsonValue] | None = Field(
        None, description="The cluster document from /lessons/cluster (instead of clusterId)."
    )
    parent_surface_id: Id | None = Field(None, description="Default: the cluster's surface.")
    seed_event_id: Id | None = Field(None, description="Fixture: the stored event it passes on.")
    seed_raw_request: dict[str, JsonValue] | None = Field(
        None, description="Fixture: a hand-authored event it passes on (instead of a seed event)."
    )
    parent_fixture_id: Id | None = Field(
        None, description="Fixture: a live fixture whose `when` guard it stacks on."
    )

    @model_validator(mode="after")
    def _shape(self) -> DraftRequest:
        if (self.cluster_id is None) == (self.cluster is None):
            raise ValueError("give clusterId (a recorded cluster) or cluster (its document)")
        seeds = (self.seed_event_id is not None) + (self.seed_raw_request is not None)
        if self.kind == "fixture" and seeds != 1:
            raise ValueError("a fixture draft needs seedEventId or seedRawRequest (one of them)")
        if self.kind != "fixture" and (seeds or self.parent_fixture_id):
            raise ValueError("seeds and parentFixtureId are for fixture drafts")
        return self

    def persists(self) -> bool:
        return True


def _cluster(store: Store, tenant: str, request: DraftRequest) -> dict[str, Any]:
    if request.cluster_id is not None:
        found = recorded_cluster(store, tenant, request.cluster_id)
        if found is None:
            raise NotFound(
                f"no recorded cluster {request.cluster_id!r}",
                "cluster_not_found",
                hint="record it with `holonograph lessons cluster ... --record`",
            )
        return found
    cluster = dict(request.cluster or {})
    missing = [k for k in ("clusterId", "surfaceId", "memberIds", "summary") if k not in cluster]
    if missing or not isinstance(cluster.get("summary"), dict):
        raise JobError(
            f"cluster: not a /lessons/cluster cluster (missing {', '.join(missing) or 'summary'})",
            details={"problems": [f"cluster.{k}: required" for k in missing]},
        )
    return cluster


def _seed_time(store: Store, tenant: str, surface: str, event_id: str) -> dt.datetime:
    """When the seed event happened; `NotFound` when the surface has no such event."""
    sql = (
        f"SELECT count(), max(timestamp) FROM {EVALUATION_EVENTS.qualified}"
        " WHERE tenant_id = {tenant:String} AND surface_id = {surface:String}"
        " AND event_id = {id:String}"
    )
    count, at = store.query(sql, {"tenant": tenant, "surface": surface, "id": event_id}).rows[0]
    if not count:
        raise NotFound(
            f"no evaluation event {event_id!r} of surface {surface!r}", "seed_event_not_found"
        )
    return from_store_time(at)


def seed_verdict(
    store: Store, tenant: str, fixture: Fixture, request: DraftRequest, clock: Clock
) -> tuple[str, str]:
    """The fixture's verdict on its seed, and the seed's id."""
    if request.seed_event_id is not None:
        at = _seed_time(store, tenant, fixture.surface_id, request.seed_event_id)
        result = check_fixture(
            store, fixture, since=at, until=at + _ONE_MS, page_size=1000, persist=False,
            clock=clock, tenant_id=tenant,
        )  # fmt: skip
        for row in result.events:
            if row.event_id == request.seed_event_id:
                return row.verdict, request.seed_event_id
        raise NotFound(f"seed event {request.seed_event_id!r} was not read", "seed_event_not_found")
    try:
        raw = RecordedEvent.model_validate(
            {"surfaceId": fixture.surface_id, "timestamp": "", **(request.seed_raw_request or {})}
        )
    except ValidationError as err:
        problems = [
            f"seedRawRequest.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors()
        ]
        raise JobError(
            "seedRawRequest is not an event shape", details={"problems": problems}
        ) from None
    view = EventView(
        raw.event_id, None, raw.markers, raw.cohort_tags, raw.latency_ms, raw.cost_usd,
        {d.dimension_id: DimensionView(d.passed, d.score, d.judge) for d in raw.dimensions},
    )  # fmt: skip
    verdict = evaluate_event(view, fixture.when or [], fixture.checks(), fixture.rule_id)
    return verdict.verdict, raw.event_id


def fixture_of(
    store: Store, tenant: str, cluster: dict[str, Any], content: dict[str, Any],
    surface: str, parent_fixture_id: str | None,
) -> tuple[Fixture, dict[str, Any]]:  # fmt: skip
    """The drafter's rule as a conformance fixture, by the derive step."""
    rule_id = f"lesson-{cluster['clusterId']}"
    tools = [ToolDeclaration(name=t) for t in tools_of(cluster["summary"])]
    surface_input = SurfaceInput(
        surface_id=surface, tools=tools, rules=[RuleInput(rule_id=rule_id, text=content["rule"])]
    )
    (candidate,) = derive(surface_input).candidates
    if candidate.fixture is None or candidate.enforceability != "trace-enforceable":
        why = next((r.why for r in derive(surface_input).needs_repair), candidate.enforceability)
        raise JobError(
            f"the cluster's rule {content['rule']!r} is not a trace-enforceable fixture: {why}",
            "not_a_fixture",
            hint="draft a lesson or a code-change-recommendation for this cluster instead",
        )
    fixture = candidate.fixture
    if parent_fixture_id is not None:
        parent = live_fixture(store, parent_fixture_id, tenant)
        if parent is None:
            raise NotFound(f"no live fixture {parent_fixture_id!r}", "fixture_not_found")
        body = fixture.to_json() | {"when": parent.fixture.to_json().get("when")}
        if body["when"] is None:
            body.pop("when")
        fixture = Fixture.model_validate(body)
    derivation = {
        "rule": content["rule"],
        "pattern": candidate.pattern,
        "explanation": candidate.explanation,
    }
    return fixture, derivation


@dataclass(frozen=True)
class Drafted:
    """A draft and its place at the gate."""

    decision: Decision
    enqueued: bool

    @property
    def record(self) -> DraftRecord:
        return self.decision.all[0]

    def to_json(self) -> dict[str, Any]:
        record = self.record
        return {
            "draftId": record.draft_id,
            "draft": record.draft,
            "classification": record.draft["classification"],
            "enqueued": self.enqueued,
            "status": self.decision.all[-1].action,
            "created": self.decision.created,
            "history": [r.history_entry() for r in self.decision.all],
        }


def draft(
    store: Store, request: DraftRequest, clock: Clock, drafter: Drafter = DEFAULT_DRAFTER
) -> Drafted:
    tenant = request.tenant or DEFAULT_TENANT
    cluster = _cluster(store, tenant, request)
    surface = request.parent_surface_id or str(cluster["surfaceId"])
    asked = {
        "kind": request.kind, "clusterId": cluster["clusterId"], "surfaceId": surface,
        "seedEventId": request.seed_event_id, "seedRawRequest": request.seed_raw_request,
        "parentFixtureId": request.parent_fixture_id, "drafter": drafter.name,
        "members": sorted(cluster["memberIds"]),
    }  # fmt: skip
    draft_id = short_id("draft", asked)
    previous = history(store, tenant, draft_id)
    if previous:
        return Drafted(Decision(tuple(previous), created=False), previous[-1].action == "drafted")
    content = drafter.draft(request.kind, cluster)
    if request.kind == "fixture":
        fixture, derivation = fixture_of(
            store, tenant, cluster, content, surface, request.parent_fixture_id
        )
        verdict, seed = seed_verdict(store, tenant, fixture, request, clock)
        if verdict != "pass":
            raise JobError(
                f"the drafted fixture {fixture.fixture_id} does not pass on its seed {seed}"
                f" ({verdict}); it is not offered",
                "seed_does_not_pass",
                details={"verdict": verdict, "seed": seed, "fixture": fixture.to_json()},
                hint="seed it with an event that shows the corrected behaviour",
            )
        content = content | {
            "fixture": fixture.to_json(), "derivation": derivation,
            "seedCheck": {"seed": seed, "verdict": verdict},
            "parentFixtureId": request.parent_fixture_id,
        }  # fmt: skip
    summary = cluster["summary"]
    classification = (
        f"fix_tier={summary['fixTier']}"
        if summary.get("fixTier")
        else f"{request.kind}:unclassified"
    )
    body = {
        "draftId": draft_id, "kind": request.kind, "surfaceId": surface,
        "clusterId": cluster["clusterId"], "memberIds": list(cluster["memberIds"]),
        "drafter": drafter.name, "classification": classification, "content": content,
    }  # fmt: skip
    body["contentDigest"] = digest(content)
    record = first_record(
        tenant, draft_id, request.kind, surface, str(cluster["clusterId"]), drafter.name, body,
        clock(),
    )  # fmt: skip
    return Drafted(Decision((), created=True, pending=record), enqueued=True)


Request = DraftRequest
Report = Drafted


def run(store: Store, request: Request, clock: Clock) -> Drafted:
    return draft(store, request, clock)


def persist(store: Store, report: Drafted) -> Drafted:
    if report.decision.pending is not None:
        append(store, [report.decision.pending])
    return report


finding = never_a_finding


@with_config(ConfigDict(extra="forbid"))
class DraftedDocument(TypedDict):
    """The Guide's answer: the draft, its classification label, and `enqueued`."""

    draftId: str
    draft: dict[str, JsonValue]
    classification: str
    enqueued: bool
    status: str
    created: bool
    history: list[dict[str, JsonValue]]


JOB = Job("lessons.draft", Request, DraftedDocument, run, persist, finding, owner_tenant=True)
