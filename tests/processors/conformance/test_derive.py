"""Derive: golden files over a corpus of realistic rules, labels, coverage and repairs.

Regenerate the golden files after an intended change with
`HOLONOGRAPH_UPDATE_GOLDEN=1 pytest tests/processors/conformance/test_derive.py`
and read the diff of `tests/testdata/conformance/derive/*/expected.json`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from processors.conformance.derive import derive
from processors.conformance.eval import evaluate_event
from schemas.conformance import Fixture, SurfaceInput
from tests.processors.conformance.support import event

CORPUS = Path(__file__).parents[2] / "testdata" / "conformance" / "derive"
CASES = sorted(p.name for p in CORPUS.iterdir() if (p / "request.yaml").exists())
UPDATE = os.environ.get("HOLONOGRAPH_UPDATE_GOLDEN") == "1"


def derive_case(case: str) -> dict[str, Any]:
    request = yaml.safe_load((CORPUS / case / "request.yaml").read_text())
    return derive(SurfaceInput.model_validate(request)).to_json()


@pytest.mark.parametrize("case", CASES)
def test_golden(case: str) -> None:
    produced = derive_case(case)
    expected_path = CORPUS / case / "expected.json"
    if UPDATE:
        expected_path.write_text(json.dumps(produced, indent=2, ensure_ascii=False) + "\n")
    assert produced == json.loads(expected_path.read_text())


def test_corpus_size() -> None:
    assert sum(len(derive_case(c)["candidates"]) for c in CASES) >= 30


# Labels per rule, in order: T trace-enforceable, J judge-required, N not-enforceable.
LABELS = {
    "guide-example": "TTJ",
    "refund-flows": "TTTTTTNNNN",
    "tool-ordering": "TTTTNTNT",
    "forbidden-content": "TTTJJTTJN",
    "politeness": "JJJJJJN",
    "pii": "JJTTNNN",
    "limits": "TTTTTT",
    "phrasings": "TTTTTTTTTTTTJTNTTTTTTTTNN",
}
CODE = {"T": "trace-enforceable", "J": "judge-required", "N": "not-enforceable"}


@pytest.mark.parametrize("case", CASES)
def test_labels_and_coverage_line(case: str) -> None:
    out = derive_case(case)
    labels = [CODE[c] for c in LABELS[case]]
    assert [c["enforceability"] for c in out["candidates"]] == labels
    k = LABELS[case].count("T")
    assert out["coverage"]["summary"] == f"{k} of {len(labels)} rules mechanically enforceable"
    assert out["coverage"]["judgeRequired"] == LABELS[case].count("J")
    # every not-enforceable rule is in needsRepair, with a reason and a rephrasing
    unrepaired = [c["ruleId"] for c in out["candidates"] if c["fixture"] is None]
    assert [r["ruleId"] for r in out["needsRepair"]] == unrepaired
    assert all(r["why"] and r["rephrase"] for r in out["needsRepair"])


REPAIR_REASONS = {
    "Use refund_lookup when appropriate.": "hedged wording ('when appropriate')",
    "Call book_hotel before charge_card.": "'book_hotel', which is not a declared tool",
    "Invoke search_flights or get_weather first.": "a choice between tools",
    "If the user asks about their order status, call order_status.": "is a phrase",
    "Store customer data encrypted at rest.": "state that evaluation events do not record",
    "Issue refunds only when the order is eligible.": "('eligible')",
    'Say "sorry" or "apologies" when the user complains.': "a choice cannot be asserted",
}


def test_needs_repair_reasons() -> None:
    repairs = {r["rule"]: r for case in CASES for r in derive_case(case)["needsRepair"]}
    for rule, reason in REPAIR_REASONS.items():
        assert reason in repairs[rule]["why"], (rule, repairs[rule]["why"])


def test_guide_example_matches_the_guide() -> None:
    out = derive_case("guide-example")
    assert out["coverage"]["summary"] == "2 of 3 rules mechanically enforceable"
    refund, dollars, polite = (c["fixture"] for c in out["candidates"])
    assert refund["when"] == [
        {"kind": "marker-contains", "column": "user_message", "value": "refund"}
    ]
    assert refund["assertion"] == {"kind": "tool-invoked", "tool": "refund_lookup"}
    assert refund["ruleSource"] == "Refund rules v3"
    assert dollars["when"] == [{"kind": "tool-not-invoked", "tool": "refund_lookup"}]
    assert dollars["assertion"]["value"] == "$"
    assert "results" in out["candidates"][1]["caveats"][0]
    assert polite["assertion"] == {"kind": "judge", "criterion": "Be polite."}


def test_deterministic_and_valid() -> None:
    for case in CASES:
        first, second = derive_case(case), derive_case(case)
        assert first == second
        for candidate in first["candidates"]:
            if candidate["fixture"] is not None:
                Fixture.model_validate(candidate["fixture"])


def test_rule_ids_and_objects() -> None:
    surface = SurfaceInput.model_validate(
        {
            "surfaceId": "s",
            "tools": [{"name": "refund_lookup"}],
            "rules": [
                'Never say "guaranteed".',
                {"ruleId": "custom-7", "text": "Be polite.", "source": "Tone guide"},
            ],
        }
    )
    out = derive(surface).to_json()
    assert [c["ruleId"] for c in out["candidates"]] == ["s-r01", "custom-7"]
    assert out["candidates"][1]["fixture"]["ruleSource"] == "Tone guide"
    assert out["candidates"][0]["fixture"]["fixtureId"] == "fx-s-r01"


def fixture_for(case: str, rule: str) -> Fixture:
    for candidate in derive_case(case)["candidates"]:
        if candidate["rule"] == rule:
            return Fixture.model_validate(candidate["fixture"])
    raise KeyError(rule)


def verdicts(fx: Fixture, tool_runs: list[list[str]]) -> list[str]:
    return [
        evaluate_event(
            event("e", {"tool_invocations": tools}), fx.when or [], fx.checks(), fx.rule_id
        ).verdict
        for tools in tool_runs
    ]


@pytest.mark.parametrize(
    ("case", "rule", "runs", "expected"),
    [
        ("refund-flows", "Only call issue_refund after refund_lookup.",
         [["refund_lookup", "issue_refund"], ["issue_refund"], ["issue_refund", "refund_lookup"],
          []],
         ["pass", "fail", "fail", "not-applicable"]),
        ("refund-flows", "Never call issue_refund before verify_identity.",
         [["verify_identity", "issue_refund"], ["issue_refund", "verify_identity"],
          ["verify_identity"]],
         ["pass", "fail", "not-applicable"]),
        ("tool-ordering", "Call send_confirmation after charge_card.",
         [["charge_card", "send_confirmation"], ["charge_card"],
          ["send_confirmation", "charge_card"], ["hold_seat"]],
         ["pass", "fail", "fail", "not-applicable"]),
        ("tool-ordering", "Always call search_flights before hold_seat.",
         [["search_flights", "hold_seat"], ["hold_seat", "search_flights"], ["search_flights"]],
         ["pass", "fail", "not-applicable"]),
        ("refund-flows", "Never invoke issue_refund unless verify_identity was invoked.",
         [["issue_refund"], ["verify_identity", "issue_refund"], []],
         ["fail", "not-applicable", "pass"]),
    ],
)  # fmt: skip
def test_derived_fixtures_mean_what_the_rule_says(
    case: str, rule: str, runs: list[list[str]], expected: list[str]
) -> None:
    assert verdicts(fixture_for(case, rule), runs) == expected
