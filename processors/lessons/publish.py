"""`POST /lessons/publish`, `holonograph lessons publish`: an approved draft becomes
substrate, a versioned artifact that later drift readings can name.

Only a draft whose status is `approved` is published (the gate: docs/lessons.md); a
published draft answers its publication again. The artifact is `artifactId` at a
`version`, with the digest of its content. Each candidate named (the Guide's
`candidateExistingLessonIds`, `--supersede`) is, by a fixed rule:

- **replaced** when it is of the same kind and surface and came from the same cluster:
  the new artifact is its next version (the candidate's id is kept);
- **merged** when it is of the same kind and surface and its cluster shares overrides
  with this one: the next version too, its content carrying both clusters' evidence;
- **linked** otherwise: a new artifact that names it; the candidate stays live.

Publishing writes a change event: a skill, lesson or code-change recommendation is a
`lesson` change (layer substrate) derived by the store from `lesson_artifacts`; a
fixture joins the conformance fixtures (an approval record by the gate's approver),
whose `fixture` change event is the one named.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ConfigDict, Field, JsonValue, with_config
from typing_extensions import TypedDict

from processors.conformance.approve import Outcome, plan, record_outcome
from processors.jobs import Job, JobRequest, NotFound, never_a_finding
from processors.lessons.common import canonical, digest, short_id, to_millisecond
from processors.lessons.gate import (
    Decision,
    DraftRecord,
    GateConflict,
    append,
    next_record,
    required,
)
from schemas.changelog import find_change
from schemas.changes import ChangeEvent
from schemas.conformance import Fixture
from schemas.contracts import Id
from schemas.events import DEFAULT_TENANT
from schemas.store import Store
from schemas.tables import LESSON_ARTIFACTS
from schemas.times import Clock, from_store_time

Mode = Literal["replaced", "merged", "linked"]
PREFIX = {"lesson": "lesson", "skill": "skill", "code-change-recommendation": "ccr"}
MAX_CANDIDATES = 50


class PublishRequest(JobRequest):
    """The Guide's POST /lessons/publish body."""

    draft_id: Id = Field(description="An approved draft.")
    candidate_existing_lesson_ids: tuple[Id, ...] = Field(
        (), max_length=MAX_CANDIDATES,
        description="Published artifacts to consider superseding (replace, merge or link).",
    )  # fmt: skip

    def persists(self) -> bool:
        return True


@dataclass(frozen=True)
class Artifact:
    tenant_id: str
    artifact_id: str
    version: int
    kind: str
    surface_id: str
    draft_id: str
    cluster_id: str
    approver_id: str
    content: dict[str, Any]
    content_digest: str
    supersedes: tuple[str, ...]
    links: tuple[str, ...]
    fixture_record_id: str
    published_at: dt.datetime

    def row(self) -> list[Any]:
        values = {
            **self.__dict__, "content": canonical(self.content),
            "supersedes": list(self.supersedes), "links": list(self.links),
        }  # fmt: skip
        return [values[column] for column in LESSON_ARTIFACTS.columns]

    def to_json(self) -> dict[str, Any]:
        return {
            "artifactId": self.artifact_id,
            "version": self.version,
            "kind": self.kind,
            "surfaceId": self.surface_id,
            "draftId": self.draft_id,
            "clusterId": self.cluster_id,
            "approverId": self.approver_id,
            "contentDigest": self.content_digest,
            "content": self.content,
            "publishedAt": self.published_at,
        }


def _artifact(row: dict[str, Any]) -> Artifact:
    return Artifact(
        **{
            **row, "version": int(row["version"]), "content": json.loads(row["content"]),
            "supersedes": tuple(row["supersedes"]), "links": tuple(row["links"]),
            "published_at": from_store_time(row["published_at"]),
        }
    )  # fmt: skip


def artifacts(store: Store, tenant: str, where: str = "1", **parameters: Any) -> list[Artifact]:
    """A tenant's artifact versions, by id then version."""
    sql = (
        f"SELECT {LESSON_ARTIFACTS.column_list()} FROM {LESSON_ARTIFACTS.qualified} FINAL"
        f" WHERE tenant_id = {{tenant:String}} AND {where} ORDER BY artifact_id, version"
    )
    return [_artifact(r) for r in store.query(sql, {**parameters, "tenant": tenant}).dicts()]


def latest(store: Store, tenant: str, artifact_id: str, before_draft: str = "") -> Artifact | None:
    """The latest version of `artifact_id`, leaving out what `before_draft` itself wrote:
    a publication stopped between its artifact and its `published` record (a crash) is
    planned again as it was the first time, and its re-run converges on the same
    version instead of superseding its own half-written one."""
    found = artifacts(
        store, tenant, "artifact_id = {id:String} AND draft_id != {draft:String}",
        id=artifact_id, draft=before_draft,
    )  # fmt: skip
    return found[-1] if found else None


@dataclass(frozen=True)
class Superseding:
    artifact_id: str
    version: int
    mode: Mode

    def to_json(self) -> dict[str, Any]:
        return {"artifactId": self.artifact_id, "version": self.version, "mode": self.mode}


def mode_of(candidate: Artifact, draft: dict[str, Any]) -> Mode:
    if candidate.kind != draft["kind"] or candidate.surface_id != draft["surfaceId"]:
        return "linked"
    if candidate.cluster_id == draft["clusterId"]:
        return "replaced"
    theirs = set(candidate.content.get("evidence", {}).get("overrideIds", []))
    return "merged" if theirs & set(draft["memberIds"]) else "linked"


@dataclass(frozen=True)
class Publication:
    decision: Decision
    artifact: Artifact
    superseded: tuple[Superseding, ...]
    created: bool
    fixture: Outcome | None = None
    change: ChangeEvent | None = field(default=None)

    @property
    def change_origin_id(self) -> tuple[str, str]:
        if self.artifact.kind == "fixture":
            return "conformance_fixtures", f"fixture:{self.artifact.fixture_record_id}"
        return "lesson_artifacts", f"lesson:{self.artifact.artifact_id}:{self.artifact.version}"

    def to_json(self) -> dict[str, Any]:
        latest_record = self.decision.all[-1]
        return {
            "draftId": latest_record.draft_id,
            "status": latest_record.action,
            "created": self.created,
            "artifact": self.artifact.to_json(),
            "superseded": [s.to_json() for s in self.superseded if s.mode != "linked"],
            "linked": [s.to_json() for s in self.superseded if s.mode == "linked"],
            "changeEvent": self.change.to_json() if self.change else None,
            "history": [r.history_entry() for r in self.decision.all],
        }


def _published(store: Store, tenant: str, records: list[DraftRecord]) -> Publication:
    """The answer for a draft published before."""
    draft_id = records[-1].draft_id
    (artifact,) = artifacts(store, tenant, "draft_id = {id:String}", id=draft_id)[-1:]
    supersedes = [Superseding(a, 0, "replaced") for a in artifact.supersedes]
    links = [Superseding(a, 0, "linked") for a in artifact.links]
    publication = Publication(
        Decision(tuple(records), False), artifact, (*supersedes, *links), False
    )
    origin, change_id = publication.change_origin_id
    return Publication(
        **{**publication.__dict__, "change": find_change(store, tenant, origin, change_id)}
    )


def plan_publication(store: Store, request: PublishRequest, now: dt.datetime) -> Publication:
    tenant = request.tenant or DEFAULT_TENANT
    records = required(store, tenant, request.draft_id)
    status = records[-1].action
    if status == "published":
        return _published(store, tenant, records)
    if status != "approved":
        raise GateConflict(
            f"draft {request.draft_id} is {status}: only an approved draft is published"
            " (nothing bypasses the gate)",
            "not_approved",
            details={"status": status},
            hint="a named approver runs `holonograph lessons approve --draft ID --approver NAME`",
        )
    approval = records[-1]
    body = approval.draft
    candidates = []
    for artifact_id in sorted(set(request.candidate_existing_lesson_ids)):
        found = latest(store, tenant, artifact_id, request.draft_id)
        if found is None:
            raise NotFound(f"no published artifact {artifact_id!r}", "artifact_not_found")
        candidates.append(Superseding(found.artifact_id, found.version, mode_of(found, body)))
    kept = [c for c in candidates if c.mode != "linked"]
    content = dict(body["content"])
    if any(c.mode == "merged" for c in kept):
        merged = set(content["evidence"]["overrideIds"])
        for c in kept:
            old = latest(store, tenant, c.artifact_id, request.draft_id)
            assert old is not None
            merged |= set(old.content.get("evidence", {}).get("overrideIds", []))
        content["evidence"] = content["evidence"] | {"overrideIds": sorted(merged)}
    moment = to_millisecond(now)
    fixture: Outcome | None = None
    if body["kind"] == "fixture":
        fx = Fixture.model_validate(content["fixture"])
        fixture = plan(
            store, fx, "approved", approval.actor, body["surfaceId"],
            f"published from draft {request.draft_id}", lambda: moment,
            lambda: short_id("apv", [request.draft_id, moment.isoformat()]), tenant,
        )  # fmt: skip
        artifact_id, version = fx.fixture_id, fixture.record.version
    elif kept:
        artifact_id = kept[0].artifact_id
        version = kept[0].version + 1
    else:
        artifact_id, version = short_id(PREFIX[body["kind"]], body["draftId"]), 1
    linked = tuple(c.artifact_id for c in candidates if c.mode == "linked")
    artifact = Artifact(
        tenant, artifact_id, version, body["kind"], body["surfaceId"], request.draft_id,
        body["clusterId"], approval.actor, content, digest(content),
        tuple(c.artifact_id for c in kept), linked,
        fixture.record.record_id if fixture else "", moment,
    )  # fmt: skip
    published = next_record(records, "published", approval.actor, "", now)
    decision = Decision(tuple(records), True, published)
    return Publication(decision, artifact, tuple(candidates), True, fixture)


def write_publication(store: Store, report: Publication) -> Publication:
    """The fixture record, the artifact, then the draft's `published` record; the change
    event the store derived is read back and named. Not one transaction: a crash
    between the writes leaves the draft `approved`, and publishing it again writes the
    same fixture record (`plan` finds it in force), the same artifact id and version
    (`latest` leaves the stopped one out) and its change event once (both tables
    replace by key)."""
    if not report.created:
        return report
    if report.fixture is not None:
        record_outcome(store, report.fixture)
    store.insert(LESSON_ARTIFACTS.qualified, [report.artifact.row()], LESSON_ARTIFACTS.columns)
    if report.decision.pending is not None:
        append(store, [report.decision.pending])
    origin, change_id = report.change_origin_id
    change = find_change(store, report.artifact.tenant_id, origin, change_id)
    if change is None:
        raise RuntimeError(f"the store wrote no change event {change_id} for the publication")
    return Publication(**{**report.__dict__, "change": change})


Request = PublishRequest
Report = Publication


def run(store: Store, request: Request, clock: Clock) -> Publication:
    return plan_publication(store, request, clock())


persist = write_publication
finding = never_a_finding


@with_config(ConfigDict(extra="forbid"))
class PublicationDocument(TypedDict):
    """The Guide's publish report: the new artifact, what it superseded, the change event."""

    draftId: str
    status: str
    created: bool
    artifact: dict[str, JsonValue]
    superseded: list[dict[str, JsonValue]]
    linked: list[dict[str, JsonValue]]
    changeEvent: dict[str, JsonValue] | None
    history: list[dict[str, JsonValue]]


JOB = Job("lessons.publish", Request, PublicationDocument, run, persist, finding, owner_tenant=True)
