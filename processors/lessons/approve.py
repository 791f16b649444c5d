"""`POST /hil/approve`, `holonograph lessons approve`: a named approver lets a draft
through the gate (processors.lessons.gate)."""

from __future__ import annotations

from pydantic import Field

from processors.jobs import Job, JobRequest, never_a_finding
from processors.lessons.gate import Comment, Decision, DecisionDocument, decide, write_decision
from schemas.contracts import Id
from schemas.events import DEFAULT_TENANT
from schemas.store import Store
from schemas.times import Clock


class ApproveRequest(JobRequest):
    """The Guide's POST /hil/approve body."""

    draft_id: Id = Field(description="The draft to approve.")
    approver_id: Id = Field(description="Who approves it (named in the record).")
    comment: Comment = Field("", description="Why (optional on approve).")

    def persists(self) -> bool:
        return True


Request = ApproveRequest
Report = Decision


def run(store: Store, request: Request, clock: Clock) -> Decision:
    tenant = request.tenant or DEFAULT_TENANT
    return decide(
        store, tenant, request.draft_id, "approved", request.approver_id, request.comment, clock()
    )


persist = write_decision
finding = never_a_finding
JOB = Job("lessons.approve", Request, DecisionDocument, run, persist, finding, owner_tenant=True)
