"""`POST /hil/reject`, `holonograph lessons reject`: a named approver turns a draft
down, with why (a comment is required; processors.lessons.gate)."""

from __future__ import annotations

from pydantic import Field

from processors.jobs import Job, JobRequest, never_a_finding
from processors.lessons.gate import Decision, DecisionDocument, Required, decide, write_decision
from schemas.contracts import Id
from schemas.events import DEFAULT_TENANT
from schemas.store import Store
from schemas.times import Clock


class RejectRequest(JobRequest):
    """The Guide's POST /hil/reject body: a comment is required."""

    draft_id: Id = Field(description="The draft to reject.")
    approver_id: Id = Field(description="Who rejects it (named in the record).")
    comment: Required = Field(description="Why it is rejected (required).")

    def persists(self) -> bool:
        return True


Request = RejectRequest
Report = Decision


def run(store: Store, request: Request, clock: Clock) -> Decision:
    tenant = request.tenant or DEFAULT_TENANT
    return decide(
        store, tenant, request.draft_id, "rejected", request.approver_id, request.comment, clock()
    )


persist = write_decision
finding = never_a_finding
JOB = Job("lessons.reject", Request, DecisionDocument, run, persist, finding, owner_tenant=True)
