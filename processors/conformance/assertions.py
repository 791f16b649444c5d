"""The observation assertion vocabulary (`expect`) evaluated on one observation.

Each assertion gives a pass or a fail with the reason in words. The observation is the
evidence: a part it does not carry (no result, no completion) fails the assertion that
reads it, never passes it by default.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from schemas.harness import (
    ApprovalAssertion,
    CapabilityAssertion,
    CompletionSchemaAssertion,
    FileAssertion,
    HarnessAssertion,
    NetworkAssertion,
    Observation,
    OutcomeAssertion,
    PolicyDecisionAssertion,
    ProvenanceAssertion,
    RejectionAssertion,
    ResultAssertion,
    ToolCall,
    ToolCallMatcher,
    ToolCallsAssertion,
)


@dataclass(frozen=True)
class Checked:
    kind: str
    passed: bool
    reason: str
    claim: str | None = None


def evaluate(assertion: HarnessAssertion, obs: Observation) -> Checked:
    """One assertion on one observation."""
    problem = _problem(assertion, obs)
    reason = problem or "holds"
    return Checked(assertion.kind, problem is None, reason, assertion.claim)


def evaluate_all(assertions: Sequence[HarnessAssertion], obs: Observation) -> list[Checked]:
    return [evaluate(a, obs) for a in assertions]


def _problem(a: HarnessAssertion, obs: Observation) -> str | None:
    if isinstance(a, OutcomeAssertion):
        return (
            None if obs.outcome in a.one_of else f"outcome {obs.outcome}, expected {_or(a.one_of)}"
        )
    if isinstance(a, FileAssertion):
        return _file(a, obs)
    if isinstance(a, ToolCallsAssertion):
        return _tool_calls(a, obs.tool_calls)
    if isinstance(a, ApprovalAssertion):
        return _approval(a, obs)
    if isinstance(a, NetworkAssertion):
        return _network(a, obs)
    if isinstance(a, PolicyDecisionAssertion):
        seen = [d.decision for d in obs.policy_decisions if d.policy == a.policy]
        if a.decision in seen:
            return None
        return (
            f"policy {a.policy} decided {_or(seen) if seen else 'nothing'}, expected {a.decision}"
        )
    if isinstance(a, CompletionSchemaAssertion):
        return _completion(a, obs)
    if isinstance(a, CapabilityAssertion):
        state = obs.capabilities.get(a.capability)
        if state == a.state:
            return None
        return f"capability {a.capability} is {state or 'not reported'}, expected {a.state}"
    if isinstance(a, ResultAssertion):
        return _result(a, obs)
    if isinstance(a, ProvenanceAssertion):
        return _provenance(a, obs)
    return _rejection(a, obs)


def _or(values: Sequence[str]) -> str:
    return " or ".join(values)


def _file(a: FileAssertion, obs: Observation) -> str | None:
    changes = [f.change for f in obs.files if f.path == a.path]
    if a.change == "unchanged":
        return None if not changes else f"{a.path} was {_or(changes)}"
    if a.change in changes:
        return None
    return f"{a.path} was {_or(changes) if changes else 'not changed'}, expected {a.change}"


def _matches(m: ToolCallMatcher, call: ToolCall) -> bool:
    if m.tool != call.tool or (m.outcome is not None and m.outcome != call.outcome):
        return False
    for name, want in m.arguments.items():
        got = call.argument_shape.get(name)
        if want == "absent":
            if got is not None:
                return False
        elif got is None or (want != "present" and got != want):
            return False
    return True


def _assign(matchers: Sequence[ToolCallMatcher], calls: Sequence[ToolCall]) -> list[int]:
    """Matchers left without a distinct call by a maximum bipartite matching (Kuhn):
    an order-free set, so a broad matcher never steals the only call a narrow one fits."""
    owner: dict[int, int] = {}

    def take(i: int, seen: set[int]) -> bool:
        for j, call in enumerate(calls):
            if j in seen or not _matches(matchers[i], call):
                continue
            seen.add(j)
            if j not in owner or take(owner[j], seen):
                owner[j] = i
                return True
        return False

    return [i for i in range(len(matchers)) if not take(i, set())]


def _describe(m: ToolCallMatcher) -> str:
    parts = [m.tool] + ([m.outcome] if m.outcome else [])
    parts += [f"{k}:{v}" for k, v in sorted(m.arguments.items())]
    return " ".join(parts)


def _tool_calls(a: ToolCallsAssertion, calls: Sequence[ToolCall]) -> str | None:
    problems = []
    unmatched = _assign(a.calls, calls)
    if unmatched:
        problems.append("no call matched " + "; ".join(_describe(a.calls[i]) for i in unmatched))
    called = {c.tool for c in calls}
    forbidden = sorted(called & set(a.forbidden))
    if forbidden:
        problems.append(f"forbidden tools called: {', '.join(forbidden)}")
    if a.only:
        extra = sorted(called - {m.tool for m in a.calls})
        if extra:
            problems.append(f"tools outside the expected set: {', '.join(extra)}")
    return "; ".join(problems) or None


def _approval(a: ApprovalAssertion, obs: Observation) -> str | None:
    seen = [r.decision for r in obs.approvals if r.action == a.action]
    if a.decision == "not-requested":
        return None if not seen else f"approval for {a.action} was requested ({_or(seen)})"
    if a.decision in seen:
        return None
    return (
        f"approval for {a.action}: {_or(seen) if seen else 'not requested'}, expected {a.decision}"
    )


def host_matches(pattern: str, host: str) -> bool:
    """`*.x` matches any subdomain of x (not x itself); otherwise an exact host."""
    if pattern.startswith("*."):
        return host.endswith(pattern[1:])
    return host == pattern


def _network(a: NetworkAssertion, obs: Observation) -> str | None:
    problems = []
    if a.allow is not None:
        outside = sorted(
            {t.host for t in obs.network_attempts}
            - {t.host for t in obs.network_attempts for p in a.allow if host_matches(p, t.host)}
        )
        if outside:
            problems.append(f"network attempts outside the allowed hosts: {', '.join(outside)}")
    for want in a.attempted:
        tries = [t for t in obs.network_attempts if t.host == want.host]
        if not tries:
            problems.append(f"no attempt to reach {want.host}")
        elif want.blocked is not None and not any(t.blocked == want.blocked for t in tries):
            problems.append(f"{want.host} was {'not ' if want.blocked else ''}blocked")
    return "; ".join(problems) or None


def _completion(a: CompletionSchemaAssertion, obs: Observation) -> str | None:
    c = obs.completion
    if c is None:
        return "no completion recorded"
    if c.schema_id != a.schema_id:
        return f"completion follows {c.schema_id}, expected {a.schema_id}"
    if not c.valid:
        return f"completion is not valid against {a.schema_id}"
    missing = [f for f in a.required_fields if f not in c.fields]
    return f"completion lacks fields: {', '.join(missing)}" if missing else None


def _result(a: ResultAssertion, obs: Observation) -> str | None:
    r = obs.result
    if r is None:
        return "no result recorded"
    problems = []
    for name, want in a.envelope.items():
        got = r.envelope.get(name)
        if name not in r.envelope or type(got) is not type(want) or got != want:
            problems.append(
                f"envelope {name} is {_show(got, name in r.envelope)}, expected {want!r}"
            )
    if a.error_code is not None and r.error_code != a.error_code:
        problems.append(f"error code {r.error_code or 'none'}, expected {a.error_code}")
    if a.columns is not None and (r.columns is None or set(r.columns) != set(a.columns)):
        got = "not recorded" if r.columns is None else ", ".join(sorted(r.columns)) or "none"
        problems.append(f"columns {got}, expected {', '.join(sorted(a.columns)) or 'none'}")
    if a.row_count is not None:
        n, lo, hi = r.row_count, a.row_count.min, a.row_count.max
        if n is None:
            problems.append("row count not recorded")
        elif (lo is not None and n < lo) or (hi is not None and n > hi):
            bounds = f"[{0 if lo is None else lo}, {'∞' if hi is None else hi}]"
            problems.append(f"row count {n} outside {bounds}")
    return "; ".join(problems) or None


def _show(value: object, present: bool) -> str:
    return repr(value) if present else "absent"


def _provenance(a: ProvenanceAssertion, obs: Observation) -> str | None:
    problems = []
    for want in a.warnings_contain:
        if not any(
            w.code == want.code
            and (want.source_service is None or w.source_service == want.source_service)
            for w in obs.warnings
        ):
            where = f" from {want.source_service}" if want.source_service else ""
            problems.append(f"no provenance warning {want.code}{where}")
    present = sorted({w.code for w in obs.warnings} & set(a.warnings_absent))
    if present:
        problems.append(f"unexpected provenance warnings: {', '.join(present)}")
    return "; ".join(problems) or None


def _rejection(a: RejectionAssertion, obs: Observation) -> str | None:
    r = obs.rejection
    if not a.rejected:
        return None if r is None else f"rejected at the {r.gate} gate ({r.code})"
    if r is None:
        return "not rejected"
    problems = []
    if a.gate is not None and r.gate != a.gate:
        problems.append(f"rejected at the {r.gate} gate, expected {a.gate}")
    if a.code is not None and r.code != a.code:
        problems.append(f"rejection code {r.code}, expected {a.code}")
    return "; ".join(problems) or None
