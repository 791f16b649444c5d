"""`holonograph variance decompose|evaluate|lifecycle`: how much of the spread is real."""

from __future__ import annotations

import datetime as dt
import sys
from typing import Any

import click

from holonograph.cli.options import (
    EXIT_FINDING,
    EXIT_USAGE,
    RFC3339,
    choice_of,
    emit_json,
    format_table,
    open_store_or_exit,
    provenance_filter,
    provenance_option,
    run_mode_option,
    series_options,
    store_options,
)
from holonograph.cli.tenants import tenant_option, tenant_or_exit
from processors.series.cells import SelectionError
from processors.variance.decompose import DecomposeRequest, decompose, load_reading, persist_reading
from processors.variance.verdict import LifecycleError, evaluate, lifecycle, persist_evaluation
from schemas.analysis import Bucket, LifecycleStatus, VarianceEvaluation
from schemas.times import utc_now


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
    if until <= since:
        raise click.UsageError("--until must be after --since")
    store = open_store_or_exit(store_url, data_dir, write=True)
    request = DecomposeRequest(
        surface_id,
        dimension_id,
        since,
        until,
        bucket,
        run_modes,
        provenance_filter(provenances),
        tenant_id=tenant_or_exit(store, tenant),
        role=role,  # type: ignore[arg-type]
        light_source=light_source,
    )
    try:
        reading = decompose(store, request, utc_now())
        persist_reading(store, reading)
    except SelectionError as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(EXIT_USAGE)
    finally:
        store.close()
    out = reading.to_json()
    if as_json:
        emit_json(out)
        return
    ci = out["cleanedVarianceCi"] or {}
    _table(
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
@store_options
def evaluate_command(
    target: str, tenant: str | None, store_url: str | None, data_dir: str | None, as_json: bool
) -> None:
    """Verdict on a reading: insufficient-data, delivery-biased, confounded or viable.

    Exit 0: viable; 1: any other verdict (the reading should not be acted on)."""
    store = open_store_or_exit(store_url, data_dir, write=True)
    tenant = tenant_or_exit(store, tenant)
    try:
        reading = load_reading(store, target, tenant)
        if reading is None:
            click.echo(f"error: no variance reading {target!r}", err=True)
            sys.exit(EXIT_USAGE)
        evaluation = evaluate(store, reading, utc_now())
        persist_evaluation(store, evaluation, reading)
    finally:
        store.close()
    if as_json:
        emit_json(evaluation.to_json())
    else:
        _print_evaluation(evaluation, target)
    if evaluation.verdict != "viable":
        sys.exit(EXIT_FINDING)


def _print_evaluation(evaluation: VarianceEvaluation, target: str) -> None:
    click.echo(f"verdict: {evaluation.verdict}  (target {target})")
    for line in evaluation.reasons:
        click.echo(f"  because: {line}")
    for line in evaluation.guidance:
        click.echo(f"  to fix: {line}")
    if evaluation.strata:
        rows = [
            [s.layers, s.buckets, s.events, s.cleaned_variance, s.viable, s.reason]
            for s in evaluation.strata
        ]
        click.echo(format_table(["stratum", "buckets", "events", "cleaned", "viable", "why"], rows))


@variance_group.command("lifecycle")
@click.option("--target-event-id", "target", required=True)
@click.option("--status", type=choice_of(LifecycleStatus), required=True)
@click.option("--approver-id", "approver", required=True)
@click.option("--pinned-label", default=None)
@click.option("--superseded-by", default=None, help="Required with --status supersede.")
@tenant_option
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
    store = open_store_or_exit(store_url, data_dir, write=True)
    tenant = tenant_or_exit(store, tenant)
    try:
        record = lifecycle(
            store, target, status, approver, utc_now(), pinned_label, superseded_by, tenant
        )
    except LifecycleError as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(EXIT_USAGE)
    finally:
        store.close()
    if as_json:
        emit_json(record.to_json())
    else:
        _table(record.to_json())


def _series(series: dict[str, Any]) -> str:
    source = f" of {series['lightSource']}" if series["lightSource"] else ""
    return f"{series['role']}{source} ({series['events']} events, {series['leftOut']} left out)"


def _table(values: dict[str, Any]) -> None:
    click.echo(format_table(["field", "value"], [[k, v] for k, v in values.items()]))


def register(group: click.Group) -> None:
    group.add_command(variance_group)
