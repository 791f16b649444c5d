"""The gate: nothing is published, and no fixture goes live, without a named approver.

Each draft's life is a sequence of immutable records in `lesson_drafts` (`seq` 1, 2,
...): `drafted`, then `approved` or `rejected` (a rejection needs a comment: the record
of why matters), then `published`. The newest record is the draft's status; all of
them are its `history[]`. Approving an approved draft is a no-op; a rejected or
published draft cannot be approved (draft again); a rejection retires an approval.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, JsonValue, StringConstraints, with_config
from typing_extensions import TypedDict

from processors.jobs import JobError, NotFound
from processors.lessons.common import canonical, digest, to_millisecond
from schemas.store import Store
from schemas.tables import LESSON_DRAFTS
from schemas.times import from_store_time

Action = Literal["drafted", "approved", "rejected", "published"]
Comment = Annotated[str, StringConstraints(strip_whitespace=True, max_length=2000)]
Required = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2000)]


@dataclass(frozen=True)
class DraftRecord:
    tenant_id: str
    draft_id: str
    seq: int
    action: Action
    kind: str
    surface_id: str
    cluster_id: str
    actor: str
    comment: str
    draft: dict[str, Any]
    draft_digest: str
    recorded_at: dt.datetime

    def row(self) -> list[Any]:
        values = {**self.__dict__, "draft": canonical(self.draft)}
        return [values[column] for column in LESSON_DRAFTS.columns]

    def history_entry(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "action": self.action,
            "actor": self.actor,
            "comment": self.comment or None,
            "at": self.recorded_at,
        }


class GateConflict(JobError):
    kind = "conflict"


class DraftNotFound(NotFound):
    def __init__(self, draft_id: str) -> None:
        super().__init__(f"no draft {draft_id!r} in this tenant", "draft_not_found")


def history(store: Store, tenant: str, draft_id: str) -> list[DraftRecord]:
    """Every record of a tenant's draft, oldest first."""
    sql = (
        f"SELECT {LESSON_DRAFTS.column_list()} FROM {LESSON_DRAFTS.qualified} FINAL"
        " WHERE tenant_id = {tenant:String} AND draft_id = {id:String} ORDER BY seq"
    )
    rows = store.query(sql, {"tenant": tenant, "id": draft_id}).dicts()
    return [
        DraftRecord(
            **{
                **row,
                "seq": int(row["seq"]),
                "draft": json.loads(row["draft"]),
                "recorded_at": from_store_time(row["recorded_at"]),
            }
        )
        for row in rows
    ]


def required(store: Store, tenant: str, draft_id: str) -> list[DraftRecord]:
    records = history(store, tenant, draft_id)
    if not records:
        raise DraftNotFound(draft_id)
    return records


def next_record(
    records: list[DraftRecord], action: Action, actor: str, comment: str, now: dt.datetime
) -> DraftRecord:
    last = records[-1]
    return DraftRecord(
        last.tenant_id, last.draft_id, last.seq + 1, action, last.kind, last.surface_id,
        last.cluster_id, actor, comment, last.draft, last.draft_digest, to_millisecond(now),
    )  # fmt: skip


def first_record(
    tenant: str, draft_id: str, kind: str, surface_id: str, cluster_id: str, actor: str,
    draft: dict[str, Any], now: dt.datetime,
) -> DraftRecord:  # fmt: skip
    return DraftRecord(
        tenant, draft_id, 1, "drafted", kind, surface_id, cluster_id, actor, "", draft,
        digest(draft), to_millisecond(now),
    )  # fmt: skip


def append(store: Store, records: list[DraftRecord]) -> None:
    if records:
        store.insert(LESSON_DRAFTS.qualified, [r.row() for r in records], LESSON_DRAFTS.columns)


@dataclass(frozen=True)
class Decision:
    """A draft's status after a gate action, its history, and whether this call wrote."""

    records: tuple[DraftRecord, ...]
    created: bool
    pending: DraftRecord | None = None  # the record to write

    @property
    def all(self) -> list[DraftRecord]:
        return [*self.records, *([self.pending] if self.pending else [])]

    def to_json(self) -> dict[str, Any]:
        latest = self.all[-1]
        return {
            "draftId": latest.draft_id,
            "kind": latest.kind,
            "status": latest.action,
            "created": self.created,
            "history": [r.history_entry() for r in self.all],
        }


def decide(
    store: Store, tenant: str, draft_id: str, action: Literal["approved", "rejected"],
    approver: str, comment: str, now: dt.datetime,
) -> Decision:  # fmt: skip
    records = required(store, tenant, draft_id)
    status = records[-1].action
    if status == "published":
        raise GateConflict(
            f"draft {draft_id} is already published; draft again to change it", "draft_published"
        )
    if status == action:
        return Decision(tuple(records), created=False)
    if status == "rejected":
        raise GateConflict(
            f"draft {draft_id} was rejected by {records[-1].actor}; a rejected draft is final"
            " (draft again)",
            "draft_rejected",
        )
    return Decision(
        tuple(records), created=True, pending=next_record(records, action, approver, comment, now)
    )


def write_decision(store: Store, report: Decision) -> Decision:
    if report.pending is not None:
        append(store, [report.pending])
    return report


@with_config(ConfigDict(extra="forbid"))
class DecisionDocument(TypedDict):
    """The Guide's answer to approve and reject: `status` and `history[]`."""

    draftId: str
    kind: str
    status: Action
    created: bool
    history: list[dict[str, JsonValue]]
