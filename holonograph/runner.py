"""The one runner of every job (`processors.jobs`): open the store, scope it to the
request's tenant, run, persist, and hand the report back to the caller, which renders
it (the CLI as text or --json, the HTTP API as the same JSON) and decides the exit
code or status from `job.finding`.

    scope(job, request, stores)    the tenant: the request's, else the store's only one
    execute(job, request, stores)  run on a read-only connection scoped to that tenant,
                                   then persist on a writing one when the request asks
    freshen(job, request, stores)  before `execute`, for a caller that may write: refresh
                                   the completeness windows the job reads when they have
                                   not seen every event of its range (a backfill)

`StoreAccess` is how a caller reaches its store: the CLI through `--store` (or the
owner's admin endpoint while `serve` holds it), the receiver through its own sessions
on its read executor. The runner imports neither: it is the wiring's, so the CLI,
the HTTP API and the scheduler run one code path.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol, TypeVar

from holonograph.limits import job_limits, over_limit
from ingest.store.limits import LimitRequest, ReadLimitExceeded
from processors.jobs import NO_STORE, Job, JobRequest, Report
from processors.names import require_known
from processors.tenants import resolve_tenant
from schemas.completeness import WindowsFreshness
from schemas.events import DEFAULT_TENANT
from schemas.readonce import forget
from schemas.store import Store
from schemas.times import Clock, utc_now

RequestT = TypeVar("RequestT", bound=JobRequest)
ReportT = TypeVar("ReportT", bound=Report)


class StoreAccess(Protocol):
    """A read-only connection seeing only `tenant`'s rows (None: every tenant's), each
    query within `limits` (None: the connection's own), and a writing one; each is
    closed when its block ends."""

    def reading(
        self, tenant: str | None, limits: LimitRequest | None = None
    ) -> AbstractContextManager[Store]: ...

    def writing(self) -> AbstractContextManager[Store]: ...


def scope(
    job: Job[RequestT, Any],
    request: RequestT,
    stores: StoreAccess,
    limits: LimitRequest | None = None,
) -> RequestT:
    """`request` for its tenant: the one it names, else the store's only tenant (several:
    `TenantAmbiguous`); on a store with no tenant yet, none, or the default tenant for
    a job that writes a tenant's records (`job.owner_tenant`). Looked up within the
    job's read limits (`limits` as for `execute`): the reader the job then runs on."""
    if request.tenant is not None or not job.uses_store:
        return request
    wanted = job_limits(job.name, limits)
    with stores.reading(None, wanted) as store, _within(job, store, wanted):
        tenant = resolve_tenant(store, None)
    if tenant is None and job.owner_tenant:
        tenant = DEFAULT_TENANT
    return request.for_tenant(tenant)


def execute(
    job: Job[RequestT, ReportT],
    request: RequestT,
    stores: StoreAccess,
    clock: Clock = utc_now,
    limits: LimitRequest | None = None,
) -> ReportT:
    """The job's report for a scoped `request`: `run` on a read-only connection that
    sees only the request's tenant, then `persist` on a writing one if it `persists()`.
    A name the request's `named_fields` give that the tenant never had events for is
    `processors.names.UnknownName` before anything runs or is stored.
    A job that uses no store opens none. Its queries run within the job's read limits
    (`holonograph.limits`, `limits` overriding some): one stopped at a limit is
    `JobOverLimit`, said for the job."""
    if not job.uses_store:
        return job.run(NO_STORE, request, clock)
    wanted = job_limits(job.name, limits)
    with stores.reading(request.tenant, wanted) as store, _within(job, store, wanted):
        require_known(store, request.tenant, request.named())  # never a silent zero
        report = job.run(store, request, clock)
    if request.persists():
        with stores.writing() as store:
            report = job.persist(store, report)
    return report


def freshen(
    job: Job[RequestT, Any],
    request: RequestT,
    stores: StoreAccess,
    clock: Clock = utc_now,
    limits: LimitRequest | None = None,
) -> WindowsFreshness | None:
    """Refresh the completeness windows when `job` reads them and they have not seen
    every event of the scoped `request`'s range: the same incremental refresh `serve`
    and `sink` run every period, so the answer is the one they would give a period
    later. Returns the freshness found before (None: the job reads no windows, or there
    was nothing to judge); the job's own report says whether it is still stale. Read
    within the job's limits (`limits` as for `execute`), on the reader it runs on."""
    if job.freshness is None or not job.uses_store:
        return None
    wanted = job_limits(job.name, limits)
    with stores.reading(request.tenant, wanted) as store, _within(job, store, wanted):
        found = job.freshness(store, request, clock)
    if found is not None and found.stale:
        # the completeness job's module (its models, its SQL) only when there is a refresh
        from processors.completeness.job import refresh_stream_status

        with stores.writing() as store:
            refresh_stream_status(store, clock())
        forget()  # a `read_once` block's reads were of the windows before
    return found


@contextmanager
def _within(job: Job[Any, Any], store: Store, wanted: LimitRequest) -> Iterator[None]:
    """A query of the block stopped at a read limit is `JobOverLimit`, said for `job`
    with the limits the reader had (those `wanted`, unless its owner's are lower)."""
    try:
        yield
    except ReadLimitExceeded as err:
        effective = getattr(store, "limits", None)
        known = effective.settings() if effective is not None else wanted
        raise over_limit(job.name, err, known) from None
