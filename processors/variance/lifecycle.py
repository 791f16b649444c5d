"""The governance job (`processors.jobs`): POST /lens/decomposition/lifecycle.

`run` validates one decision (lock, pin, supersede, discard) on a stored reading of the
request's tenant, read-only (`verdict.plan_lifecycle`); `persist` records it as a
`variance-lifecycle` analysis event. A request is always persisted: the decision is
what it asks for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field

from processors.jobs import Job, JobRequest, never_a_finding
from processors.variance.verdict import LifecycleDecision, plan_lifecycle, record_lifecycle
from schemas.analysis import LifecycleRecord, LifecycleStatus
from schemas.store import Store
from schemas.times import Clock


class LifecycleRequest(JobRequest):
    """The Guide's POST /lens/decomposition/lifecycle body."""

    target_event_id: Annotated[str, Field(min_length=1, description="The reading's eventId.")]
    status: LifecycleStatus = Field(description="lock, pin, supersede or discard.")
    approver_id: Annotated[str, Field(min_length=1, description="Who decides.")]
    pinned_label: str | None = Field(None, description="The label of a pin (required for pin).")
    superseded_by: str | None = Field(
        None, description="The reading that replaces it (required for supersede)."
    )

    def persists(self) -> bool:
        return True


Request = LifecycleRequest


@dataclass(frozen=True)
class Report:
    decision: LifecycleDecision

    def to_json(self) -> dict[str, Any]:
        return self.decision.record.to_json()


def run(store: Store, request: Request, clock: Clock) -> Report:
    """The validated decision (LifecycleError: a 400, 404 or 409 naming why not)."""
    decision = plan_lifecycle(
        store, request.target_event_id, request.status, request.approver_id, clock(),
        request.pinned_label, request.superseded_by, request.tenant,
    )  # fmt: skip
    return Report(decision)


def persist(store: Store, report: Report) -> Report:
    record_lifecycle(store, report.decision)
    return report


finding = never_a_finding  # a reading or a decision is never one by itself

JOB = Job(
    "variance.lifecycle", Request, LifecycleRecord, run, persist, finding,
    owner_tenant=True,
)  # fmt: skip
