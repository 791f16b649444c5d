"""Which job answers which of the Guide's paths, with which scope; and the paths the
Guide names that this collector does not serve yet (answered 501, never 404).

To serve a job over HTTP, add one `Endpoint` (its body is the job's Request, its
answer the job's report document, exactly as the CLI's --json), and take its path
out of `NOT_SERVED`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ingest.export.principal import Scope
from processors.activity import job as activity
from processors.compare import job as compare
from processors.completeness import job as completeness
from processors.conformance import approve, check, derive, results
from processors.drift import job as drift
from processors.events import job as events
from processors.jobs import Job
from processors.lessons import approve as lesson_approve
from processors.lessons import cluster as lesson_cluster
from processors.lessons import draft as lesson_draft
from processors.lessons import overrides as lesson_overrides
from processors.lessons import publish as lesson_publish
from processors.lessons import reject as lesson_reject
from processors.lessons import rerun as fixture_rerun
from processors.quarantine import job as quarantine
from processors.report import html as report_html
from processors.report import job as report
from processors.retention import job as retention
from processors.status import job as status
from processors.topology import bootstrap, inventory, scan
from processors.variance import decompose, evaluate, lifecycle


@dataclass(frozen=True)
class Endpoint:
    """`POST path` runs `job` for the token's tenant; the token needs `scope`, and to
    persist (`request.persists()`) also `persist_scope` when one is named. `cli` is the
    command that runs the same job. `html`: the report as a page too, answered to a
    client that asks for `text/html` (`Accept`)."""

    path: str
    job: Job[Any, Any]
    scope: Scope
    summary: str
    cli: str
    persist_scope: Scope | None = None
    method: str = "POST"
    agent_field: str | None = None  # the Request field naming an agent the token must own
    html: Callable[[Any], str] | None = None


def _report_page(answer: report.Report) -> str:
    return report_html.render(answer.data)


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint(
        "/lens/conformance/derive",
        derive.JOB,
        "read",
        "Candidate fixtures from a capability surface's prose rules (Guide ch. 10).",
        "holonograph conformance derive",
    ),
    Endpoint(
        "/lens/conformance/fixtures",
        approve.JOB,
        "govern",
        "Approve a fixture: an immutable, versioned record that checks run (Guide ch. 10).",
        "holonograph conformance approve",
    ),
    Endpoint(
        "/lens/conformance/check",
        check.JOB,
        "read",
        "Check live or inline fixtures over a window of events (Guide ch. 10).",
        "holonograph conformance check",
    ),
    Endpoint(
        "/lens/conformance/results",
        results.JOB,
        "read",
        "Recorded check results, newest first, of a surface or fixture checked in"
        " [since, until): fixture verdicts over time (docs/conformance.md).",
        "holonograph conformance results",
        method="GET",
    ),
    Endpoint(
        "/holonograph/completeness",
        completeness.JOB,
        "read",
        "Per-stream delivery accounting and biased windows (wire contract section 3);"
        " `refresh` rewrites the materialized tables and needs the govern scope.",
        "holonograph completeness",
        persist_scope="govern",
    ),
    Endpoint(
        "/lens/events",
        events.JOB,
        "read",
        "A page of the tenant's events, oldest or latest received first, with a cursor"
        " that pages stably while events arrive (Guide ch. 3; docs/api.md, Paging).",
        "holonograph events",
        method="GET",
    ),
    Endpoint(
        "/lens/topology/structural-inventory",
        inventory.JOB,
        "govern",
        "Store what an agent's code says exists; an identical body is stored once (Guide ch. 9).",
        "holonograph topology inventory",
    ),
    Endpoint(
        "/lens/topology/scan",
        scan.JOB,
        "read",
        "Declared vs observed vs inventoried per surface; `record` stores the report and"
        " needs the govern scope (Guide ch. 9).",
        "holonograph topology scan",
        persist_scope="govern",
    ),
    Endpoint(
        "/lens/topology/bootstrap",
        bootstrap.JOB,
        "read",
        "Propose a surface's dimensions, cohort tags and substrate columns from its traffic"
        " (Guide ch. 9).",
        "holonograph topology bootstrap",
    ),
    Endpoint(
        "/holonograph/status",
        status.JOB,
        "read",
        "What the collector knows of the tenant: surfaces, dimensions, event counts, last"
        " arrival, streams, rejections and schedule health (`x-holonograph-finding`: a"
        " schedule's latest run failed).",
        "holonograph status",
        method="GET",
    ),
    Endpoint(
        "/holonograph/activity",
        activity.JOB,
        "read",
        "Events received and spans rejected in each of the last `minutes` minutes (the web"
        " UI's ingest rate), every minute listed.",
        "holonograph activity",
        method="GET",
    ),
    Endpoint(
        "/holonograph/quarantine",
        quarantine.JOB,
        "read",
        "The tenant's rejected spans, newest first, with counts per reason.",
        "holonograph quarantine",
    ),
    Endpoint(
        "/holonograph/compare",
        compare.JOB,
        "read",
        "Vendors head to head on a surface: per group, and paired on the same calls"
        " (`x-holonograph-finding`: a significant paired difference).",
        "holonograph compare",
    ),
    Endpoint(
        "/holonograph/retention",
        retention.JOB,
        "read",
        "The token's tenant's retention: show it (read), or set or clear it (govern); rows"
        " older than it are deleted by ClickHouse TTL.",
        "holonograph retention",
        persist_scope="govern",
    ),
    Endpoint(
        "/lens/attribute",
        drift.JOB,
        "read",
        "Change points of a surface's outcomes, each attributed to substrate, light source,"
        " lens or noise, with the windows to read before acting (Guide ch. 13).",
        "holonograph drift",
    ),
    Endpoint(
        "/lens/decomposeVariance",
        decompose.JOB,
        "read",
        "A variance reading: how much of the spread is real and how much noise; stored, its"
        " eventId is what evaluate and lifecycle take (Guide ch. 14).",
        "holonograph variance decompose",
    ),
    Endpoint(
        "/lens/decomposition/evaluate",
        evaluate.JOB,
        "read",
        "The verdict on a reading: insufficient-data, delivery-biased, confounded or viable"
        " (Guide ch. 14).",
        "holonograph variance evaluate",
    ),
    Endpoint(
        "/lens/decomposition/lifecycle",
        lifecycle.JOB,
        "govern",
        "Record a governance decision on a reading: lock, pin, supersede or discard (Guide"
        " ch. 14).",
        "holonograph variance lifecycle",
    ),
    # The lessons pipeline (Guide ch. 12, docs/lessons.md).
    Endpoint(
        "/hil/override",
        lesson_overrides.JOB,
        "write",
        "Record a human override of one call; its eventId is the idempotency key.",
        "holonograph lessons override",
        agent_field="agent_id",
    ),
    Endpoint(
        "/lessons/cluster",
        lesson_cluster.JOB,
        "read",
        "Cluster a surface's overrides: clusters[] with stable ids and reasons, eventCount;"
        " `record` stores them and needs the govern scope.",
        "holonograph lessons cluster",
        persist_scope="govern",
    ),
    Endpoint(
        "/lessons/draft",
        lesson_draft.JOB,
        "govern",
        "Draft a skill, lesson, fixture or code-change recommendation for a cluster; it"
        " waits at the gate.",
        "holonograph lessons draft",
    ),
    Endpoint(
        "/hil/approve",
        lesson_approve.JOB,
        "govern",
        "A named approver lets a draft through the gate: status and history[].",
        "holonograph lessons approve",
    ),
    Endpoint(
        "/hil/reject",
        lesson_reject.JOB,
        "govern",
        "A named approver rejects a draft, with a comment (required): status and history[].",
        "holonograph lessons reject",
    ),
    Endpoint(
        "/lessons/publish",
        lesson_publish.JOB,
        "govern",
        "Publish an approved draft: a versioned artifact, what it superseded, and the change"
        " event drift readings name.",
        "holonograph lessons publish",
    ),
    Endpoint(
        "/fixtures/rerun",
        fixture_rerun.JOB,
        "read",
        "Re-run a live fixture over its surface's stored events: actual beside expected[].",
        "holonograph fixtures rerun",
    ),
    Endpoint(
        "/holonograph/report",
        report.JOB,
        "read",
        "Everything the dashboards show over a window: stream health, rejected spans, and per"
        " surface hourly pass rates, change points, recorded changes, variance verdicts and the"
        " vendor comparison; `Accept: text/html` answers the self-contained page.",
        "holonograph report",
        html=_report_page,
    ),
)


@dataclass(frozen=True)
class NotServed:
    """A path the Guide names that this collector answers 501 `not_implemented`;
    `instead`: what does the job today, if anything."""

    method: str
    path: str
    instead: str


NOT_SERVED: tuple[NotServed, ...] = (
    NotServed("POST", "/lens/events", "an OTLP exporter to /v1/traces (docs/receiver-edge.md)"),
    NotServed("POST", "/holonograph/messages", ""),
)
