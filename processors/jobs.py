"""The one shape every batch job has (docs/decisions/0008-one-job-shape.md).

A job is a module that defines, at module level:

    Request                          a `JobRequest`: typed, validated, the Guide's camelCase
                                     names; the HTTP body and the CLI's flags are both
                                     validated into it
    Report                           what `run` returns; `report.to_json()` is the document
                                     the CLI prints with --json and the HTTP API answers
    run(store, request, clock)       the analysis, read-only -> Report
    persist(store, report)           what is saved, on a writing store -> the Report as
                                     saved (a job that saves nothing returns it as is)
    finding(report)                  True: exit 1 on the CLI, an alert from a schedule
    JOB = Job(...)                   the parts above bundled, with the job's name

The caller never runs a job's functions itself: `holonograph.runner` opens the store,
scopes it to the request's tenant, calls `run`, then `persist` when the request
`persists()`, and its callers (the CLI, the HTTP API, the scheduler) render the
report. A request the job cannot answer as asked raises `JobError` (the caller's to
fix: CLI exit 2, HTTP 4xx), never a bare ValueError.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, Protocol, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from pydantic.json_schema import SkipJsonSchema

from schemas.completeness import WindowsFreshness
from schemas.store import Store
from schemas.times import Clock

__all__ = [
    "NO_STORE",
    "Job",
    "JobError",
    "JobRequest",
    "NotFound",
    "Report",
    "never_a_finding",
    "saves_nothing",
]


class JobRequest(BaseModel):
    """What a job is asked: its fields are the HTTP body (camelCase aliases) and, by
    field name, the CLI's flags. `tenant` is never the caller's to choose over HTTP
    (the token's tenant) and is not part of the body or its schema: the runner sets it
    (None: the store holds no tenant yet, so every tenant means none)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    tenant: SkipJsonSchema[str | None] = Field(default=None, exclude=True)

    # Fields that name a surface, dimension, agent or stream the tenant must have had
    # events for (`processors.names`): the runner refuses an unknown one before `run`.
    named_fields: ClassVar[Mapping[str, str]] = {}

    def named(self) -> dict[str, str | None]:
        """What this request names, by kind (`processors.names.Vocabulary`); an empty
        value names nothing."""
        return {kind: getattr(self, name) or None for name, kind in self.named_fields.items()}

    def persists(self) -> bool:
        """Whether the runner calls `persist` (and opens a writing store) for it."""
        return False

    def for_tenant(self, tenant: str | None) -> Self:
        return self.model_copy(update={"tenant": tenant})


class Report(Protocol):
    def to_json(self) -> Any:
        """The JSON document (datetimes as `datetime`; `schemas.jsoncodec.plain` writes
        them as RFC 3339 UTC): the CLI's --json and the HTTP body, identical."""
        ...


ErrorKind = Literal["invalid", "not-found", "conflict"]


class JobError(Exception):
    """The request cannot be answered as asked: `kind` says how (invalid: HTTP 400,
    not-found: 404, conflict: 409; the CLI exits 2 for each), `code` is the envelope's
    machine-readable code, `hint` what to do (shown by the CLI)."""

    kind: ErrorKind = "invalid"

    def __init__(
        self,
        message: str,
        code: str = "invalid_request",
        *,
        details: dict[str, Any] | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.details = details or {}
        self.hint = hint


class NotFound(JobError, LookupError):
    kind: ErrorKind = "not-found"

    def __init__(self, message: str, code: str = "not_found", **extra: Any) -> None:
        super().__init__(message, code, **extra)


RequestT = TypeVar("RequestT", bound=JobRequest)
ReportT = TypeVar("ReportT", bound=Report)


def saves_nothing(store: Store, report: ReportT) -> ReportT:
    """`persist` of a job whose report is not stored."""
    return report


def never_a_finding(report: Report) -> bool:
    """`finding` of a job whose report is never one (a derivation, an approval)."""
    return False


@dataclass(frozen=True)
class Job(Generic[RequestT, ReportT]):
    """One job's parts. `document` is the type of `report.to_json()` (a pydantic model
    or a TypedDict): the OpenAPI document's response schema is generated from it.
    `owner_tenant`: on a store that holds no tenant yet the job runs for the default
    tenant (it writes records a tenant owns) rather than for none. `uses_store` False:
    `run` reads nothing (the runner opens no store and passes `NO_STORE`). `freshness`:
    for a job that reads the stored completeness windows, whether they have seen every
    event the request reads (`processors.series.freshness`; None: nothing to judge), so
    that a caller that may write refreshes them first (`holonograph.runner.freshen`)."""

    name: str
    request: type[RequestT]
    document: Any
    run: Callable[[Store, RequestT, Clock], ReportT]
    persist: Callable[[Store, ReportT], ReportT]
    finding: Callable[[ReportT], bool] = never_a_finding
    owner_tenant: bool = False
    uses_store: bool = True
    freshness: Callable[[Store, RequestT, Clock], WindowsFreshness | None] | None = None


class _NoStore:
    """The store of a job that reads none: any use is a bug in the job."""

    url = ""

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("this job declared uses_store=False but used the store")

    query = command = insert = _refuse

    def close(self) -> None:
        return None


NO_STORE: Store = _NoStore()
