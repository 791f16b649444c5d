"""The sidecar collector configuration (`deploy/otel-collector.yaml`) checked as the
OpenTelemetry Collector reads it, without a collector binary: its structure by the
collector's configuration rules (component ids, every pipeline's components defined,
each filter configured for the signals of its pipelines), and its routing by evaluating
its filter conditions (`testkit.ottl`) on spans and log records the official SDK builds:
holonograph spans and both forms of GenAI evaluation results reach the receiver, the
rest the application's own backend."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk.trace import ReadableSpan

from testkit.ottl import matches, parse
from tests.genai_emit import Call, Eval, record_call_logs, record_calls
from tests.otel_emit import Evaluation, Sentinel, record_spans

CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "otel-collector.yaml"
SECTIONS = {"extensions", "receivers", "processors", "exporters", "connectors", "service"}
# Component types this configuration uses, per kind, and the signals each handles.
TYPES = {
    "receivers": {"otlp": {"traces", "logs", "metrics"}},
    "processors": {
        "memory_limiter": {"traces", "logs", "metrics"},
        "filter": {"traces", "logs", "metrics"},
        "batch": {"traces", "logs", "metrics"},
    },
    "exporters": {"otlp": {"traces", "logs", "metrics"}, "debug": {"traces", "logs", "metrics"}},
    "extensions": {"health_check": set(), "file_storage": set()},
}
# Where a filter processor's conditions sit for each signal (OTTL context).
FILTER_CONTEXTS = {"traces": ("traces", "span"), "logs": ("logs", "log_record")}
COMPONENT_ID = re.compile(r"^(?P<type>[a-z0-9_]+)(?:/[^/\s]+)?$")
PIPELINE_ID = re.compile(r"^(?P<signal>traces|logs|metrics)(?:/[^/\s]+)?$")


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(CONFIG.read_text())
    return loaded


def pipelines(config: dict[str, Any]) -> dict[str, dict[str, list[str]]]:
    found: dict[str, dict[str, list[str]]] = config["service"]["pipelines"]
    return found


def test_the_configuration_follows_the_collectors_rules(config: dict[str, Any]) -> None:
    assert set(config) <= SECTIONS
    for kind, known in TYPES.items():
        for component in config.get(kind) or {}:
            match = COMPONENT_ID.match(component)
            assert match and match["type"] in known, f"{kind}: {component}"
    assert set(config["service"]["extensions"]) <= set(config["extensions"])
    for name, pipeline in pipelines(config).items():
        match = PIPELINE_ID.match(name)
        assert match, name
        signal = match["signal"]
        assert set(pipeline) <= {"receivers", "processors", "exporters"}, name
        assert pipeline["receivers"] and pipeline["exporters"], name
        for kind in ("receivers", "processors", "exporters"):
            for component in pipeline.get(kind, []):
                assert component in (config[kind] or {}), f"{name}: {component} is not defined"
                kind_type = COMPONENT_ID.match(component)
                assert kind_type and signal in TYPES[kind][kind_type["type"]]
        processors = pipeline.get("processors", [])
        assert processors[:1] == ["memory_limiter"], f"{name}: memory_limiter goes first"
        for component in processors:
            if component.startswith("filter"):
                settings = config["processors"][component]
                assert set(settings) - {"error_mode"} == {FILTER_CONTEXTS[signal][0]}, (
                    f"{component} in {name} filters another signal"
                )
                for condition in _conditions(settings, signal):
                    parse(condition)  # every condition is OTTL this test can evaluate


def _conditions(settings: dict[str, Any], signal: str) -> list[str]:
    section, context = FILTER_CONTEXTS[signal]
    conditions: list[str] = settings.get(section, {}).get(context, [])
    return conditions


def passes(config: dict[str, Any], pipeline: str, item: dict[str, Any]) -> bool:
    """Whether `item` comes out of the pipeline's filters (a filter drops what any of
    its conditions matches)."""
    signal = pipeline.split("/", 1)[0]
    for component in pipelines(config)[pipeline].get("processors", []):
        if component.startswith("filter"):
            settings = config["processors"][component]
            if any(matches(c, item) for c in _conditions(settings, signal)):
                return False
    return True


def span_item(span: ReadableSpan) -> dict[str, Any]:
    return {
        "name": span.name,
        "attributes": dict(span.attributes or {}),
        "resource": {"attributes": dict(span.resource.attributes)},
    }


def log_item(record: ReadableLogRecord) -> dict[str, Any]:
    log = record.log_record
    return {
        "event_name": log.event_name or "",
        "attributes": dict(log.attributes or {}),
        "resource": {"attributes": dict(record.resource.attributes)},
    }


CALL = Call([Eval("relevance", score=4.0), Eval("correctness", label="pass")])


def test_holonograph_spans_and_both_forms_of_genai_results_reach_the_receiver(
    config: dict[str, Any],
) -> None:
    holonograph = record_spans([Evaluation("s", 0), Sentinel("s", 1)], other_spans=1)
    *ours, other = holonograph
    with_events = record_calls([CALL])
    result_spans = [s for s in record_calls([CALL], form="spans") if s.name.startswith("gen_ai")]
    operations, results = record_call_logs([CALL])
    _, legacy = record_call_logs([CALL], event_name=False)
    *result_logs, plain_log = results

    for span in [*ours, *with_events, *operations, *result_spans]:
        assert passes(config, "traces/holonograph", span_item(span)), span.name
    assert not passes(config, "traces/holonograph", span_item(other))
    for record in [*result_logs, *legacy[:-1]]:
        assert passes(config, "logs/holonograph", log_item(record))
    assert not passes(config, "logs/holonograph", log_item(plain_log))
    for name in ("traces/holonograph", "logs/holonograph"):
        assert pipelines(config)[name]["exporters"] == ["otlp/holonograph"]
        assert not any(p.startswith("batch") for p in pipelines(config)[name]["processors"])


def test_the_applications_own_backend_gets_everything_but_holonograph_spans(
    config: dict[str, Any],
) -> None:
    holonograph = record_spans([Evaluation("s", 0)], other_spans=1)
    operations, records = record_call_logs([CALL])
    assert [passes(config, "traces/other", span_item(s)) for s in holonograph] == [False, True]
    for span in [*record_calls([CALL]), *operations]:
        assert passes(config, "traces/other", span_item(span))
    for record in records:
        assert passes(config, "logs/other", log_item(record))


@pytest.mark.parametrize(
    ("condition", "item", "expected"),
    [
        ('name == "a"', {"name": "a"}, True),
        ('name != "a"', {"name": "b"}, True),
        ('attributes["k"] == nil', {"attributes": {}}, True),
        ('attributes["k"] != "v"', {"attributes": {}}, True),  # nil is not a string
        ('not IsMatch(name, "^holonograph\\\\.")', {"name": "holonographX"}, True),
        ('IsMatch(name, "^holonograph\\\\.") or event_name == "x"', {"event_name": "x"}, True),
        ('(name == "a" or name == "b") and not attributes["k"] == "1"', {"name": "b"}, True),
        ('resource.attributes["service.name"] == "svc"', {"resource": {"attributes": {}}}, False),
    ],
)
def test_the_ottl_subset_reads_as_ottl_does(
    condition: str, item: dict[str, Any], expected: bool
) -> None:
    assert matches(condition, item) is expected


@pytest.mark.parametrize("condition", ["Len(name) > 3", "name ==", 'span.name == "a"'])
def test_ottl_beyond_the_subset_is_refused(condition: str) -> None:
    with pytest.raises(SyntaxError):
        parse(condition)
