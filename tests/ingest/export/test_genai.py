"""OpenTelemetry GenAI evaluation results -> evaluation events by contract
(`ingest.export.genai`), on requests the official SDK builds: every form (span events,
spans of the event's name, log records read as such spans), the mapping field by field,
the label rules, and every rejection with its reason. No store: the validated batch is
the observable."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest as PB2ExportTraceServiceRequest,
)

from ingest.export.contracts import ContractBook
from ingest.export.fast import fast_batch
from ingest.export.handler import _outcome
from ingest.export.logs import as_spans
from ingest.export.principal import ANONYMOUS, Principal
from ingest.export.request import AGENT_REJECTED, validate_request
from schemas.contracts import Contract, ContractVersion
from schemas.events import EvaluationEvent, ValidatedBatch
from tests.genai_emit import (
    RESOURCE,
    Call,
    Eval,
    genai_contract,
    logs_request,
    record_call_logs,
    record_calls,
    start_ns,
)
from tests.otel_emit import Evaluation, export_request, record_spans

AT = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
CALL = Call(
    [
        Eval("relevance", score=4.0, explanation="answers the question", response_id="chatcmpl-1"),
        Eval("correctness", label="pass", response_id="chatcmpl-1"),
        Eval("toxicity", score=0.02, label="fail", explanation="mildly curt"),
    ]
)


def book_of(*documents: dict[str, Any], tenant: str = "default") -> ContractBook:
    versions = [
        ContractVersion(
            tenant_id=tenant,
            version_id=f"cv_{n}",
            previous_version_id=None,
            registered_at=AT,
            contract=Contract.model_validate(document),
        )
        for n, document in enumerate(documents)
    ]
    return ContractBook(versions)


BOOK = book_of(genai_contract())
# Log records carry no gen_ai.agent.name: this contract places them by `service.name`.
LOG_BOOK = book_of(
    genai_contract(
        genai={
            "surfaces": [{"surfaceId": "classify-intent", "serviceName": "billing-api"}],
            "labels": {"passLabels": ["pass"]},
        }
    )
)


def spans_request(
    *calls: Call, form: str = "events", **kwargs: Any
) -> PB2ExportTraceServiceRequest:
    return export_request(record_calls(list(calls), form=form, **kwargs))


def logs_as_spans(*calls: Call, **kwargs: Any) -> PB2ExportTraceServiceRequest:
    _, records = record_call_logs(list(calls), **kwargs)
    return as_spans(logs_request(records)).request


def validate(
    request: PB2ExportTraceServiceRequest,
    book: ContractBook | None = BOOK,
    principal: Principal = ANONYMOUS,
) -> ValidatedBatch:
    return validate_request(request, principal=principal, contracts=book)


def only_event(batch: ValidatedBatch) -> EvaluationEvent:
    assert batch.quarantined == (), [q.reason for q in batch.quarantined]
    (event,) = batch.events
    return event


def reasons(batch: ValidatedBatch) -> list[str]:
    return [q.reason for q in batch.quarantined]


def test_span_events_become_one_event_with_one_dimension_per_result() -> None:
    spans = record_calls([CALL])
    (operation,) = spans
    batch = validate(export_request(spans))
    event = only_event(batch)
    trace_id = f"{operation.context.trace_id:032x}"
    assert event.model_dump(mode="json", exclude={"resource_attributes"}) == {
        "event_id": event.event_id,
        "surface_id": "classify-intent",
        "agent_id": "billing-triage",
        "correlation_id": trace_id,
        "run_mode": "production",
        "provenance": "production-state",
        "timestamp": "2026-11-30T13:43:59.326297Z",
        "emission": None,
        "trace_id": trace_id,
        "span_id": f"{operation.context.span_id:016x}",
        "substrate": {
            "surface_id": "classify-intent",
            "agent_id": "billing-triage",
            "run_mode": "production",
            "provenance": "production-state",
            "lens_version": "",
            "light_source_id": "openai/gpt-5-2025-08-07",
            "columns": {},
            "diagnostic": {},
        },
        "light_source": {"id": "openai/gpt-5-2025-08-07", "requested": "openai/gpt-5"},
        "lens": {"version": "", "fixture_id": ""},
        "outcome": {
            "dimensions": [
                {
                    "dimension_id": "relevance",
                    "passed": None,
                    "score": 4.0,
                    "expected": "",
                    "actual": "answers the question",
                    "judge": "",
                },
                {
                    "dimension_id": "correctness",
                    "passed": True,
                    "score": None,
                    "expected": "",
                    "actual": "",
                    "judge": "",
                },
                {
                    "dimension_id": "toxicity",
                    "passed": False,
                    "score": 0.02,
                    "expected": "",
                    "actual": "mildly curt",
                    "judge": "",
                },
            ],
            "cohort_tags": [],
            "markers": {},
            "latency_ms": 1326.297,
            "cost_usd": None,
            "tokens_input": 153,
            "tokens_output": 490,
        },
        "multiplex_role": "",
        "sdk_name": "opentelemetry",
        "sdk_version": event.sdk_version,
        "extras": {
            "gen_ai.response.id": "chatcmpl-1",
            "gen_ai.agent.name": "triage",
            "gen_ai.operation.name": "chat",
            "gen_ai.evaluation.score.label": {"correctness": "pass", "toxicity": "fail"},
        },
        "contract_version_id": "cv_0",
        "contract_findings": [
            "undeclared-dimension:relevance",
            "undeclared-dimension:correctness",
            "undeclared-dimension:toxicity",
            "unrouted-light-source:openai/gpt-5-2025-08-07",
        ],
    }
    assert event.resource_attributes["service.name"] == "billing-api"
    assert event.event_id.startswith("evt_g_")
    assert (batch.emissions, batch.ignored_spans) == ((), 0)
    outcome = _outcome(batch)
    assert (outcome.accepted_spans, outcome.rejected_spans) == (1, 0)


def test_result_spans_with_their_operation_span_map_as_span_events_do() -> None:
    as_events = only_event(validate(spans_request(CALL)))
    batch = validate(spans_request(CALL, form="spans"))
    as_spans_event = only_event(batch)
    assert as_spans_event == as_events
    # three result spans, one event: the two others are stored within it; the
    # operation span (no results of its own) lends its attributes and is not stored
    outcome = _outcome(batch)
    assert (outcome.accepted_spans, outcome.ignored_spans) == (3, 1)


def test_log_records_are_the_same_operation_without_the_span_context() -> None:
    from_spans = only_event(validate(spans_request(CALL)))
    batch = validate(logs_as_spans(CALL), LOG_BOOK)
    event = only_event(batch)
    assert event.event_id == from_spans.event_id  # one operation, whichever form
    assert (event.trace_id, event.span_id) == (from_spans.trace_id, from_spans.span_id)
    assert event.outcome.dimensions == from_spans.outcome.dimensions
    # what only the operation span knows is not guessed
    assert event.light_source.id == ""
    assert (event.outcome.latency_ms, event.outcome.tokens_input) == (None, None)
    # placed by `service.name` here: a log record has no gen_ai.agent.name
    assert event.surface_id == "classify-intent"
    assert event.timestamp == dt.datetime.fromtimestamp(
        (start_ns(0) + CALL.duration_ns + 1) // 1000 / 1e6, dt.UTC
    )


def test_a_log_record_placed_by_service_name_reads_copied_operation_attributes() -> None:
    copied = {"gen_ai.provider.name": "anthropic", "gen_ai.response.model": "claude-sonnet-5"}
    call = Call([Eval("relevance", score=3.0, extra=copied)])
    event = only_event(validate(logs_as_spans(call), LOG_BOOK))
    assert event.light_source.id == "anthropic/claude-sonnet-5"
    assert event.outcome.dimensions[0].score == 3.0


def test_the_legacy_event_name_attribute_is_read_too() -> None:
    batch = validate(logs_as_spans(CALL, event_name=False), LOG_BOOK)
    assert (
        only_event(batch).outcome.dimensions
        == only_event(validate(logs_as_spans(CALL), LOG_BOOK)).outcome.dimensions
    )


def test_several_operations_are_several_events_in_order() -> None:
    calls = [Call([Eval("relevance", score=float(n))]) for n in range(3)]
    batch = validate(spans_request(*calls))
    assert [e.outcome.dimensions[0].score for e in batch.events] == [0.0, 1.0, 2.0]
    assert len({e.event_id for e in batch.events}) == 3


def labels_book(
    rule: dict[str, Any] | None, evaluations: tuple[dict[str, Any], ...] = ()
) -> ContractBook:
    genai: dict[str, Any] = {"surfaces": [{"surfaceId": "classify-intent", "agentName": "triage"}]}
    if rule is not None:
        genai["labels"] = rule
    if evaluations:
        genai["evaluations"] = evaluations
    return book_of(genai_contract(genai=genai))


@pytest.mark.parametrize(
    ("rule", "result", "passed"),
    [
        ({"passLabels": ["pass", "correct"]}, Eval("e", label="correct"), True),
        ({"passLabels": ["pass"]}, Eval("e", label="incorrect"), False),  # not a pass: a fail
        ({"passLabels": ["pass"], "failLabels": ["fail"]}, Eval("e", label="fail"), False),
        ({"passLabels": ["pass"]}, Eval("e", label="Pass"), False),  # labels are exact
        (None, Eval("e", label="pass", score=0.9), None),  # no rule: the score is the grade
        ({"passLabels": ["pass"]}, Eval("e", score=0.9), None),  # no label: a score only
    ],
)
def test_label_rules(rule: dict[str, Any] | None, result: Eval, passed: bool | None) -> None:
    event = only_event(validate(spans_request(Call([result])), labels_book(rule)))
    (dimension,) = event.outcome.dimensions
    assert dimension.passed is passed
    assert dimension.score == result.score


def test_an_evaluation_of_its_own_rule_reads_its_labels_by_it() -> None:
    # OpenLIT's hallucination: "yes" means it hallucinated, a fail
    book = labels_book(
        {"passLabels": ["yes"]},
        ({"name": "hallucination", "passLabels": ["no"], "failLabels": ["yes"]},),
    )
    call = Call([Eval("hallucination", label="yes"), Eval("helpful", label="yes")])
    dimensions = only_event(validate(spans_request(call), book)).outcome.dimensions
    assert [(d.dimension_id, d.passed) for d in dimensions] == [
        ("hallucination", False),
        ("helpful", True),
    ]


@pytest.mark.parametrize(
    ("rule", "result", "reason"),
    [
        (
            {"passLabels": ["pass"], "failLabels": ["fail"]},
            Eval("relevance", label="maybe"),
            "event 0 (gen_ai.evaluation.result): gen_ai.evaluation.score.label: 'maybe' of"
            " evaluation 'relevance' is neither a pass nor a fail label of the contract of agent"
            " billing-triage (cv_0) (pass: pass; fail: fail)",
        ),
        (
            None,
            Eval("relevance", label="pass"),
            "event 0 (gen_ai.evaluation.result): gen_ai.evaluation.score.label: 'pass' of"
            " evaluation 'relevance' is no pass or fail: the contract of agent billing-triage"
            " (cv_0) has no genai label rule for it, and the result has no"
            " gen_ai.evaluation.score.value",
        ),
        (
            {"passLabels": ["pass"]},
            Eval("relevance"),
            "event 0 (gen_ai.evaluation.result): evaluation 'relevance': neither"
            " gen_ai.evaluation.score.value nor gen_ai.evaluation.score.label (nor error.type"
            " for an evaluation that failed)",
        ),
        (
            {"passLabels": ["pass"]},
            Eval(None, score=1.0),
            "event 0 (gen_ai.evaluation.result): gen_ai.evaluation.name: missing",
        ),
        (
            {"passLabels": ["pass"]},
            Eval("relevance", score=float("nan")),
            "event 0 (gen_ai.evaluation.result): gen_ai.evaluation.score.value: NaN is not a"
            " finite number",
        ),
        (
            {"passLabels": ["pass"]},
            Eval("relevance", extra={"gen_ai.evaluation.score.value": "high"}),
            "event 0 (gen_ai.evaluation.result): gen_ai.evaluation.score.value: expected a"
            " double, got string",
        ),
    ],
)
def test_a_result_no_rule_grades_rejects_its_span_with_the_reason(
    rule: dict[str, Any] | None, result: Eval, reason: str
) -> None:
    batch = validate(spans_request(Call([result])), labels_book(rule))
    assert batch.events == ()
    assert reasons(batch) == [reason]
    (record,) = batch.quarantined
    assert record.span_name == "chat gpt-5" and record.span_proto  # replayable as sent


def test_an_evaluation_that_failed_is_no_dimension_and_its_error_is_kept() -> None:
    call = Call([Eval("relevance", error="timeout"), Eval("correctness", label="pass")])
    event = only_event(validate(spans_request(call)))
    assert [d.dimension_id for d in event.outcome.dimensions] == ["correctness"]
    assert event.extras["error.type"] == {"relevance": "timeout"}


def test_an_operation_whose_every_evaluation_failed_is_an_outcome_less_event() -> None:
    event = only_event(validate(spans_request(Call([Eval("relevance", error="timeout")]))))
    assert event.outcome.dimensions == ()


def test_one_evaluation_graded_twice_differently_is_rejected() -> None:
    call = Call([Eval("relevance", score=1.0), Eval("relevance", score=2.0)])
    batch = validate(spans_request(call))
    assert reasons(batch) == [
        "event 1 (gen_ai.evaluation.result): evaluation 'relevance' is graded twice for one"
        " operation, with different results"
    ]


def test_a_log_record_sent_twice_is_one_dimension() -> None:
    _, records = record_call_logs([Call([Eval("relevance", score=1.0)])])
    request = logs_request([*records, records[0]])
    batch = validate(as_spans(request).request, LOG_BOOK)
    assert len(only_event(batch).outcome.dimensions) == 1


def test_a_bad_log_record_costs_only_itself() -> None:
    call = Call([Eval("relevance", score=1.0), Eval(None, score=2.0), Eval("tone", label="pass")])
    batch = validate(logs_as_spans(call), LOG_BOOK)
    assert reasons(batch) == ["gen_ai.evaluation.name: missing"]
    assert [d.dimension_id for d in batch.events[0].outcome.dimensions] == ["relevance", "tone"]
    outcome = _outcome(batch)
    assert (outcome.accepted_spans, outcome.rejected_spans) == (2, 1)


OTHER_AGENT = genai_contract(
    agent="support-bot",
    surface="answer",
    genai={"surfaces": [{"surfaceId": "answer", "operationName": "chat"}]},
)


@pytest.mark.parametrize(
    ("book", "call", "resource", "reason"),
    [
        (
            BOOK,
            Call([Eval("relevance", score=1.0)], agent="router"),
            RESOURCE,
            "genai: no contract's genai mapping places this evaluation (gen_ai.agent.name"
            " 'router', gen_ai.operation.name 'chat', service.name 'billing-api'); map it in its"
            " agent's contract (docs/genai.md)",
        ),
        (
            book_of(genai_contract(), OTHER_AGENT),
            Call([Eval("relevance", score=1.0)]),
            RESOURCE,
            "genai: the genai mappings of 2 contracts place this evaluation (gen_ai.agent.name"
            " 'triage', gen_ai.operation.name 'chat', service.name 'billing-api'): agent"
            " billing-triage: surface classify-intent (agentName 'triage'); agent support-bot:"
            " surface answer (operationName 'chat'); one evaluation belongs to one surface",
        ),
        (
            None,
            Call([Eval("relevance", score=1.0)]),
            RESOURCE,
            "genai: no contracts are held here, so no genai mapping places this evaluation"
            " (gen_ai.agent.name 'triage', gen_ai.operation.name 'chat', service.name"
            " 'billing-api')",
        ),
        (
            BOOK,
            Call([Eval("relevance", score=1.0)]),
            {"service.name": "billing-api"},
            "deployment.environment.name: missing on the resource; a GenAI evaluation's run mode"
            " comes from it (contract of agent billing-triage (cv_0) maps: production ->"
            " production, test -> test, development -> local_dev)",
        ),
        (
            BOOK,
            Call([Eval("relevance", score=1.0)]),
            {"service.name": "billing-api", "deployment.environment.name": "staging"},
            "deployment.environment.name: 'staging' is not mapped to a run mode (contract of"
            " agent billing-triage (cv_0) maps: production -> production, test -> test,"
            " development -> local_dev)",
        ),
    ],
)
def test_what_no_contract_decides_is_quarantined_with_the_reason(
    book: ContractBook | None, call: Call, resource: dict[str, Any], reason: str
) -> None:
    batch = validate(spans_request(call, resource=resource), book)
    assert batch.events == ()
    assert reasons(batch) == [reason]


def test_a_contract_run_mode_table_replaces_the_default() -> None:
    genai = {
        "surfaces": [{"surfaceId": "classify-intent", "agentName": "triage"}],
        "runModes": {"staging": "test", "prod-eu": "production"},
        "labels": {"passLabels": ["pass"]},
    }
    book = book_of(genai_contract(genai=genai))
    staging = {"service.name": "billing-api", "deployment.environment.name": "staging"}
    event = only_event(validate(spans_request(CALL, resource=staging), book))
    assert (event.run_mode, event.provenance) == ("test", "exploratory-state")
    production = validate(spans_request(CALL), book)  # 'production' is not in its table
    assert reasons(production)[0].startswith(
        "deployment.environment.name: 'production' is not mapped to a run mode"
    )


def test_the_deprecated_deployment_environment_is_read_where_the_new_one_is_absent() -> None:
    old = {"service.name": "billing-api", "deployment.environment": "test"}
    assert only_event(validate(spans_request(CALL, resource=old))).run_mode == "test"


def test_the_first_matching_surface_rule_of_a_contract_wins() -> None:
    genai = {
        "surfaces": [
            {"surfaceId": "summarize", "agentName": "triage", "operationName": "text_completion"},
            {"surfaceId": "classify-intent", "agentName": "triage"},
        ],
    }
    document = genai_contract(genai=genai)
    document["surfaces"].append({"id": "summarize"})
    book = book_of(document)
    chat = only_event(validate(spans_request(Call([Eval("e", score=1.0)])), book))
    completion = Call([Eval("e", score=1.0)], operation="text_completion")
    assert chat.surface_id == "classify-intent"
    assert only_event(validate(spans_request(completion), book)).surface_id == "summarize"


def test_a_token_that_may_not_write_the_placing_agent_is_refused() -> None:
    principal = Principal("default", agents=frozenset({"support-bot"}))
    batch = validate(spans_request(CALL), principal=principal)
    assert reasons(batch) == [
        f"{AGENT_REJECTED}: 'billing-triage' is not one of the token's agents"
    ]


def test_the_contract_check_holds_mapped_events_to_declared_types() -> None:
    document = genai_contract(dimensions=[{"id": "correctness", "type": "score"}])
    batch = validate(spans_request(Call([Eval("correctness", label="pass")])), book_of(document))
    assert reasons(batch)[0].startswith(
        "contract: dimension correctness: declared type score, the outcome has no score"
    )


def test_a_result_span_without_parent_or_response_id_is_rejected() -> None:
    spans = record_calls([CALL], form="spans")
    request = export_request([s for s in spans if s.name == "gen_ai.evaluation.result"])
    for span in (s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans):
        span.ClearField("parent_span_id")
        del span.attributes[:]
        span.attributes.add(key="gen_ai.evaluation.name").value.string_value = "relevance"
        span.attributes.add(key="gen_ai.evaluation.score.value").value.double_value = 1.0
    batch = validate(request)
    assert batch.events == () and len(batch.quarantined) == 3
    assert set(reasons(batch)) == {
        "gen_ai.evaluation.result: not parented to a span (trace and parent span id) and no"
        " gen_ai.response.id: the operation it evaluates cannot be told"
    }


def test_a_result_span_tied_by_response_id_alone_is_its_operation() -> None:
    spans = record_calls([CALL], form="spans")
    request = export_request([s for s in spans if s.name == "gen_ai.evaluation.result"])
    for span in (s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans):
        span.ClearField("parent_span_id")
        kv = span.attributes.add(key="gen_ai.response.id")
        kv.value.string_value = "chatcmpl-9"
    batch = validate(request, LOG_BOOK)
    event = only_event(batch)
    assert (event.trace_id, event.span_id, event.correlation_id) == ("", "", "chatcmpl-9")
    assert len(event.outcome.dimensions) == 3


def test_holonograph_spans_and_genai_results_in_one_request_both_land() -> None:
    holonograph = record_spans([Evaluation("strm", 0)], seed=5)
    genai = record_calls([CALL])
    batch = validate(export_request([*holonograph, *genai]))
    assert [e.emission is None for e in batch.events] == [False, True]
    assert [(e.stream, e.seq) for e in batch.emissions] == [("strm", 0)]


def test_the_hot_path_leaves_genai_results_to_the_reference() -> None:
    ungoverned = Evaluation("strm", 0, surface="summarize")
    holonograph = record_spans([ungoverned], seed=5, other_spans=2)
    assert fast_batch(export_request(holonograph), contracts=BOOK) is not None
    for request in (
        export_request([*holonograph, *record_calls([CALL])]),
        spans_request(CALL, form="spans"),
    ):
        assert fast_batch(request, contracts=BOOK) is None
        assert validate(request).events
    logs = logs_as_spans(CALL)
    assert fast_batch(logs, contracts=LOG_BOOK) is None
    assert validate(logs, LOG_BOOK).events


def test_a_quarantined_log_record_replays_once_a_contract_places_it() -> None:
    from ingest.replay import revalidate

    request = logs_as_spans(CALL)
    rejected = validate(request, book_of())
    assert len(rejected.quarantined) == 3 and rejected.events == ()
    assert {r.split(" (")[0] for r in reasons(rejected)} == {
        "genai: no contract's genai mapping places this evaluation"
    }
    replayed = [
        revalidate(q.span_proto, q.resource_attributes, "default", LOG_BOOK)
        for q in rejected.quarantined
    ]
    events = [only_event(batch) for batch in replayed]
    assert len({e.event_id for e in events}) == 1  # one operation: one event in the store
    assert [d for e in events for d in e.outcome.dimensions] == list(
        only_event(validate(request, LOG_BOOK)).outcome.dimensions
    )
