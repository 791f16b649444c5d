"""The verdict job (`processors.jobs`): POST /lens/decomposition/evaluate.

The target is a stored reading of the request's tenant (`decompose`); `run` gives it its
verdict read-only (`verdict.evaluate`), `persist` records the evaluation as an analysis
event. Any verdict but `viable` is a finding: the reading should not be acted on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field

from processors.jobs import Job, JobRequest, NotFound
from processors.series.freshness import read_freshness
from processors.variance.decompose import load_reading
from processors.variance.verdict import evaluate, persist_evaluation, reading_query
from schemas.analysis import VarianceEvaluation, VarianceReading
from schemas.completeness import WindowsFreshness
from schemas.store import Store
from schemas.times import Clock


class EvaluateRequest(JobRequest):
    """The Guide's POST /lens/decomposition/evaluate body."""

    target_event_id: Annotated[
        str, Field(min_length=1, description="The reading's eventId (from decomposeVariance).")
    ]

    def persists(self) -> bool:
        return True  # the verdict is on record next to the reading


Request = EvaluateRequest


@dataclass(frozen=True)
class Report:
    """The evaluation and the reading it judged."""

    evaluation: VarianceEvaluation
    reading: VarianceReading

    def to_json(self) -> dict[str, Any]:
        return self.evaluation.to_json()


def run(store: Store, request: Request, clock: Clock) -> Report:
    """The verdict on the tenant's reading `targetEventId`; NotFound when there is none."""
    reading = load_reading(store, request.target_event_id, request.tenant)
    if reading is None:
        raise NotFound(
            f"no variance reading {request.target_event_id!r}",
            "reading_not_found",
            details={"targetEventId": request.target_event_id},
            hint="a reading's eventId is what `holonograph variance decompose` prints",
        )
    return Report(evaluate(store, reading, clock()), reading)


def persist(store: Store, report: Report) -> Report:
    persist_evaluation(store, report.evaluation, report.reading)
    return report


def finding(report: Report) -> bool:
    """A verdict other than viable."""
    return report.evaluation.verdict != "viable"


def freshness(store: Store, request: Request, clock: Clock) -> WindowsFreshness | None:
    """Whether the delivery-loss windows have seen every event of the reading's range."""
    reading = load_reading(store, request.target_event_id, request.tenant)
    return None if reading is None else read_freshness(store, reading_query(reading))


JOB = Job(
    "variance.evaluate",
    Request,
    VarianceEvaluation,
    run,
    persist,
    finding,
    owner_tenant=True,
    freshness=freshness,
)
