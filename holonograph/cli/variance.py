"""`holonograph variance decompose|evaluate|lifecycle`: how much of the spread is real."""

from __future__ import annotations

import datetime as dt
from typing import Any

import click

from holonograph.cli.jobs import Rendering, job_limit_options, request_from, run_command
from holonograph.cli.options import (
    RFC3339,
    choice_of,
    format_table,
    provenance_option,
    run_mode_option,
    series_options,
    store_options,
)
from holonograph.cli.tenants import tenant_option
from processors.variance import decompose as decomposing
from processors.variance import evaluate as evaluating
from processors.variance import lifecycle as governing
from schemas.analysis import Bucket, LifecycleStatus, VarianceReading


@click.group("variance")
def variance_group() -> None:
    """Variance isolation: decompose a reading, get its verdict, govern it."""


@variance_group.command("decompose")
@click.option("--surface", "surface_id", required=True)
@click.option("--dimension", "dimension_id", required=True)
@click.option("--since", type=RFC3339(), required=True, help="RFC 3339 UTC.")
@click.option("--until", type=RFC3339(), required=True, help="RFC 3339 UTC, exclusive.")
@click.option("--bucket", type=choice_of(Bucket), default="hour", show_default=True)
@run_mode_option
@provenance_option
@series_options
@tenant_option
@job_limit_options
@store_options
def decompose_command(
    surface_id: str,
    dimension_id: str,
    since: dt.datetime,
    until: dt.datetime,
    bucket: str,
    run_modes: tuple[str, ...],
    provenances: tuple[str, ...],
    role: str,
    light_source: str,
    tenant: str | None,
    store_url: str | None,
    data_dir: str | None,
    as_json: bool,
) -> None:
    """Split the observed variance of bucket outcomes into noise and real variance, and
    store the reading (its eventId is what evaluate and lifecycle take)."""
    request = request_from(
        decomposing.Request,
        {
            "surface_id": surface_id,
            "dimension_id": dimension_id,
            "since": since,
            "until": until,
            "bucket": bucket,
            "run_modes": run_modes,
            "provenances": provenances,
            "role": role,
            "light_source": light_source,
            "tenant": tenant,
        },
    )
    run_command(
        decomposing.JOB,
        request,
        Rendering(_reading_text),
        store_url=store_url,
        data_dir=data_dir,
        as_json=as_json,
    )


def _reading_text(reading: VarianceReading) -> str:
    out = reading.to_json()
    ci = out["cleanedVarianceCi"] or {}
    return _table(
        {
            "eventId": out["eventId"],
            "series": _series(out["series"]),
            "buckets": out["buckets"],
            "events": out["events"],
            "clusters": out["clusters"],
            "mean": out["mean"],
            "observed variance": out["observedVariance"],
            "noise variance": out["noiseVariance"],
            "cleaned variance": out["cleanedVariance"],
            "95% interval": f"[{ci.get('ciLow')}, {ci.get('ciHigh')}]",
            "noise share": out["noiseShare"],
            "design effect": out["designEffect"],
        }
    )


@variance_group.command("evaluate")
@click.option("--target-event-id", "target", required=True)
@tenant_option
@job_limit_options
@store_options
def evaluate_command(
    target: str, tenant: str | None, store_url: str | None, data_dir: str | None, as_json: bool
) -> None:
    """Verdict on a reading: insufficient-data, delivery-biased, confounded or viable.

    Exit 0: viable; 1: any other verdict (the reading should not be acted on)."""
    request = request_from(evaluating.Request, {"target_event_id": target, "tenant": tenant})
    run_command(
        evaluating.JOB,
        request,
        Rendering(_evaluation_text),
        store_url=store_url,
        data_dir=data_dir,
        as_json=as_json,
    )


def _evaluation_text(report: evaluating.Report) -> str:
    evaluation = report.evaluation
    lines = [f"verdict: {evaluation.verdict}  (target {evaluation.target_event_id})"]
    lines += [f"  because: {line}" for line in evaluation.reasons]
    lines += [f"  to fix: {line}" for line in evaluation.guidance]
    delivery = evaluation.checks.get("delivery")
    if isinstance(delivery, str) and delivery.startswith("stale:"):
        lines.append(f"  {delivery}")
    if evaluation.strata:
        rows = [
            [s.layers, s.buckets, s.events, s.cleaned_variance, s.viable, s.reason]
            for s in evaluation.strata
        ]
        lines.append(
            format_table(["stratum", "buckets", "events", "cleaned", "viable", "why"], rows)
        )
    return "\n".join(lines)


@variance_group.command("lifecycle")
@click.option("--target-event-id", "target", required=True)
@click.option("--status", type=choice_of(LifecycleStatus), required=True)
@click.option("--approver-id", "approver", required=True)
@click.option("--pinned-label", default=None)
@click.option("--superseded-by", default=None, help="Required with --status supersede.")
@tenant_option
@job_limit_options
@store_options
def lifecycle_command(
    target: str,
    status: str,
    approver: str,
    pinned_label: str | None,
    superseded_by: str | None,
    tenant: str | None,
    store_url: str | None,
    data_dir: str | None,
    as_json: bool,
) -> None:
    """Record a governance decision on a reading; prints it with the original target id."""
    flags = {
        "target_event_id": target,
        "status": status,
        "approver_id": approver,
        "pinned_label": pinned_label,
        "superseded_by": superseded_by,
        "tenant": tenant,
    }
    run_command(
        governing.JOB,
        request_from(governing.Request, flags),
        Rendering(lambda report: _table(report.to_json())),
        store_url=store_url,
        data_dir=data_dir,
        as_json=as_json,
    )


def _series(series: dict[str, Any]) -> str:
    source = f" of {series['lightSource']}" if series["lightSource"] else ""
    return f"{series['role']}{source} ({series['events']} events, {series['leftOut']} left out)"


def _table(values: dict[str, Any]) -> str:
    return format_table(["field", "value"], [[k, v] for k, v in values.items()])


def register(group: click.Group) -> None:
    group.add_command(variance_group)
