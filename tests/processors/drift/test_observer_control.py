"""The observers on the primary's own calls as the control of a silent vendor change:
a primary shift they do not share is the primary's vendor; one they share is the
calls' inputs. Seeded multiplex surfaces (`testkit.multiplex_series`) with known truth,
no sibling surface behind the alias; with recorded changes, the controls and the
change's timing read together, and availability marks of the series' own light
sources."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import pytest
from click.testing import CliRunner

from holonograph.cli import cli
from ingest.store.clickhouse import ClickHouseStore
from processors.drift.job import DriftRequest, run_drift
from processors.series.cells import SelectionError
from schemas.analysis import DriftReport
from schemas.changelog import mark_availability, record_change
from schemas.changes import AvailabilityMark, ChangeRecord
from testkit.backends import migrated_store
from testkit.multiplex_series import MultiplexSurface, generate, write_rows

pytestmark = pytest.mark.clickhouse

BASE = MultiplexSurface(
    buckets=336, calls=(30, 40), change_at=168, recorded=False, fallback=0.0, tau=0.02, rho=0.5
)


def _drift(store: ClickHouseStore, spec: MultiplexSurface, **kw: object) -> DriftReport:
    write_rows(store, spec, generate(spec, seed=5), dt.datetime(2026, 6, 1))
    request = DriftRequest(spec.surface_id, spec.start, spec.until, **kw)  # type: ignore[arg-type]
    return run_drift(store, request)


def test_a_shift_the_observers_do_not_share_is_the_primary_vendor(
    store: ClickHouseStore,
) -> None:
    spec = dataclasses.replace(BASE, primary_rate=(0.85, 0.72))
    report = _drift(store, spec)
    (point,) = report.change_points
    assert point.effect.delta == pytest.approx(-0.13, abs=0.03)
    assert (point.source, point.confident) == ("light source", True)
    assert point.layer_changes == []  # nothing recorded changed: a silent change
    assert point.corroboration is not None and point.corroboration.surfaces_checked == []
    control = point.corroboration.observers
    assert control is not None and control.verdict == "vendor"
    assert control.observers == [spec.observer]
    assert control.calls_before > 1000 and control.calls_after > 1000
    assert control.contrast == pytest.approx(-0.13, abs=0.04)
    assert control.contrast_ci_low < -0.13 < control.contrast_ci_high
    assert control.contrast_p_value < 0.01 and control.observer_p_value > 0.05
    assert "observers on the same calls unchanged" in point.reason
    assert report.bracketed_windows == [] or all(
        b.reason != "unattributed" for b in report.bracketed_windows
    )


def test_a_shift_the_observers_share_is_the_inputs_not_the_vendor(
    store: ClickHouseStore,
) -> None:
    spec = dataclasses.replace(BASE, primary_rate=(0.85, 0.72), observer_rate=(0.80, 0.67))
    report = _drift(store, spec)
    (point,) = report.change_points
    assert point.source == "substrate" and point.confident is False
    assert point.corroboration is not None
    control = point.corroboration.observers
    assert control is not None and control.verdict == "shared"
    assert control.observer_step == pytest.approx(-0.13, abs=0.04)
    assert abs(control.contrast) < 0.05
    assert "observers on the same calls moved too" in point.reason
    assert [b.reason for b in report.bracketed_windows] == ["unattributed"]


def test_the_observer_series_has_no_observer_control_and_sees_no_change(
    store: ClickHouseStore,
) -> None:
    spec = dataclasses.replace(BASE, primary_rate=(0.85, 0.72))
    report = _drift(store, spec, role="observer")
    assert report.change_points == []
    assert report.series.role == "observer" and report.series.observers == [spec.observer]


def test_several_observers_are_several_series(store: ClickHouseStore) -> None:
    spec = dataclasses.replace(BASE, buckets=48, change_at=24)
    other = dataclasses.replace(
        spec, observer="gamma/q", observer_served="gamma/q/1", id_prefix="g"
    )
    write_rows(store, spec, generate(spec, seed=1), dt.datetime(2026, 6, 1))
    write_rows(store, other, generate(other, seed=2)[:50], dt.datetime(2026, 6, 1))
    request = DriftRequest(spec.surface_id, spec.start, spec.until, role="observer")
    with pytest.raises(SelectionError, match=r"2 observer light sources \(beta/o, gamma/q\)"):
        run_drift(store, request)
    named = run_drift(store, dataclasses.replace(request, light_source="gamma/q"))
    assert named.series.light_source == "gamma/q"
    assert named.event_count == sum(
        1 for c in generate(other, seed=2)[:50] for e in c.events if e.role == "observer"
    )


def test_the_cli_refuses_to_average_observers(tmp_path: Path) -> None:
    spec = dataclasses.replace(BASE, buckets=24, change_at=12)
    other = dataclasses.replace(
        spec, observer="gamma/q", observer_served="gamma/q/1", id_prefix="g"
    )
    with migrated_store(tmp_path / "store") as store:
        write_rows(store, spec, generate(spec, seed=1)[:40], dt.datetime(2026, 6, 1))
        write_rows(store, other, generate(other, seed=2)[:40], dt.datetime(2026, 6, 1))
    args = ["drift", "--surface", spec.surface_id, "--since", "2026-05-01T00:00:00Z",
            "--until", "2026-05-02T00:00:00Z", "--data-dir", str(tmp_path / "store"),
            "--no-save"]  # fmt: skip
    refused = CliRunner().invoke(cli, [*args, "--role", "observer"])
    assert refused.exit_code == 2
    assert "2 observer light sources (beta/o, gamma/q)" in refused.output
    assert "--light-source" in refused.output
    named = CliRunner().invoke(cli, [*args, "--role", "observer", "--light-source", "beta/o"])
    assert named.exit_code == 0, named.output
    assert "(observer series of beta/o)" in named.output


# --- recorded changes on a multiplexed surface (docs/changes.md) ---------------------

HOUR = dt.timedelta(hours=1)


def _record(store: ClickHouseStore, spec: MultiplexSurface, kind: str, at: dt.datetime) -> None:
    change = ChangeRecord.model_validate(
        {"surfaceId": spec.surface_id, "kind": kind, "at": at, "description": f"a {kind}"}
    )
    record_change(store, spec.tenant_id, change, at)


def _mark(store: ClickHouseStore, light_source: str, start: dt.datetime, hours: int) -> None:
    mark = AvailabilityMark.model_validate(
        {"mode": "paired", "lightSourceId": light_source, "unreachableFrom": start,
         "unreachableUntil": start + hours * HOUR, "reason": "vendor-outage"}
    )  # fmt: skip
    mark_availability(store, "default", mark, start + hours * HOUR)


def test_a_deploy_the_primary_shift_starts_at_is_substrate_though_the_observers_did_not_move(
    store: ClickHouseStore,
) -> None:
    """The observers on the same calls not moving does not contradict a recorded deploy
    (a prompt can suit one model and not another): substrate, confident, both cited."""
    spec = dataclasses.replace(BASE, primary_rate=(0.85, 0.72))
    _record(store, spec, "deploy", spec.start + spec.change_at * HOUR)
    report = _drift(store, spec)
    (point,) = report.change_points
    assert (point.source, point.confident) == ("substrate", True), point.reason
    assert "starts at a recorded change: deploy" in point.reason
    assert "the observers on the same calls did not move" in point.reason
    (cited,) = point.change_events
    assert cited.kind == "deploy" and cited.timing.starts_here
    assert point.corroboration is not None and point.corroboration.verdict == "vendor"
    assert point.effect.delta == pytest.approx(-0.13, abs=0.03)  # the primary's own shift
    assert [b.reason for b in report.bracketed_windows] == []


def test_a_vendor_change_the_observers_on_the_same_calls_shared_is_confounded(
    store: ClickHouseStore,
) -> None:
    """A recorded vendor change does not explain the observers moving as much on the
    same calls (their inputs did): confounded, not a confident light-source label."""
    spec = dataclasses.replace(BASE, primary_rate=(0.85, 0.72), observer_rate=(0.80, 0.67))
    _record(store, spec, "vendor", spec.start + spec.change_at * HOUR)
    report = _drift(store, spec)
    (point,) = report.change_points
    assert (point.source, point.confident) == ("light source", False), point.reason
    assert point.reason.startswith("confounded: starts at vendor")
    assert "the observers on the same calls moved too" in point.reason
    assert [c.kind for c in point.change_events] == ["vendor"]
    assert [b.reason for b in report.bracketed_windows] == ["confounded"]


def test_an_availability_mark_brackets_the_series_its_light_source_served(
    store: ClickHouseStore,
) -> None:
    """An observer's outage is no window of the primary's series (the observer answered
    none of its calls: no fallbacks here) but is one of the observer's series; an
    outage of the primary's alias is one of the primary's series, not the observer's."""
    spec = dataclasses.replace(BASE, buckets=72, change_at=36)
    write_rows(store, spec, generate(spec, seed=2), dt.datetime(2026, 6, 1))
    _mark(store, spec.observer, spec.start + 10 * HOUR, 3)
    _mark(store, spec.primary, spec.start + 40 * HOUR, 2)

    def windows(role: str) -> list[tuple[int, str]]:
        request = DriftRequest(spec.surface_id, spec.start, spec.until, role=role)  # type: ignore[arg-type]
        brackets = run_drift(store, request).bracketed_windows
        return [
            ((b.from_.replace(tzinfo=dt.UTC) - spec.start) // HOUR, b.detail)
            for b in brackets
            if b.reason == "availability"
        ]

    assert windows("primary") == [(40, f"{spec.primary} marked unavailable: vendor-outage")]
    assert windows("observer") == [(10, f"{spec.observer} marked unavailable: vendor-outage")]
    assert [at for at, _ in windows("all")] == [10, 40]
