"""`holonograph conformance derive|approve|reject|list|check|suite ...`.

Inputs (surfaces with tools and rules, fixtures, derive output, suites, recorded
events) are JSON or YAML files; `-` reads stdin. Exit codes: 0 ok, 1 a check failed or
a suite failed/regressed, 2 invalid input, 3 store unavailable.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import click
from pydantic import ValidationError

from holonograph.cli.jobs import (
    Rendering,
    job_limit_options,
    report_of,
    request_from,
    request_option,
    run_command,
)
from holonograph.cli.jobs import show as show_report
from holonograph.cli.options import (
    EXIT_FINDING,
    EXIT_USAGE,
    RFC3339,
    emit_json,
    format_table,
    open_store_or_exit,
    run_mode_option,
    store_options,
)
from holonograph.cli.tenants import owner_or_exit, tenant_option
from processors.conformance import approve as approval
from processors.conformance import check as checking
from processors.conformance import derive as deriving
from processors.conformance import record
from processors.conformance.check import CheckResult, Window, list_results
from processors.conformance.derive import Derivation
from processors.conformance.executors import (
    HarnessExecutor,
    RecordedExecutor,
    StoreExecutor,
    load_observations,
)
from processors.conformance.result import HarnessResult
from processors.conformance.runner import run_harness
from processors.conformance.suite import (
    RecordedSource,
    ResolvedFixture,
    StoreSource,
    SuiteError,
    SuiteResult,
    TrialSource,
    load_recorded_events,
    load_suite,
    parse_document,
    recorded_events,
    resolve_approved,
    run_suite,
    select_events,
    validation_problems,
)
from schemas.conformance import (
    MAX_RECORDED_EVENTS,
    VERDICT_ORDER,
    Fixture,
    RejectionRequest,
)
from schemas.harness import Suite
from schemas.store import Store


def _fail_input(problems: list[str], source: str) -> NoReturn:
    click.echo(f"error: {source} is invalid:", err=True)
    for problem in problems:
        click.echo(f"  - {problem}", err=True)
    sys.exit(EXIT_USAGE)


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text()
    except OSError as err:
        raise click.BadParameter(f"cannot read {path}: {err.strerror}") from None


def _document(path: str) -> Any:
    try:
        return parse_document(_read(path), path)
    except SuiteError as err:
        _fail_input(err.problems, path)


def _validate(model: Any, document: Any, source: str) -> Any:
    try:
        return model.model_validate(document)
    except ValidationError as err:
        _fail_input(validation_problems(err), source)


@click.group("conformance")
def conformance() -> None:
    """Derive fixtures from prose rules, approve them, check them, gate CI on suites."""


# --- derive -----------------------------------------------------------------------------


@conformance.command("derive")
@click.argument("surface_file")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Also write the JSON here.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON on stdout.")
def derive_command(surface_file: str, output: str | None, as_json: bool) -> None:
    """Propose one candidate fixture per rule of SURFACE_FILE (surfaceId, tools, rules)."""
    request = _validate(deriving.Request, _document(surface_file), surface_file)
    (result,) = report_of(deriving.JOB, [request], None, None)
    if output:
        Path(output).write_text(json.dumps(result.to_json(), indent=2, ensure_ascii=False) + "\n")
    show_report(result, Rendering(_derivation_text), as_json)


def _derivation_text(result: Derivation) -> str:
    rows = [
        [c.rule_id, c.enforceability, c.fixture.fixture_id if c.fixture else "-", c.rule]
        for c in result.candidates
    ]
    lines = [format_table(["rule", "enforceability", "fixture", "text"], rows), ""]
    for c in result.candidates:
        if c.explanation:
            lines.append(f"{c.rule_id}: {c.explanation}")
        lines += [f"  caveat: {caveat}" for caveat in c.caveats]
    lines.append(f"\ncoverage: {result.coverage_line}")
    for repair in result.needs_repair:
        lines.append(f"needs repair {repair.rule_id}: {repair.why}\n  rephrase: {repair.rephrase}")
    return "\n".join(lines)


# --- approve / reject / list ------------------------------------------------------------


def _fixtures_from(document: Any, source: str, only: tuple[str, ...], take_all: bool) -> list[Any]:
    """Fixtures from a fixture, a list or {fixtures: [...]}, an approval request or derive
    output; ids must be unique."""
    if isinstance(document, dict) and "candidates" in document:
        found = [c["fixture"] for c in document["candidates"] if c.get("fixture")]
        if not only and not take_all:
            raise click.UsageError(
                "derive output holds several candidates: pick them with --fixture-id or --all"
            )
    elif isinstance(document, dict) and "fixtures" in document:
        found = list(document["fixtures"])
    elif isinstance(document, list):
        found = document
    elif isinstance(document, dict) and "fixture" in document:
        found = [document["fixture"]]
    else:
        found = [document]
    fixtures = [_validate(Fixture, f, source) for f in found]
    ids = [f.fixture_id for f in fixtures]
    if len(set(ids)) != len(ids):
        _fail_input([f"duplicate fixtureId in {source}"], source)
    if only:
        missing = set(only) - {f.fixture_id for f in fixtures}
        if missing:
            raise click.UsageError(f"not in {source}: {', '.join(sorted(missing))}")
        fixtures = [f for f in fixtures if f.fixture_id in only]
    return fixtures


def _request_defaults(document: Any, source: str) -> dict[str, Any]:
    """approverId/sourceSurfaceId/comment from an approval body (unknown keys refused)."""
    if isinstance(document, dict) and "fixture" in document:
        unknown = set(document) - {"approverId", "sourceSurfaceId", "fixture", "comment"}
        if unknown:
            _fail_input([f"{k}: Extra inputs are not permitted" for k in sorted(unknown)], source)
        return {
            k: document[k] for k in ("approverId", "sourceSurfaceId", "comment") if k in document
        }
    return {}


def _record_rows(records: list[approval.FixtureRecord]) -> list[list[Any]]:
    return [
        [r.fixture_id, r.version, r.action, r.surface_id, r.enforceability, r.approver_id,
         r.recorded_at, r.comment or ""]
        for r in records
    ]  # fmt: skip


RECORD_COLUMNS = ["fixture", "version", "action", "surface", "enforceability", "approver",
                  "recorded", "comment"]  # fmt: skip


def _decide(
    action: str,
    fixture_file: str,
    approver: str | None,
    source_surface: str | None,
    comment: str | None,
    only: tuple[str, ...],
    take_all: bool,
    tenant: str | None,
    store_url: str | None,
    data_dir: str | None,
    as_json: bool,
) -> None:
    document = _document(fixture_file)
    fixtures = _fixtures_from(document, fixture_file, only, take_all)
    defaults = _request_defaults(document, fixture_file)
    approver = approver or defaults.get("approverId")
    comment = comment or defaults.get("comment")
    if not approver:
        raise click.UsageError("--approver is required (who takes responsibility)")
    if action == "reject" and not comment:
        raise click.UsageError("--comment is required to reject")
    model = approval.Request if action == "approve" else RejectionRequest
    requests = [
        _validate(
            model,
            {
                "approverId": approver,
                "sourceSurfaceId": source_surface
                or defaults.get("sourceSurfaceId")
                or fx.surface_id,
                "fixture": fx.to_json(),
                **({"comment": comment} if comment else {}),
            },
            fixture_file,
        )
        for fx in fixtures
    ]
    if action == "approve":
        scoped = [r.for_tenant(tenant) for r in requests]
        outcomes = report_of(approval.JOB, scoped, store_url, data_dir)
    else:
        store = open_store_or_exit(store_url, data_dir, write=True)
        owner = owner_or_exit(store, tenant)
        try:
            outcomes = [approval.reject(store, r, tenant_id=owner) for r in requests]
        finally:
            store.close()
    if as_json:
        emit_json([o.to_json() for o in outcomes])
        return
    click.echo(format_table(RECORD_COLUMNS, _record_rows([o.record for o in outcomes])))
    for outcome in outcomes:
        state = "recorded" if outcome.created else "unchanged (already in force)"
        click.echo(f"{outcome.record.fixture_id}: {state}, eventId {outcome.record.record_id}")


def _decision_options(func: Any) -> Any:
    func = click.option(
        "--all", "take_all", is_flag=True, help="Every candidate of derive output."
    )(func)
    func = click.option("--fixture-id", "only", multiple=True, help="Only these fixtures.")(func)
    func = click.option("--comment", help="Why (required to reject).")(func)
    func = click.option("--source-surface", help="Surface the fixture was derived from.")(func)
    func = click.option("--approver", help="Approver id (or approverId in the file).")(func)
    return tenant_option(func)


@conformance.command("approve")
@click.argument("fixture_file")
@_decision_options
@job_limit_options
@store_options
def approve_command(fixture_file: str, **options: Any) -> None:
    """Approve fixtures: each becomes an immutable, versioned record; checks run it."""
    _decide("approve", fixture_file, **options)


@conformance.command("reject")
@click.argument("fixture_file")
@_decision_options
@job_limit_options
@store_options
def reject_command(fixture_file: str, **options: Any) -> None:
    """Reject fixtures with a comment; a live fixture stops running."""
    _decide("reject", fixture_file, **options)


@conformance.command("list")
@click.option("--surface", help="Only this surface's fixtures.")
@click.option("--fixture-id", help="Every version of one fixture.")
@click.option("--all-versions", is_flag=True, help="Every record, not only the newest per fixture.")
@click.option("--show-fixture", is_flag=True, help="Include the fixture JSON (always in --json).")
@tenant_option
@store_options
def list_command(
    surface: str | None,
    fixture_id: str | None,
    all_versions: bool,
    show_fixture: bool,
    tenant: str | None,
    store_url: str | None,
    data_dir: str | None,
    as_json: bool,
) -> None:
    """Approved and rejected fixtures with their versions."""
    store = open_store_or_exit(store_url, data_dir, write=False)
    owner = owner_or_exit(store, tenant)
    try:
        if fixture_id:
            records = approval.history(store, fixture_id, owner)
        else:
            records = approval.list_fixtures(
                store, surface, all_versions=all_versions, tenant_id=owner
            )
    finally:
        store.close()
    if as_json:
        emit_json([r.to_json() for r in records])
        return
    click.echo(format_table(RECORD_COLUMNS, _record_rows(records)))
    if show_fixture:
        for r in records:
            click.echo(f"\n{r.fixture_id} v{r.version}:")
            emit_json(r.fixture.to_json())


# --- check ------------------------------------------------------------------------------


def _check_rows(results: tuple[CheckResult, ...]) -> list[list[Any]]:
    return [
        [r.fixture.fixture_id, r.fixture_version or "inline", r.verdict, r.events_checked]
        + [r.counts[v] for v in VERDICT_ORDER]
        + ["-" if r.evaluable_share is None else f"{r.evaluable_share:.0%}"]
        for r in results
    ]


Check = checking.Request


@conformance.command("check")
@request_option(Check, "fixture_id", "--fixture-id")
@click.option("--fixture", "fixture_file", help="An inline fixture file (not yet approved).")
@request_option(Check, "surface_id", "--surface")
@request_option(Check, "since", "--since")
@request_option(Check, "until", "--until")
@request_option(Check, "run_modes", "--run-mode")
@request_option(Check, "offset", "--offset")
@request_option(Check, "limit", "--limit")
@request_option(Check, "verdicts", "--verdict")
@request_option(Check, "persist", "--persist/--no-persist")
@tenant_option
@job_limit_options
@store_options
def check_command(
    fixture_file: str | None,
    tenant: str | None,
    store_url: str | None,
    data_dir: str | None,
    as_json: bool,
    **flags: Any,
) -> None:
    """Check fixtures over a window; exit 1 when a top-level verdict is fail, 2 when
    the surface has no live fixture (nothing would be checked)."""
    inline = _validate(Fixture, _document(fixture_file), fixture_file) if fixture_file else None
    request = request_from(Check, {**flags, "fixture": inline, "tenant": tenant})
    rendering = Rendering(_check_text)
    run_command(
        checking.JOB, request, rendering, store_url=store_url, data_dir=data_dir, as_json=as_json
    )


def _check_text(report: checking.Report) -> str:
    results = report.results
    window = results[0].window
    lines = [f"window {window.since.isoformat()} .. {window.until.isoformat()}"]
    columns = ["fixture", "version", "verdict", "events", *VERDICT_ORDER, "evaluable"]
    lines.append(format_table(columns, _check_rows(results)))
    for r in results:
        if r.events:
            first, last = r.page_offset + 1, r.page_offset + len(r.events)
            lines.append(f"\n{r.fixture.fixture_id}: events {first}..{last}")
            lines.append(
                format_table(
                    ["event", "timestamp", "verdict", "when", "assertions"],
                    [
                        [
                            e.event_id,
                            e.timestamp,
                            e.verdict,
                            ",".join(e.when),
                            ",".join(e.assertions),
                        ]
                        for e in r.events
                    ],
                )
            )
    return "\n".join(lines)


@conformance.command("results")
@click.option("--surface", help="Only this surface.")
@click.option("--fixture-id", help="Only this fixture.")
@click.option("--since", type=RFC3339(), help="Checked at or after (inclusive).")
@click.option("--until", type=RFC3339(), help="Checked before (exclusive).")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000))
@tenant_option
@store_options
def results_command(
    surface: str | None,
    fixture_id: str | None,
    since: dt.datetime | None,
    until: dt.datetime | None,
    limit: int,
    tenant: str | None,
    store_url: str | None,
    data_dir: str | None,
    as_json: bool,
) -> None:
    """Persisted check results, newest first: conformance over time."""
    store = open_store_or_exit(store_url, data_dir, write=False)
    owner = owner_or_exit(store, tenant)
    try:
        rows = list_results(
            store, surface_id=surface, fixture_id=fixture_id, since=since, until=until,
            limit=limit, tenant_id=owner,
        )  # fmt: skip
    finally:
        store.close()
    if as_json:
        emit_json(rows)
        return
    columns = ["checked", "fixture", "version", "verdict", "events", *VERDICT_ORDER, "evaluable"]
    table = [
        [r["checkedAt"], r["fixtureId"], r["fixtureVersion"] or "inline", r["verdict"],
         r["eventsChecked"], *r["counts"].values(),
         "-" if r["evaluableShare"] is None else f"{r['evaluableShare']:.0%}"]
        for r in rows
    ]  # fmt: skip
    click.echo(format_table(columns, table))


# --- suites -----------------------------------------------------------------------------


@conformance.group("suite")
def suite_group() -> None:
    """Harness conformance suites (harness-conformance-suite/v1) for CI gates."""


def _load_suite(path: str) -> Any:
    try:
        return load_suite(_read(path), path)
    except SuiteError as err:
        _fail_input(err.problems, path)


@suite_group.command("validate")
@click.argument("suite_file")
@click.option("--json", "as_json", is_flag=True, help="Print the normalized suite as JSON.")
def suite_validate(suite_file: str, as_json: bool) -> None:
    """Load a suite and enforce its limits without running it."""
    suite = _load_suite(suite_file)
    if as_json:
        emit_json(suite.to_json())
    else:
        combos = f"{len(suite.combinations)} combinations, " if suite.combinations else ""
        scenarios = len(suite.scenarios)
        click.echo(
            f"{suite.suite_id} r{suite.revision}: {combos}{scenarios} scenarios,"
            f" {suite.trials()} trials: ok"
        )


def _approved(
    store: Store, suite: Suite, suite_file: str, tenant: str
) -> dict[str, ResolvedFixture]:
    try:
        return resolve_approved(suite, approval.store_fixture_lookup(store, tenant))
    except SuiteError as err:
        _fail_input(err.problems, suite_file)  # the caller closes the store on the way out


@suite_group.command("run")
@click.argument("suite_file")
@click.option("--events", "events_file", help="Recorded events file instead of the store.")
@click.option(
    "--observations",
    "observations_file",
    help="Recorded harness observations (a suite with combinations) instead of the store.",
)
@click.option(
    "--allow-credential-gated",
    is_flag=True,
    help="Also run combinations the suite marks credentialGated (never enabled by the suite).",
)
@click.option(
    "--persist/--no-persist",
    default=True,
    help="Store a combinations run's results when a store is given (default: persist).",
)
@click.option(
    "--since", type=RFC3339(), help="Window start, inclusive (store default until - 24h)."
)
@click.option("--until", type=RFC3339(), help="Window end, exclusive (store default now).")
@run_mode_option
@tenant_option
@store_options
def suite_run(
    suite_file: str,
    events_file: str | None,
    observations_file: str | None,
    allow_credential_gated: bool,
    persist: bool,
    since: dt.datetime | None,
    until: dt.datetime | None,
    run_modes: tuple[str, ...],
    tenant: str | None,
    store_url: str | None,
    data_dir: str | None,
    as_json: bool,
) -> None:
    """Run a suite; exit 1 on any failure, missing evidence, regression or disallowed
    verdict. A suite with combinations plays back `--observations` or reduces the
    store's traffic per combination. Fixtures the suite lists under `approvedFixtures`
    come from the store (with `--events` too, which then needs `--store` or
    `--data-dir`)."""
    suite = _load_suite(suite_file)
    now = dt.datetime.now(dt.UTC)
    if suite.combinations:
        if events_file is not None:
            raise click.UsageError(
                "a suite with combinations runs on --observations or over the store, not --events"
            )
        lane = HarnessLane(observations_file, allow_credential_gated, persist)
        store_at = StoreAt(store_url, data_dir, tenant, since, until, run_modes)
        harness = _run_harness(suite, lane, store_at, now)
        if as_json:
            emit_json(harness.to_json())
        else:
            _print_harness(harness)
        if not harness.passed:
            sys.exit(EXIT_FINDING)
        return
    if observations_file is not None or allow_credential_gated:
        raise click.UsageError(
            "--observations and --allow-credential-gated apply to a suite with combinations"
        )
    if events_file is not None:
        try:
            events = load_recorded_events(_read(events_file), events_file)
        except SuiteError as err:
            _fail_input(err.problems, events_file)
        source: TrialSource = RecordedSource(events, events_file, since, until)
        if not suite.approved_fixtures:
            result = run_suite(suite, source, now)
        elif store_url is None and data_dir is None:
            raise click.UsageError(
                "the suite lists approvedFixtures: give --store or --data-dir to resolve them"
            )
        else:
            store = open_store_or_exit(store_url, data_dir, write=False)
            owner = owner_or_exit(store, tenant)
            try:
                approved = _approved(store, suite, suite_file, owner)
                result = run_suite(suite, source, now, approved)
            finally:
                store.close()
    else:
        try:
            window = Window.resolve(since, until, lambda: now)
        except ValueError as err:
            raise click.UsageError(str(err)) from None
        store = open_store_or_exit(store_url, data_dir, write=False)
        owner = owner_or_exit(store, tenant)
        try:
            source = StoreSource(store, window.since, window.until, run_modes, owner)
            result = run_suite(suite, source, now, _approved(store, suite, suite_file, owner))
        finally:
            store.close()
    if as_json:
        emit_json(result.to_json())
    else:
        _print_suite(result)
    if not result.passed:
        sys.exit(EXIT_FINDING)


@suite_group.command("record")
@click.option("--surface", "surfaces", multiple=True, required=True, help="Surface(s) to record.")
@click.option("--since", type=RFC3339(), help="Window start, inclusive (default until - 24h).")
@click.option("--until", type=RFC3339(), help="Window end, exclusive (default now).")
@click.option("--fixture-id", help="Only events produced by this fixture (holonograph.fixture.id).")
@run_mode_option
@click.option("--marker", "markers", multiple=True, help="Keep only these markers (default all).")
@click.option(
    "--limit",
    default=500,
    show_default=True,
    type=click.IntRange(1, MAX_RECORDED_EVENTS),
    help="Most recent events per surface.",
)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write here, not stdout.")
@click.option(
    "--store", "store_url", envvar="HOLONOGRAPH_STORE", help="chdb:///path or http(s)://."
)
@click.option("--data-dir", envvar="HOLONOGRAPH_DATA_DIR", type=click.Path(file_okay=False))
@tenant_option
def suite_record(
    surfaces: tuple[str, ...],
    since: dt.datetime | None,
    until: dt.datetime | None,
    fixture_id: str | None,
    run_modes: tuple[str, ...],
    markers: tuple[str, ...],
    limit: int,
    output: str | None,
    store_url: str | None,
    data_dir: str | None,
    tenant: str | None,
) -> None:
    """Write a window of stored events as a recorded-events file for `suite run --events`
    (refused when it would hold secret-like text)."""
    try:
        window = Window.resolve(since, until, lambda: dt.datetime.now(dt.UTC))
    except ValueError as err:
        raise click.UsageError(str(err)) from None
    store = open_store_or_exit(store_url, data_dir, write=False)
    owner = owner_or_exit(store, tenant)
    try:
        trials = [
            t
            for surface in surfaces
            for t in select_events(store, surface, window.since, window.until,
                                   fixture_id=fixture_id, run_modes=run_modes, limit=limit,
                                   tenant_id=owner)
        ]  # fmt: skip
    finally:
        store.close()
    if len(trials) > MAX_RECORDED_EVENTS:
        raise click.UsageError(f"{len(trials)} events exceed {MAX_RECORDED_EVENTS}: lower --limit")
    try:
        document = recorded_events(trials, markers)
    except SuiteError as err:
        _fail_input(err.problems, "the recorded events")
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    if output:
        Path(output).write_text(text)
        click.echo(f"{len(trials)} events written to {output}", err=True)
    else:
        click.echo(text, nl=False)


@dataclass(frozen=True)
class HarnessLane:
    observations_file: str | None
    allow_credential_gated: bool
    persist: bool


@dataclass(frozen=True)
class StoreAt:
    url: str | None
    data_dir: str | None
    tenant: str | None
    since: dt.datetime | None
    until: dt.datetime | None
    run_modes: tuple[str, ...]

    @property
    def given(self) -> bool:
        return self.url is not None or self.data_dir is not None


def _run_harness(suite: Suite, lane: HarnessLane, at: StoreAt, now: dt.datetime) -> HarnessResult:
    """The recorded lane (persisted when a store is given) or the store lane."""
    progress = None if not sys.stderr.isatty() else (lambda s: click.echo(f"... {s}", err=True))
    allow = lane.allow_credential_gated
    if lane.observations_file is not None:
        path = lane.observations_file
        try:
            recorded = load_observations(_read(path), path)
        except SuiteError as err:
            _fail_input(err.problems, path)
        if recorded.suite_id is not None and recorded.suite_id != suite.suite_id:
            _fail_input([f"observations of suite {recorded.suite_id}, not {suite.suite_id}"], path)
        playback = RecordedExecutor(recorded, path)
        if playback.strays(suite):
            _fail_input(playback.strays(suite)[:20], path)
        executor: HarnessExecutor = playback
        result = run_harness(suite, executor, now, allow_credential_gated=allow, progress=progress)
        if lane.persist and at.given:
            store = open_store_or_exit(at.url, at.data_dir, write=True)
            try:
                record.persist(store, result, owner_or_exit(store, at.tenant))
            finally:
                store.close()
        return result
    try:
        window = Window.resolve(at.since, at.until, lambda: now)
    except ValueError as err:
        raise click.UsageError(str(err)) from None
    store = open_store_or_exit(at.url, at.data_dir, write=lane.persist)
    try:
        owner = owner_or_exit(store, at.tenant)
        executor = StoreExecutor(store, window.since, window.until, at.run_modes, owner)
        result = run_harness(suite, executor, now, allow_credential_gated=allow, progress=progress)
        if lane.persist:
            record.persist(store, result, owner)
    finally:
        store.close()
    return result


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _print_harness(result: HarnessResult) -> None:
    out = result.to_json()
    rows = []
    for combo in out["combinations"]:
        if combo["status"] == "skipped":
            rows.append([combo["combinationId"], "*", "-", "skipped", "-", "-", "-", "-", "-",
                         "-", "-", "-", "credential-gated"])  # fmt: skip
        for c in combo["scenarios"]:
            rate = "-" if c["passRate"] is None else f"{c['passRate']:.0%}"
            classes = ", ".join(f"{k} {v}" for k, v in sorted(c["failureClasses"].items()))
            rows.append([combo["combinationId"], c["scenarioId"], c["tier"], c["status"],
                         f"{c['trialsRun']}/{c['repetitions']}", rate, _num(c["latency"]["meanMs"]),
                         _num(c["latency"]["p95Ms"]), _num(c["latency"]["sdMs"]),
                         _num(c["tokens"]["total"], 0), _num(c["costUsd"]["total"], 6),
                         c["retries"]["total"], classes or "-"])  # fmt: skip
    columns = ["combination", "scenario", "tier", "status", "trials", "pass", "mean ms",
               "p95 ms", "sd ms", "tokens", "cost $", "retries", "failure classes"]  # fmt: skip
    click.echo(format_table(columns, rows))
    for claim in out["claims"]:
        per = ", ".join(f"{k} {v}" for k, v in claim["combinations"].items())
        click.echo(f"claim {claim['claimId']} ({claim['capability']}): {per}")
    for line in out["failures"]:
        click.echo(f"FAIL {line}")
    for r in out["regressions"]:
        click.echo(f"REGRESSION {r['reason']}")
    status = "passed" if result.passed else "FAILED"
    click.echo(f"suite {result.suite.suite_id} r{result.suite.revision}: {status}")


def _print_suite(result: SuiteResult) -> None:
    rows = []
    for r in result.scenarios:
        out = r.to_json()
        rate = "-" if out["passRate"] is None else f"{out['passRate']:.0%}"
        rows.append([out["scenarioId"], out["tier"], out["status"],
                     f"{out['trialsFound']}/{out['repetitions']}", rate,
                     out["meanLatencyMs"], out["p95LatencyMs"], out["totalCostUsd"]])  # fmt: skip
    columns = ["scenario", "tier", "status", "trials", "pass", "mean ms", "p95 ms", "cost $"]
    click.echo(format_table(columns, rows))
    for fixture in result.approved:
        click.echo(
            f"approved fixture {fixture.fixture.fixture_id} v{fixture.version} from the store"
        )
    for line in result.failures:
        click.echo(f"FAIL {line}")
    for line in result.regressions:
        click.echo(f"REGRESSION {line}")
    status = "passed" if result.passed else "FAILED"
    click.echo(f"suite {result.suite.suite_id} r{result.suite.revision}: {status}")


def register(group: click.Group) -> None:
    group.add_command(conformance)
