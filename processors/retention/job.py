"""`holonograph retention show | set | clear`, `POST /holonograph/retention`: how long
the store keeps a tenant's events, dimensions, receipts and quarantined spans.

The setting is a row of `tenant_retention` (migration 0018), its one writer this
job; ClickHouse's TTL deletes what is older (`schemas.retention` renders a rule per
tenant beside the store's default from `serve --retention`, and re-applies them after
every migration run). `set` and `clear` save and apply at once; the TTL's mutation
deletes existing old rows in the background, merges keep doing so.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from processors.jobs import Job, JobRequest, never_a_finding
from schemas.events import DEFAULT_TENANT
from schemas.retention import apply_retention_ttl, read_rules
from schemas.store import Store
from schemas.tables import TENANT_RETENTION
from schemas.times import Clock

DAY_SECONDS = 86400
MAX_DAYS = 36_500  # a hundred years: longer is "keep", which `clear` (or no setting) is

Action = Literal["show", "set", "clear"]


class RetentionRequest(JobRequest):
    """What to do with the token's (the --tenant's) retention."""

    action: Action = Field("show", description="show, set (with days) or clear the setting.")
    days: Annotated[int, Field(ge=1, le=MAX_DAYS)] | None = Field(
        None, description="Keep the tenant's rows this many days after their time (set)."
    )

    @model_validator(mode="after")
    def _days_for_set(self) -> RetentionRequest:
        if self.action == "set" and self.days is None:
            raise ValueError("set needs days")
        if self.action != "set" and self.days is not None:
            raise ValueError(f"{self.action} takes no days")
        return self

    def persists(self) -> bool:
        return self.action != "show"


Request = RetentionRequest


class RetentionDocument(BaseModel):
    """A tenant's retention: its own setting, the store's default, the one in effect."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid"
    )

    tenant_id: str
    action: Action
    tenant_days: float | None = Field(description="The tenant's own setting (None: none).")
    default_days: float | None = Field(description="The store's default (None: keep forever).")
    effective_days: float | None = Field(description="What applies (None: kept forever).")
    source: Literal["tenant", "default", "none"]
    applied_to: list[str] = Field(description="Tables whose TTL this request changed.")
    as_of: dt.datetime


@dataclass(frozen=True)
class Report:
    document: RetentionDocument
    seconds: int | None  # what `set` (a number) or `clear` (None) saves

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = self.document.model_dump(by_alias=True)
        return out


def _days(seconds: int | None) -> float | None:
    return None if seconds is None else seconds / DAY_SECONDS


def _document(
    store: Store, tenant: str, action: Action, now: dt.datetime, applied: list[str]
) -> RetentionDocument:
    rules = read_rules(store)
    effective, source = rules.of(tenant)
    return RetentionDocument(
        tenant_id=tenant,
        action=action,
        tenant_days=_days(rules.tenants.get(tenant)),
        default_days=_days(rules.default),
        effective_days=_days(effective),
        source=source,  # type: ignore[arg-type]  # "tenant" | "default" | "none"
        applied_to=applied,
        as_of=now,
    )


def run(store: Store, request: Request, clock: Clock) -> Report:
    tenant = request.tenant or DEFAULT_TENANT
    seconds = None if request.days is None else request.days * DAY_SECONDS
    return Report(_document(store, tenant, request.action, clock(), []), seconds)


def persist(store: Store, report: Report) -> Report:
    """The setting saved (0 seconds: cleared) and every retained table's TTL made to
    agree; the report re-read after it."""
    document = report.document
    store.command(
        f"INSERT INTO {TENANT_RETENTION.qualified} ({TENANT_RETENTION.column_list()})"
        " SELECT {tenant:String}, {seconds:UInt64}, now64(3)",  # the store's clock orders them
        {"tenant": document.tenant_id, "seconds": report.seconds or 0},
    )
    applied = apply_retention_ttl(store)
    return Report(
        _document(store, document.tenant_id, document.action, document.as_of, applied),
        report.seconds,
    )


finding = never_a_finding
JOB = Job("retention", Request, RetentionDocument, run, persist, finding, owner_tenant=True)
