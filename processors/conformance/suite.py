"""Harness conformance suites (`harness-conformance-suite/v1`): CI gates that fail closed.

A suite is declarative and bounded (see `schemas.conformance.Suite`): scenarios select
recorded events of a surface as trials, assert fixtures and inline assertions on each,
and compare pass rate, p95 latency and mean cost with per-surface baselines. Loading
rejects unknown fields, over-limit sizes, YAML aliases and secret-like text before
anything runs; nothing in a suite is ever executed. Running reads the most recent
`repetitions` events per scenario from the store (a window) or from a file of recorded
events (the credential-free lane) and passes only when every gating scenario has all
its trials, no trial failed, every non-pass verdict is one the scenario allows, and no
baseline regressed.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from processors.conformance.baselines import Unit, regressions
from processors.conformance.eval import DimensionView, EventView, evaluate_event
from processors.conformance.reduce import Reductions, p95
from schemas.conformance import VERDICT_ORDER, Fixture, RecordedEvents, Verdict, strongest
from schemas.events import DEFAULT_TENANT
from schemas.harness import (
    MAX_TRIALS,
    SUITE_RESULT_SCHEMA,
    Baseline,
    CombinationSelect,
    Scenario,
    Suite,
)
from schemas.placement import placed_in
from schemas.store import Store
from schemas.tables import EVALUATION_DIMENSIONS, EVALUATION_EVENTS
from schemas.times import from_store_time

MAX_DOCUMENT_BYTES = 512 * 1024
TrialStatus = Literal["passed", "failed", "disallowed", "tolerated"]
SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern))
    for name, pattern in (
        ("private key", r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
        ("bearer token", r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{16,}"),
        ("API key (sk-...)", r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}"),
        ("AWS access key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
        ("GitHub token", r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
        ("Slack token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
        ("Google API key", r"\bAIza[0-9A-Za-z_-]{35}"),
        ("JSON web token", r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),
        (
            "credential assignment",
            r"(?i)\b(?:api[_-]?key|secret|password|passwd|access[_-]?token|auth[_-]?token)"
            r"\s*[:=]\s*\S{8,}",
        ),
        ("credentials in a URL", r"://[^/\s:@]+:[^/\s@]+@"),
    )
)


class SuiteError(ValueError):
    """A suite or events document that must not run; `problems` lists every reason."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)


# --- loading ----------------------------------------------------------------------------


def parse_document(text: str, name: str = "document") -> Any:
    """JSON or YAML (safe subset, no aliases), size-bounded."""
    if len(text.encode()) > MAX_DOCUMENT_BYTES:
        raise SuiteError([f"{name} is larger than {MAX_DOCUMENT_BYTES} bytes"])
    if text.lstrip().startswith(("{", "[")):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            pass  # YAML flow style also starts with a brace
    try:
        if any(isinstance(e, yaml.AliasEvent) for e in yaml.parse(text, Loader=yaml.SafeLoader)):
            raise SuiteError([f"{name}: YAML aliases are not allowed"])
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise SuiteError([f"{name} is neither valid JSON nor YAML: {err}"]) from None


def find_secrets(value: Any, path: str = "$") -> list[str]:
    """Paths of secret-like strings (keys included); the secrets themselves are not echoed."""
    found: list[str] = []
    if isinstance(value, str):
        found += [f"{path}: secret-like text ({n})" for n, p in SECRET_PATTERNS if p.search(value)]
    elif isinstance(value, Mapping):
        for key, item in value.items():
            found += find_secrets(str(key), f"{path}.<key>")
            found += find_secrets(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += find_secrets(item, f"{path}[{i}]")
    return found


def validation_problems(err: ValidationError) -> list[str]:
    return [f"{'.'.join(str(p) for p in e['loc']) or '$'}: {e['msg']}" for e in err.errors()[:50]]


def suite_digest(suite: Suite) -> str:
    """sha256 of the normalized suite: which exact suite version produced a result."""
    canonical = json.dumps(suite.to_json(), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


ModelT = TypeVar("ModelT", bound=BaseModel)


def load_screened(model: type[ModelT], text: str, name: str) -> ModelT:
    """Parse, screen for secrets, and validate a document as `model`; SuiteError lists
    the problems (a suite and a recording of observations are screened alike)."""
    document = parse_document(text, name)
    secrets = find_secrets(document)
    if secrets:
        raise SuiteError(secrets)
    try:
        return model.model_validate(document)
    except ValidationError as err:
        raise SuiteError(validation_problems(err)) from None


def load_suite(text: str, name: str = "suite") -> Suite:
    """Parse, screen for secrets, and validate a suite; SuiteError lists the problems."""
    return load_screened(Suite, text, name)


def _parse_time(text: str) -> dt.datetime:
    parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError(f"{text!r} has no UTC offset")
    return parsed.astimezone(dt.UTC)


@dataclass(frozen=True)
class Trial:
    """One recorded event as a scenario trial."""

    view: EventView
    timestamp: dt.datetime
    surface_id: str
    fixture_id: str
    run_mode: str = "test"
    tokens: int | None = None  # input + output, when the store recorded either
    emission_seq: int | None = None


def load_recorded_events(text: str, name: str = "events") -> list[Trial]:
    """Validate a recorded-events file; like a suite, it must hold no secret-like text."""
    document = parse_document(text, name)
    secrets = find_secrets(document)
    if secrets:
        raise SuiteError(secrets)
    try:
        recorded = RecordedEvents.model_validate(document)
        trials = []
        for e in recorded.events:
            dims = {d.dimension_id: DimensionView(d.passed, d.score, d.judge) for d in e.dimensions}
            ts = _parse_time(e.timestamp)
            view = EventView(
                e.event_id, ts, e.markers, e.cohort_tags, e.latency_ms, e.cost_usd, dims
            )
            trials.append(Trial(view, ts, e.surface_id, e.fixture_id, e.run_mode))
    except ValidationError as err:
        raise SuiteError(validation_problems(err)) from None
    except ValueError as err:
        raise SuiteError([f"{name}: {err}"]) from None
    return trials


# --- event sources ----------------------------------------------------------------------


class TrialSource(Protocol):
    def trials(self, scenario: Scenario) -> list[Trial]:
        """The scenario's most recent events, at most `repetitions`, oldest first."""
        ...

    def describe(self) -> dict[str, Any]: ...


@dataclass
class RecordedSource:
    """A file of recorded events: the credential-free lane."""

    events: list[Trial]
    path: str = ""
    since: dt.datetime | None = None
    until: dt.datetime | None = None

    def trials(self, scenario: Scenario) -> list[Trial]:
        chosen = [
            t
            for t in self.events
            if t.surface_id == scenario.surface_id
            and (scenario.select.fixture_id is None or t.fixture_id == scenario.select.fixture_id)
            and (
                scenario.select.cohort_tag is None
                or scenario.select.cohort_tag in t.view.cohort_tags
            )
            and (self.since is None or t.timestamp >= self.since)
            and (self.until is None or t.timestamp < self.until)
        ]
        chosen.sort(key=lambda t: (t.timestamp, t.view.event_id))
        return chosen[-scenario.repetitions :]

    def describe(self) -> dict[str, Any]:
        return {"kind": "file", "path": self.path, "since": self.since, "until": self.until}


def select_events(
    store: Store,
    surface_id: str,
    since: dt.datetime,
    until: dt.datetime,
    *,
    fixture_id: str | None = None,
    cohort_tag: str | None = None,
    run_modes: Sequence[str] = (),
    limit: int = MAX_TRIALS,
    tenant_id: str = DEFAULT_TENANT,
    slice_: CombinationSelect | None = None,
) -> list[Trial]:
    """The most recent `limit` events of a tenant's surface in [since, until), oldest
    first; with `slice_`, only a combination's traffic (light source, lens version,
    substrate values)."""
    filters = [
        "tenant_id = {tenant:String}",
        "surface_id = {surface:String}",
        "timestamp >= {since:DateTime64(6, 'UTC')}",
        "timestamp < {until:DateTime64(6, 'UTC')}",
        placed_in(since="{since:DateTime64(6, 'UTC')}", until="{until:DateTime64(6, 'UTC')}"),
    ]
    if fixture_id is not None:
        filters.append("fixture_id = {fixture_id:String}")
    if cohort_tag is not None:
        filters.append("has(cohort_tags, {cohort_tag:String})")
    if run_modes:
        filters.append("run_mode IN {run_modes:Array(String)}")
    slice_params: dict[str, Any] = {}
    if slice_ is not None:
        if slice_.light_source_id is not None:
            filters.append("light_source_id = {light_source:String}")
            slice_params["light_source"] = slice_.light_source_id
        if slice_.lens_version is not None:
            filters.append("lens_version = {lens_version:String}")
            slice_params["lens_version"] = slice_.lens_version
        for i, (key, value) in enumerate(sorted(slice_.substrate.items())):
            filters.append(f"substrate[{{sk{i}:String}}] = {{sv{i}:String}}")
            slice_params |= {f"sk{i}": key, f"sv{i}": value}
    sql = f"""
        SELECT e.event_id, e.timestamp, e.markers, e.cohort_tags, e.latency_ms, e.cost_usd,
               e.fixture_id, e.run_mode, d.dims, e.tokens, e.emission_seq
        FROM (
            SELECT event_id, timestamp, markers, cohort_tags, latency_ms, cost_usd, fixture_id,
                   run_mode, if(isNull(tokens_input) AND isNull(tokens_output), NULL,
                                ifNull(tokens_input, 0) + ifNull(tokens_output, 0)) AS tokens,
                   emission_seq
            FROM {EVALUATION_EVENTS.qualified} FINAL WHERE {" AND ".join(filters)}
            ORDER BY timestamp DESC, event_id DESC LIMIT {{limit:UInt32}}
        ) AS e
        LEFT JOIN (
            SELECT event_id, groupArray(tuple(dimension_id, passed, score, judge)) AS dims
            FROM {EVALUATION_DIMENSIONS.qualified} FINAL WHERE {" AND ".join(filters[:5])}
            GROUP BY event_id
        ) AS d ON e.event_id = d.event_id
        ORDER BY e.timestamp, e.event_id"""
    parameters = {
        "tenant": tenant_id,
        "surface": surface_id,
        "since": since,
        "until": until,
        "fixture_id": fixture_id,
        "cohort_tag": cohort_tag,
        "run_modes": list(run_modes),
        "limit": limit,
        **slice_params,
    }
    trials = []
    for row in store.query(sql, parameters).rows:
        event_id, ts, markers, tags, latency, cost, fixture, run_mode, dims, tokens, seq = row
        ts = from_store_time(ts)
        views = {d[0]: DimensionView(d[1], d[2], d[3]) for d in dims}
        view = EventView(event_id, ts, markers, tags, latency, cost, views)
        tokens = None if tokens is None else int(tokens)
        trials.append(Trial(view, ts, surface_id, fixture, run_mode, tokens, int(seq)))
    return trials


@dataclass
class StoreSource:
    """A window [since, until) of one tenant's events in the store."""

    store: Store
    since: dt.datetime
    until: dt.datetime
    run_modes: Sequence[str] = ()
    tenant_id: str = DEFAULT_TENANT

    def trials(self, scenario: Scenario, slice_: CombinationSelect | None = None) -> list[Trial]:
        """With `slice_`, only that combination's traffic (the harness store lane)."""
        return select_events(
            self.store,
            scenario.surface_id,
            self.since,
            self.until,
            fixture_id=scenario.select.fixture_id,
            cohort_tag=scenario.select.cohort_tag,
            run_modes=self.run_modes,
            limit=scenario.repetitions,
            tenant_id=self.tenant_id,
            slice_=slice_,
        )

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "store",
            "tenantId": self.tenant_id,
            "since": self.since,
            "until": self.until,
            "runModes": list(self.run_modes) or None,
        }


def recorded_events(trials: Sequence[Trial], markers: Sequence[str] = ()) -> dict[str, Any]:
    """A `holonograph-recorded-events/v1` document for the credential-free lane; with
    `markers`, only those markers are kept (leave private text out of committed files).
    Refuses (SuiteError) when the result holds secret-like text."""
    events = []
    for t in trials:
        kept = {k: list(v) for k, v in t.view.markers.items() if not markers or k in markers}
        dims = [
            {"dimensionId": k, "passed": d.passed, "score": d.score, "judge": d.judge}
            for k, d in t.view.dimensions.items()
        ]
        event = {
            "eventId": t.view.event_id,
            "surfaceId": t.surface_id,
            "timestamp": t.timestamp.astimezone(dt.UTC).isoformat().replace("+00:00", "Z"),
            "fixtureId": t.fixture_id,
            "runMode": t.run_mode,
            "markers": kept,
            "cohortTags": list(t.view.cohort_tags),
            "latencyMs": t.view.latency_ms,
            "costUsd": t.view.cost_usd,
            "dimensions": dims,
        }
        events.append(event)
    document = RecordedEvents.model_validate(
        {"schema": "holonograph-recorded-events/v1", "events": events}
    ).to_json()
    secrets = find_secrets(document)
    if secrets:
        raise SuiteError(secrets)
    return document


# --- running ----------------------------------------------------------------------------


def pass_rate(trials: Sequence[TrialResult]) -> float | None:
    """Passed over trials that reached a verdict the scenario does not tolerate."""
    decided = [t for t in trials if t.status != "tolerated"]
    return sum(1 for t in decided if t.status == "passed") / len(decided) if decided else None


@dataclass(frozen=True)
class TrialResult:
    """One trial. Its verdict is the strongest of its fixtures' and inline assertions'
    verdicts (the Guide's order), but the gate reads each of them: `failed` if any
    failed, `disallowed` if any other non-pass is not in the scenario's `allow`, else
    `passed` if any passed, else `tolerated` (counts neither for nor against the pass
    rate)."""

    event_id: str
    verdict: Verdict
    status: TrialStatus
    fixtures: dict[str, Verdict]
    assertions: Verdict | None
    latency_ms: float | None
    cost_usd: float | None
    tokens: int | None = None

    @property
    def components(self) -> list[Verdict]:
        return [*self.fixtures.values(), *([self.assertions] if self.assertions else [])]

    def to_json(self) -> dict[str, Any]:
        return {
            "eventId": self.event_id,
            "verdict": self.verdict,
            "status": self.status,
            "fixtures": self.fixtures or None,
            "assertions": self.assertions,
            "latencyMs": self.latency_ms,
            "costUsd": self.cost_usd,
        }


@dataclass(frozen=True)
class ScenarioResult:
    scenario: Scenario
    trials: tuple[TrialResult, ...]
    failures: tuple[str, ...]

    @property
    def gating(self) -> bool:
        return self.scenario.tier == "core"

    def count(self, verdict: str) -> int:
        return sum(1 for t in self.trials if t.verdict == verdict)

    @property
    def pass_rate(self) -> float | None:
        return pass_rate(self.trials)

    def to_json(self) -> dict[str, Any]:
        latencies = [t.latency_ms for t in self.trials if t.latency_ms is not None]
        costs = [t.cost_usd for t in self.trials if t.cost_usd is not None]
        return {
            "scenarioId": self.scenario.scenario_id,
            "surfaceId": self.scenario.surface_id,
            "tier": self.scenario.tier,
            "status": "failed" if self.failures else "passed",
            "gating": self.gating,
            "repetitions": self.scenario.repetitions,
            "trialsFound": len(self.trials),
            "counts": {v: self.count(v) for v in VERDICT_ORDER},
            "tolerated": sum(1 for t in self.trials if t.status == "tolerated"),
            "passRate": self.pass_rate,
            "meanLatencyMs": sum(latencies) / len(latencies) if latencies else None,
            "p95LatencyMs": p95(latencies),
            "totalCostUsd": sum(costs) if costs else None,
            "meanCostUsd": sum(costs) / len(costs) if costs else None,
            "failures": list(self.failures),
            "trials": [t.to_json() for t in self.trials],
        }


def trial_status(verdicts: Sequence[Verdict], allow: Sequence[str]) -> TrialStatus:
    if "fail" in verdicts:
        return "failed"
    if any(v != "pass" and v not in allow for v in verdicts):
        return "disallowed"
    return "passed" if "pass" in verdicts else "tolerated"


# --- fixtures approved in the store -----------------------------------------------------


@dataclass(frozen=True)
class ResolvedFixture:
    """An `approvedFixtures` entry as the store answered it, for the result's record."""

    fixture: Fixture
    version: int
    digest: str

    def to_json(self) -> dict[str, Any]:
        return {
            "fixtureId": self.fixture.fixture_id,
            "version": self.version,
            "fixtureDigest": self.digest,
        }


class FixtureLookup(Protocol):
    """Finds a fixture's approved version (the live one when `version` is None);
    raises `LookupError` saying why there is none."""

    def __call__(self, fixture_id: str, version: int | None) -> ResolvedFixture: ...


def resolve_approved(suite: Suite, lookup: FixtureLookup) -> dict[str, ResolvedFixture]:
    """Every `approvedFixtures` entry resolved, or `SuiteError` with every reason (an
    unknown or retired fixture, an unapproved pinned version, a surface mismatch)."""
    problems: list[str] = []
    resolved: dict[str, ResolvedFixture] = {}
    for ref in suite.approved_fixtures:
        try:
            found = lookup(ref.fixture_id, ref.version)
        except LookupError as err:
            problems.append(str(err))
            continue
        for scenario in suite.scenarios:
            if ref.fixture_id in scenario.fixtures and found.fixture.surface_id != (
                scenario.surface_id
            ):
                problems.append(
                    f"scenario {scenario.scenario_id}: approved fixture {ref.fixture_id} applies"
                    f" to {found.fixture.surface_id}, not {scenario.surface_id}"
                )
        resolved[ref.fixture_id] = found
    if problems:
        raise SuiteError(problems)
    return resolved


def _trial(
    suite: Suite, scenario: Scenario, trial: Trial, approved: Mapping[str, ResolvedFixture]
) -> TrialResult:
    fixtures = {f.fixture_id: f for f in suite.fixtures}
    fixtures.update((fixture_id, r.fixture) for fixture_id, r in approved.items())
    by_fixture: dict[str, Verdict] = {}
    for ref in scenario.fixtures:
        fx = fixtures[ref]
        by_fixture[ref] = evaluate_event(trial.view, fx.when or [], fx.checks(), fx.rule_id).verdict
    inline: Verdict | None = None
    if scenario.assertions:
        # Inline judge assertions read the dimension judge:<scenarioId>.
        inline = evaluate_event(
            trial.view, scenario.when or [], scenario.assertions, scenario.scenario_id
        ).verdict
    verdicts = [*by_fixture.values(), *([inline] if inline else [])]
    return TrialResult(
        trial.view.event_id,
        strongest(verdicts) or "unevaluable",
        trial_status(verdicts, scenario.allow),
        by_fixture,
        inline,
        trial.view.latency_ms,
        trial.view.cost_usd,
        trial.tokens,
    )


def run_scenario(
    suite: Suite,
    scenario: Scenario,
    source: TrialSource,
    approved: Mapping[str, ResolvedFixture] | None = None,
) -> ScenarioResult:
    resolved = approved or {}
    trials = tuple(_trial(suite, scenario, t, resolved) for t in source.trials(scenario))
    failures = []
    if len(trials) < scenario.repetitions:
        failures.append(f"missing evidence: {len(trials)} of {scenario.repetitions} trials found")
    for trial in trials:
        if trial.status == "failed":
            failures.append(f"trial {trial.event_id} failed")
        elif trial.status == "disallowed":
            found = sorted({v for v in trial.components if v != "pass"} - set(scenario.allow))
            failures.append(f"trial {trial.event_id} is {', '.join(found)}, which is not allowed")
    return ScenarioResult(scenario, trials, tuple(failures))


def surface_reductions(results: Sequence[ScenarioResult]) -> Reductions:
    """One surface's trials (all its scenarios) as a baseline reads them: the pass rate
    over decided trials (a tolerated one counts neither way), latency, tokens and cost
    over every trial that recorded them."""
    trials = [t for r in results for t in r.trials]
    return Reductions.of(
        [1.0 if t.status == "passed" else 0.0 for t in trials if t.status != "tolerated"],
        [t.latency_ms for t in trials if t.latency_ms is not None],
        [float(t.tokens) for t in trials if t.tokens is not None],
        [t.cost_usd for t in trials if t.cost_usd is not None],
    )


def baseline_regressions(suite: Suite, results: Sequence[ScenarioResult]) -> list[str]:
    """Each surface baseline's tests (`processors.conformance.baselines`), Holm across
    every test of the run at the suite's alpha."""
    units = [
        Unit("", b.surface_id, b, surface_reductions(on_surface))
        for b in suite.baselines
        if b.surface_id is not None
        and (on_surface := [r for r in results if r.scenario.surface_id == b.surface_id])
    ]
    return [r.reason for r in regressions(units, suite.alpha)]


@dataclass(frozen=True)
class SuiteResult:
    suite: Suite
    source: dict[str, Any]
    scenarios: tuple[ScenarioResult, ...]
    regressions: tuple[str, ...]
    ran_at: dt.datetime
    surfaces: dict[str, dict[str, Any]] = field(default_factory=dict)
    approved: tuple[ResolvedFixture, ...] = ()

    @property
    def failures(self) -> list[str]:
        return [
            f"{r.scenario.scenario_id}: {f}" for r in self.scenarios if r.gating for f in r.failures
        ]

    @property
    def passed(self) -> bool:
        return not self.failures and not self.regressions

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SUITE_RESULT_SCHEMA,
            "suiteId": self.suite.suite_id,
            "revision": self.suite.revision,
            "suiteDigest": suite_digest(self.suite),
            "status": "passed" if self.passed else "failed",
            "ranAt": self.ran_at,
            "source": self.source,
            "failures": self.failures,
            "regressions": list(self.regressions),
            "surfaces": self.surfaces,
            "approvedFixtures": [r.to_json() for r in self.approved],
            "scenarios": [r.to_json() for r in self.scenarios],
        }


def _surface_summary(
    results: Sequence[ScenarioResult], baseline: Baseline | None
) -> dict[str, Any]:
    trials = [t for r in results for t in r.trials]
    latencies = [t.latency_ms for t in trials if t.latency_ms is not None]
    costs = [t.cost_usd for t in trials if t.cost_usd is not None]
    return {
        "trials": len(trials),
        "passRate": pass_rate(trials),
        "p95LatencyMs": p95(latencies),
        "totalCostUsd": sum(costs) if costs else None,
        "meanCostUsd": sum(costs) / len(costs) if costs else None,
        "baseline": baseline.to_json() if baseline else None,
    }


def run_suite(
    suite: Suite,
    source: TrialSource,
    ran_at: dt.datetime,
    approved: Mapping[str, ResolvedFixture] | None = None,
) -> SuiteResult:
    """Every scenario in declaration order, then the baselines per surface. A suite with
    `approvedFixtures` needs them resolved first (`resolve_approved`)."""
    resolved = approved or {}
    missing = [a.fixture_id for a in suite.approved_fixtures if a.fixture_id not in resolved]
    if missing:
        raise SuiteError([f"approved fixture {m} was not resolved from a store" for m in missing])
    results = tuple(run_scenario(suite, s, source, resolved) for s in suite.scenarios)
    baselines = {b.surface_id: b for b in suite.baselines}
    surfaces: dict[str, dict[str, Any]] = {}
    for surface_id in dict.fromkeys(s.surface_id for s in suite.scenarios):
        on_surface = [r for r in results if r.scenario.surface_id == surface_id]
        surfaces[surface_id] = _surface_summary(on_surface, baselines.get(surface_id))
    return SuiteResult(
        suite,
        source.describe(),
        results,
        tuple(baseline_regressions(suite, results)),
        ran_at,
        surfaces,
        tuple(resolved[a.fixture_id] for a in suite.approved_fixtures),
    )
