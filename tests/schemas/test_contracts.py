"""Contract models: strict validation with precise messages, and the summary's removed[]."""

from __future__ import annotations

import copy
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from schemas.contracts import Contract, ContractVersion, problems, summarize, version_id

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "contracts" / "billing-triage.json"
AT = dt.datetime(2026, 7, 1, 9, tzinfo=dt.UTC)


def example() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(EXAMPLE.read_text())
    return document


def refusal(document: Any) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        Contract.model_validate(document)
    return problems(caught.value)


def test_the_guide_example_round_trips_in_its_own_shape() -> None:
    contract = Contract.model_validate(example())
    assert contract.to_json() == example()
    surface = contract.surface("classify-intent")
    assert surface is not None and surface.routings[0].light_sources == (
        "anthropic/claude-sonnet-5",
        "openai/gpt-5",
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d["surfaces"][0].update(owner="x"),
         ["surfaces.0.owner: Extra inputs are not permitted"]),
        (lambda d: d["surfaces"][0]["dimensions"].append({"id": "correctness", "type": "score"}),
         ["surfaces.0: duplicate dimension ids in surface classify-intent: correctness"]),
        (lambda d: d["surfaces"].append(copy.deepcopy(d["surfaces"][0])),
         ["surfaces: duplicate surface ids: classify-intent"]),
        (lambda d: d["surfaces"][0]["cohortTags"].append("fix_tier"),
         ["surfaces.0: duplicate cohort tags in surface classify-intent: fix_tier"]),
        (lambda d: d["surfaces"][0]["dimensions"][0].update(type="percent"),
         ["surfaces.0.dimensions.0.type: Input should be 'score' or 'boolean'"]),
        (lambda d: d["surfaces"][0]["substrateColumns"][0].update(semantic="runtime"),
         ["surfaces.0.substrateColumns.0.semantic: Input should be"
          " 'deployment-state' or 'diagnostic'"]),
        (lambda d: d["surfaces"][0]["substrateColumns"][2].update(values=["low", "low"]),
         ["surfaces.0.substrateColumns.2: duplicate values of column severity: low"]),
        (lambda d: d["surfaces"][0]["routings"][0].update(activeRunModes=["prod"]),
         ["surfaces.0.routings.0.activeRunModes.0: Input should be"
          " 'production', 'test', 'eval', 'replay' or 'local_dev'"]),
        (lambda d: d["surfaces"][0]["routings"][0].update(surfaceId="other"),
         ["surfaces.0: routing surfaceId other is not its surface classify-intent"]),
        (lambda d: d.update(surfaces=[]), ["surfaces: a contract declares at least one surface"]),
        (lambda d: d.pop("agentId"), ["agentId: Field required"]),
    ],
)  # fmt: skip
def test_invalid_contracts_are_refused_precisely(change: Any, expected: list[str]) -> None:
    document = example()
    change(document)
    assert refusal(document) == expected


def _version(contract: Contract, previous: str | None) -> ContractVersion:
    return ContractVersion(
        tenant_id="acme",
        version_id=version_id("acme", contract, previous),
        previous_version_id=previous,
        registered_at=AT,
        contract=contract,
    )


def test_removed_items_tell_a_promotion_from_a_retirement() -> None:
    first = Contract.model_validate(example())
    document = example()
    surface = document["surfaces"][0]
    # `correctness` becomes `answer-correctness`; `fix_tier` is retired; the
    # `customer-tier` tag is promoted to a substrate column.
    surface["dimensions"][0] = {
        "id": "answer-correctness",
        "type": "score",
        "supersedes": "correctness",
    }
    surface["cohortTags"] = []
    surface["substrateColumns"].append(
        {"id": "tier", "control": "operator", "visibility": "transparent",
         "semantic": "diagnostic", "supersedes": "customer-tier"}
    )  # fmt: skip
    second = Contract.model_validate(document)
    v1 = _version(first, None)
    v2 = _version(second, v1.version_id)
    summary = summarize(v2, first).to_json()
    assert summary["previousVersionId"] == v1.version_id
    assert summary["removed"] == [
        {"altitude": "dimension", "surfaceId": "classify-intent", "id": "correctness",
         "supersededBy": {"altitude": "dimension", "id": "answer-correctness"}},
        {"altitude": "tag", "surfaceId": "classify-intent", "id": "customer-tier",
         "supersededBy": {"altitude": "column", "id": "tier"}},
        {"altitude": "tag", "surfaceId": "classify-intent", "id": "fix_tier", "supersededBy": None},
    ]  # fmt: skip
    assert summary["surfaces"][0]["dimensionCount"] == 2
    assert summarize(v1, None).to_json()["removed"] == []


def test_version_ids_depend_on_content_and_predecessor() -> None:
    contract = Contract.model_validate(example())
    assert version_id("acme", contract, None) == version_id("acme", contract, None)
    assert version_id("acme", contract, None) != version_id("other", contract, None)
    assert version_id("acme", contract, None) != version_id("acme", contract, "cv_x")


GENAI = {
    "surfaces": [{"surfaceId": "classify-intent", "agentName": "triage"}],
    "runModes": {"staging": "test"},
    "labels": {"passLabels": ["pass"], "failLabels": ["fail"]},
    "evaluations": [{"name": "hallucination", "passLabels": ["no"]}],
}


def test_a_genai_block_round_trips_and_reads_back_in_the_summary() -> None:
    document = {**example(), "genai": GENAI}
    contract = Contract.model_validate(document)
    assert contract.to_json() == document
    assert contract.digest() != Contract.model_validate(example()).digest()
    summary = summarize(_version(contract, None), None).to_json()
    assert summary["genai"] == GENAI
    assert (
        "genai" not in summarize(_version(Contract.model_validate(example()), None), None).to_json()
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda g: g["surfaces"][0].update(surfaceId="answer"),
         ["$: genai surface answer is not a surface of this contract (classify-intent)"]),
        (lambda g: g["surfaces"][0].pop("agentName"),
         ["genai.surfaces.0: surface classify-intent: give at least one of agentName,"
          " operationName, serviceName",
          "genai.surfaces: Tuple should have at least 1 item after validation, not 0"]),
        (lambda g: g.update(surfaces=[]),
         ["genai.surfaces: Tuple should have at least 1 item after validation, not 0"]),
        (lambda g: g["runModes"].update(staging="prod"),
         ["genai.runModes.staging: Input should be 'production', 'test', 'eval', 'replay'"
          " or 'local_dev'"]),
        (lambda g: g["labels"].update(failLabels=["pass"]),
         ["genai.labels: labels both pass and fail: pass"]),
        (lambda g: g["labels"].update(passLabels=[]),
         ["genai.labels.passLabels: Tuple should have at least 1 item after validation,"
          " not 0"]),
        (lambda g: g["evaluations"].append({"name": "hallucination", "passLabels": ["yes"]}),
         ["genai: evaluations[].name: 'hallucination' twice"]),
        (lambda g: g.update(labels={"pass": ["x"]}),
         ["genai.labels.passLabels: Field required", "genai.labels.pass: Extra inputs are not"
          " permitted"]),
    ],
)  # fmt: skip
def test_an_invalid_genai_block_is_refused_precisely(change: Any, expected: list[str]) -> None:
    genai = copy.deepcopy(GENAI)
    change(genai)
    assert refusal({**example(), "genai": genai}) == expected
