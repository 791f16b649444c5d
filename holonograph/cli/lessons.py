"""`holonograph lessons override|overrides|cluster|draft|approve|reject|publish` and
`holonograph fixtures rerun`: the lessons pipeline (docs/lessons.md), each command the
caller of one job (processors.lessons) that the HTTP API serves too. Exit codes: 0 ok,
1 a re-run fixture failed, 2 invalid input or a refusal (the gate's included), 3 store
unavailable."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError

from holonograph.cli.errors import EXIT_USAGE, CommandFailed
from holonograph.cli.jobs import (
    Rendering,
    job_limit_options,
    request_from,
    request_option,
    run_command,
)
from holonograph.cli.options import format_table, store_options
from holonograph.cli.tenants import tenant_option
from processors.conformance.suite import SuiteError, parse_document
from processors.lessons import approve, cluster, draft, listing, overrides, publish, reject, rerun
from processors.lessons.gate import Decision
from schemas.contracts import problems


def _document(path: str) -> Any:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
        return parse_document(text, path)
    except OSError as err:
        raise CommandFailed(f"cannot read {path}: {err.strerror}", EXIT_USAGE) from None
    except SuiteError as err:
        raise CommandFailed("; ".join(err.problems), EXIT_USAGE) from None


@click.group("lessons")
def lessons_group() -> None:
    """Overrides -> clusters -> drafts -> the gate -> published artifacts."""


def _run(job: Any, request: Any, text: Any, options: dict[str, Any]) -> None:
    run_command(
        job, request, Rendering(text), store_url=options["store_url"],
        data_dir=options["data_dir"], as_json=options["as_json"],
    )  # fmt: skip


@lessons_group.command("override")
@click.argument("body_file")
@tenant_option
@job_limit_options
@store_options
def override_command(body_file: str, tenant: str | None, **options: Any) -> None:
    """Record a human override from BODY_FILE (the Guide's POST /hil/override body, JSON
    or YAML; `-` reads stdin)."""
    document = _document(body_file)
    if not isinstance(document, dict):
        raise CommandFailed(f"{body_file}: the body must be an object", EXIT_USAGE)
    try:
        request = overrides.Request.model_validate(document, by_alias=True, by_name=False)
    except ValidationError as err:
        raise CommandFailed(f"{body_file}: {'; '.join(problems(err))}", EXIT_USAGE) from None

    def text(report: overrides.Recorded) -> str:
        state = "recorded" if report.created else "already recorded (a re-send)"
        return f"override {report.override.event_id} {state}"

    _run(overrides.JOB, request.for_tenant(tenant), text, options)


@lessons_group.command("overrides")
@request_option(listing.Request, "surface_id", "--surface", required=True)
@request_option(listing.Request, "since", "--since", required=True)
@request_option(listing.Request, "until", "--until", required=True)
@request_option(listing.Request, "limit", "--limit")
@tenant_option
@job_limit_options
@store_options
def overrides_command(
    tenant: str | None, store_url: Any, data_dir: Any, as_json: bool, **flags: Any
) -> None:
    """A surface's overrides over [--since, --until), oldest first."""
    request = request_from(listing.Request, {**flags, "tenant": tenant})

    def text(report: listing.Listing) -> str:
        rows = [
            [o.event_id, o.occurred_at, o.correlation_id, ",".join(o.tags), o.rationale]
            for o in report.overrides
        ]
        table = format_table(["eventId", "at", "correlationId", "tags", "rationale"], rows)
        return (
            f"{len(rows)} override(s) of {report.surface_id}\n{table}"
            if rows
            else (f"no overrides of {report.surface_id} in the window")
        )

    _run(
        listing.JOB,
        request,
        text,
        {"store_url": store_url, "data_dir": data_dir, "as_json": as_json},
    )


@lessons_group.command("cluster")
@request_option(cluster.Request, "surface_id", "--surface", required=True)
@request_option(cluster.Request, "since", "--since", required=True)
@request_option(cluster.Request, "until", "--until", required=True)
@request_option(cluster.Request, "threshold", "--threshold")
@request_option(cluster.Request, "record", "--record")
@tenant_option
@job_limit_options
@store_options
def cluster_command(
    tenant: str | None, store_url: Any, data_dir: Any, as_json: bool, **flags: Any
) -> None:
    """Cluster a surface's overrides over [--since, --until): tags and failed dimensions
    first, then text similarity (docs/lessons.md)."""
    request = request_from(cluster.Request, {**flags, "tenant": tenant})

    def text(report: cluster.Clustering) -> str:
        head = f"{report.event_count} override(s) of {report.surface_id}"
        lines = [f"{head}: {len(report.clusters)} cluster(s)"]
        for c in report.clusters:
            key = ", ".join([*c.tags, *(f"failed:{d}" for d in c.failed_dimensions)]) or "-"
            lines.append(f"  {c.cluster_id}  {len(c.members)} member(s)  {key}")
            lines.extend(f'      "{r}"' for r in c.representative_rationales[:1])
        if report.recorded:
            lines.append("recorded: draft one with `holonograph lessons draft --cluster ID`")
        return "\n".join(lines)

    _run(
        cluster.JOB,
        request,
        text,
        {"store_url": store_url, "data_dir": data_dir, "as_json": as_json},
    )


@lessons_group.command("draft")
@request_option(draft.Request, "kind", "--kind", required=True)
@request_option(draft.Request, "cluster_id", "--cluster", required=True)
@request_option(draft.Request, "parent_surface_id", "--parent-surface")
@request_option(draft.Request, "seed_event_id", "--seed-event-id")
@click.option(
    "--seed-raw-request", "seed_file", help="Fixture: a hand-authored event (JSON/YAML file)."
)
@request_option(draft.Request, "parent_fixture_id", "--parent-fixture-id")
@tenant_option
@job_limit_options
@store_options
def draft_command(
    seed_file: str | None, tenant: str | None, store_url: Any, data_dir: Any, as_json: bool,
    **flags: Any,
) -> None:  # fmt: skip
    """Draft an artifact for a recorded cluster; it waits at the gate."""
    seed = _document(seed_file) if seed_file else None
    request = request_from(draft.Request, {**flags, "seed_raw_request": seed, "tenant": tenant})

    def text(report: draft.Drafted) -> str:
        body = report.record.draft
        state = (
            "queued for the gate"
            if report.enqueued
            else f"already {report.decision.all[-1].action}"
        )
        return f"draft {body['draftId']} ({body['kind']}, {body['classification']}): {state}"

    _run(
        draft.JOB, request, text, {"store_url": store_url, "data_dir": data_dir, "as_json": as_json}
    )


def _decision_text(report: Decision) -> str:
    lines = [f"draft {report.all[-1].draft_id}: {report.all[-1].action}"]
    for r in report.all:
        why = f": {r.comment}" if r.comment else ""
        lines.append(f"  {r.seq}. {r.action} by {r.actor} at {r.recorded_at.isoformat()}{why}")
    return "\n".join(lines)


def _decision_command(name: str, job: Any, summary: str, comment_required: bool) -> None:
    """`lessons approve` and `lessons reject`: one gate decision by a named approver (they
    differ in the job and in whether --comment is required)."""

    @lessons_group.command(name, help=summary)
    @request_option(job.Request, "draft_id", "--draft", required=True)
    @request_option(job.Request, "approver_id", "--approver", required=True)
    @request_option(job.Request, "comment", "--comment", required=comment_required)
    @tenant_option
    @job_limit_options
    @store_options
    def command(
        tenant: str | None, store_url: Any, data_dir: Any, as_json: bool, **flags: Any
    ) -> None:
        request = request_from(job.Request, {**flags, "tenant": tenant})
        options = {"store_url": store_url, "data_dir": data_dir, "as_json": as_json}
        _run(job.JOB, request, _decision_text, options)


_decision_command("approve", approve, "Let a draft through the gate, as a named approver.", False)
_decision_command(
    "reject", reject,
    "Reject a draft, as a named approver, saying why (--comment is required).", True,
)  # fmt: skip


@lessons_group.command("publish")
@request_option(publish.Request, "draft_id", "--draft", required=True)
@click.option(
    "--supersede",
    "supersede",
    multiple=True,
    help="A published artifact to supersede (repeatable).",
)
@tenant_option
@job_limit_options
@store_options
def publish_command(
    supersede: tuple[str, ...], tenant: str | None, store_url: Any, data_dir: Any, as_json: bool,
    **flags: Any,
) -> None:  # fmt: skip
    """Publish an approved draft as a versioned artifact, writing its change event."""
    request = request_from(
        publish.Request, {**flags, "candidate_existing_lesson_ids": supersede, "tenant": tenant}
    )

    def text(report: publish.Publication) -> str:
        a = report.artifact
        lines = [f"{a.kind} {a.artifact_id} v{a.version} published ({a.content_digest})"]
        lines += [f"  {s.mode} {s.artifact_id} v{s.version}" for s in report.superseded]
        if report.change is not None:
            lines.append(f"  change event {report.change.change_id}: {report.change.description}")
        return "\n".join(lines)

    _run(
        publish.JOB,
        request,
        text,
        {"store_url": store_url, "data_dir": data_dir, "as_json": as_json},
    )


@click.group("fixtures")
def fixtures_group() -> None:
    """Re-run published fixtures over their surface's stored events."""


@fixtures_group.command("rerun")
@request_option(rerun.Request, "fixture_id", "--fixture-id", required=True)
@request_option(rerun.Request, "since", "--since")
@request_option(rerun.Request, "until", "--until")
@tenant_option
@job_limit_options
@store_options
def rerun_command(
    tenant: str | None, store_url: Any, data_dir: Any, as_json: bool, **flags: Any
) -> None:
    """Run a live fixture over its surface's events: actual beside expected (exit 1: it
    fails on some)."""
    request = request_from(rerun.Request, {**flags, "tenant": tenant})

    def text(report: rerun.Rerun) -> str:
        shown = report.to_json()
        actual = shown["actual"]
        counts = ", ".join(f"{k} {v}" for k, v in actual["counts"].items() if v)
        return (
            f"fixture {shown['fixtureId']} v{shown['version']} on {shown['surfaceId']}:"
            f" {actual['verdict']} ({counts or 'no events'})\n  expected: {shown['expected']}"
        )

    _run(
        rerun.JOB, request, text, {"store_url": store_url, "data_dir": data_dir, "as_json": as_json}
    )


def register(group: click.Group) -> None:
    group.add_command(lessons_group)
    group.add_command(fixtures_group)
