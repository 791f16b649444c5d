"""What fail-closed validation rejected: recent quarantined spans and counts per reason.

Read-only over `holonograph.quarantine` (so it works through the admin endpoint while
`serve` or `sink` holds the store). Counts cover the whole selection; the span list
is its newest `limit` rows.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import ConfigDict, Field, model_validator, with_config
from typing_extensions import TypedDict

from processors.jobs import Job, JobRequest, never_a_finding, saves_nothing
from schemas.store import Store
from schemas.tables import EVALUATION_EVENTS, QUARANTINE
from schemas.times import Clock, from_store_time, to_store_time
from schemas.utctime import UtcTime

_EPOCH = dt.datetime(1970, 1, 1)
_FAR = dt.datetime(2299, 12, 31)
_WHERE = (
    " WHERE received_at >= {since:DateTime64(3)} AND received_at < {until:DateTime64(3)}"
    " AND ({reason:String} = '' OR reason = {reason:String})"
    " AND startsWith(reason, {prefix:String})"
    " AND ({tenant:String} = '' OR tenant_id = {tenant:String})"
)
# A quarantined span whose event has since been stored (a replay after a fix let it
# through) is no longer rejected: listed and counted only as replayed. The replayed
# span keeps its trace and span ids, which is how it is found; a rejection without a span
# id (a log record outside any trace) names no span, so nothing stored replays it.
_REPLAYED = (
    f"(span_id != '' AND (tenant_id, trace_id, span_id) IN (SELECT tenant_id, trace_id,"
    f" span_id FROM {EVALUATION_EVENTS.qualified} WHERE span_id != '' AND"
    f" (tenant_id, trace_id) IN (SELECT tenant_id, trace_id FROM {QUARANTINE.qualified}{_WHERE})))"
)
_STILL_REJECTED = f"{_WHERE} AND NOT {_REPLAYED}"


@dataclass(frozen=True)
class QuarantineSelection:
    """Spans received in [since, until) whose reason is exactly `reason` and starts with
    `reason_prefix`, of `tenant` (None: every tenant)."""

    tenant: str | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    reason: str | None = None
    limit: int = 20
    reason_prefix: str | None = None
    offset: int = 0  # spans skipped before the `limit` listed (paging; counts cover all)

    def parameters(self) -> dict[str, Any]:
        return {
            "since": to_store_time(self.since) if self.since else _EPOCH,
            "until": to_store_time(self.until) if self.until else _FAR,
            "reason": self.reason or "",
            "prefix": self.reason_prefix or "",
            "tenant": self.tenant or "",
        }


@dataclass(frozen=True)
class ReasonCount:
    reason: str
    spans: int
    first_received_at: dt.datetime
    last_received_at: dt.datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "spans": self.spans,
            "firstReceivedAt": self.first_received_at,
            "lastReceivedAt": self.last_received_at,
        }


@dataclass(frozen=True)
class RejectedSpan:
    tenant_id: str
    received_at: dt.datetime
    reason: str
    span_name: str
    trace_id: str
    span_id: str
    emission_stream: str | None
    emission_seq: int | None
    source: str
    attributes: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "tenantId": self.tenant_id,
            "receivedAt": self.received_at,
            "reason": self.reason,
            "spanName": self.span_name,
            "traceId": self.trace_id,
            "spanId": self.span_id,
            "emissionStream": self.emission_stream,
            "emissionSeq": self.emission_seq,
            "source": self.source,
            "attributes": self.attributes,
        }


@dataclass(frozen=True)
class QuarantineReport:
    selection: QuarantineSelection
    total: int
    reasons: list[ReasonCount] = field(default_factory=list)
    spans: list[RejectedSpan] = field(default_factory=list)
    replayed: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "tenantId": self.selection.tenant,
            "since": self.selection.since,
            "until": self.selection.until,
            "reason": self.selection.reason,
            "reasonPrefix": self.selection.reason_prefix,
            "total": self.total,
            "replayed": self.replayed,
            "reasons": [r.to_json() for r in self.reasons],
            "spans": [s.to_json() for s in self.spans],
        }


def read_quarantine(store: Store, selection: QuarantineSelection) -> QuarantineReport:
    """Counts per reason (most frequent first) and the newest spans of the selection
    still rejected; spans replayed since (their event is stored) are only counted."""
    params = selection.parameters()
    counts = store.query(
        "SELECT reason, count() AS n, min(received_at), max(received_at)"
        f" FROM {QUARANTINE.qualified} FINAL{_STILL_REJECTED}"
        " GROUP BY reason ORDER BY n DESC, reason",
        params,
    ).rows
    spans = store.query(
        "SELECT tenant_id, received_at, reason, span_name, trace_id, span_id, emission_stream,"
        f" emission_seq, source, attributes FROM {QUARANTINE.qualified} FINAL{_STILL_REJECTED}"
        " ORDER BY received_at DESC, quarantine_id LIMIT {limit:UInt64} OFFSET {offset:UInt64}",
        {**params, "limit": selection.limit, "offset": selection.offset},
    ).rows
    replayed = store.query(
        f"SELECT count() FROM {QUARANTINE.qualified} FINAL{_WHERE} AND {_REPLAYED}", params
    ).rows[0][0]
    return QuarantineReport(
        replayed=int(replayed),
        selection=selection,
        total=sum(int(n) for _, n, _, _ in counts),
        reasons=[
            ReasonCount(str(r), int(n), from_store_time(a), from_store_time(b))
            for r, n, a, b in counts
        ],
        spans=[_rejected(row) for row in spans],
    )


def _rejected(row: tuple[Any, ...]) -> RejectedSpan:
    tenant, at, reason, name, trace, span, stream, seq, source, attributes = row
    return RejectedSpan(
        tenant_id=tenant,
        received_at=from_store_time(at),
        reason=reason,
        span_name=name,
        trace_id=trace,
        span_id=span,
        emission_stream=stream,
        emission_seq=None if seq is None else int(seq),
        source=source,
        attributes=_attributes(attributes),
    )


def _attributes(text: str) -> dict[str, Any]:
    try:
        parsed = json.loads(text) if text else {}
    except ValueError:
        return {"_unparsed": text}
    return parsed if isinstance(parsed, dict) else {"_value": parsed}


# --- the job (processors/jobs.py): POST /holonograph/quarantine


class QuarantineRequest(JobRequest):
    """Rejected spans received in [since, until) with exactly the reason `reason` (as
    listed), or whose reason starts with `reasonPrefix`."""

    since: UtcTime | None = Field(None, description="Received at or after (inclusive).")
    until: UtcTime | None = Field(None, description="Received before (exclusive).")
    reason: str | None = Field(None, description="Only spans with exactly this reason.")
    reason_prefix: str | None = Field(
        None, description="Only spans whose reason starts with this text (case-sensitive)."
    )
    limit: int = Field(20, ge=0, le=10_000, description="Newest spans listed (counts cover all).")
    offset: int = Field(
        0,
        ge=0,
        description="Skip this many of the newest spans first: the next page's is"
        " offset + limit, up to `total` (counts cover all).",
    )

    @model_validator(mode="after")
    def _window(self) -> QuarantineRequest:
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise ValueError("since must be before until")
        return self


Request = QuarantineRequest
Report = QuarantineReport


@with_config(ConfigDict(extra="forbid"))
class ReasonDocument(TypedDict):
    reason: str
    spans: int
    firstReceivedAt: dt.datetime
    lastReceivedAt: dt.datetime


@with_config(ConfigDict(extra="forbid"))
class SpanDocument(TypedDict):
    tenantId: str
    receivedAt: dt.datetime
    reason: str
    spanName: str
    traceId: str
    spanId: str
    emissionStream: str | None
    emissionSeq: int | None
    source: str
    attributes: dict[str, Any]


@with_config(ConfigDict(extra="forbid"))
class QuarantineDocument(TypedDict):
    tenantId: str | None
    since: dt.datetime | None
    until: dt.datetime | None
    reason: str | None
    reasonPrefix: str | None
    total: int
    replayed: int
    reasons: list[ReasonDocument]
    spans: list[SpanDocument]


def run(store: Store, request: QuarantineRequest, clock: Clock) -> QuarantineReport:
    selection = QuarantineSelection(
        request.tenant, request.since, request.until, request.reason, request.limit,
        request.reason_prefix, request.offset,
    )  # fmt: skip
    return read_quarantine(store, selection)


persist = saves_nothing
finding = never_a_finding  # rejections are reported, not a failure of the reading

JOB = Job(
    name="quarantine",
    request=QuarantineRequest,
    document=QuarantineDocument,
    run=run,
    persist=persist,
    finding=finding,
)
