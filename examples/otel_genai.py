"""Send OpenTelemetry GenAI evaluation results with the official OpenTelemetry Python SDK.

    pip install opentelemetry-sdk opentelemetry-exporter-otlp-proto-http
    holonograph serve                                    # in another terminal
    python examples/otel_genai.py --endpoint http://127.0.0.1:4318

What a GenAI-instrumented application (or an evaluation tool such as OpenLIT) emits, per
the OpenTelemetry GenAI semantic conventions, done by hand with a plain tracer and logger:

- one operation span per model call, `chat gpt-5`, with `gen_ai.operation.name`,
  `gen_ai.agent.name`, `gen_ai.provider.name`, the requested and served models and
  the token usage;
- its evaluation results as `gen_ai.evaluation.result` events: on half of the calls as
  span events of the operation span, on the other half as log records emitted in the
  operation's context (the logs SDK and its OTLP exporter), the form the conventions
  are moving to;
- the resource's `service.name` and `deployment.environment.name`.

GenAI telemetry names no Holonograph surface and no run mode, so first the example
registers a contract whose `genai` block places these results
(`examples/genai-contract.json`, over the receiver's HTTP API: what `holonograph
contract register` does). See docs/genai.md. Then see what arrived:
`holonograph completeness --surface answer-billing-question` (unknown: these results
carry no emission ordinals) and `holonograph query`.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import (
    BatchLogRecordProcessor,
    LogRecordExporter,
    LogRecordExportResult,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.util.types import AttributeValue

Attributes = dict[str, AttributeValue]
RESULT = "gen_ai.evaluation.result"
CONTRACT = Path(__file__).with_name("genai-contract.json")


class Counted:
    """How many spans and log records the exporters delivered, and failed to."""

    def __init__(self) -> None:
        self.delivered = 0
        self.failed = 0


class CountingSpanExporter(SpanExporter):
    def __init__(self, inner: SpanExporter, counted: Counted) -> None:
        self._inner, self._counted = inner, counted

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self._inner.export(spans)
        ok = result is SpanExportResult.SUCCESS
        self._counted.delivered += len(spans) if ok else 0
        self._counted.failed += 0 if ok else len(spans)
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._inner.force_flush(timeout_millis)


class CountingLogExporter(LogRecordExporter):
    def __init__(self, inner: LogRecordExporter, counted: Counted) -> None:
        self._inner, self._counted = inner, counted

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        result = self._inner.export(batch)
        ok = result is LogRecordExportResult.SUCCESS
        self._counted.delivered += len(batch) if ok else 0
        self._counted.failed += 0 if ok else len(batch)
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()  # type: ignore[no-untyped-call]

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._inner.force_flush(timeout_millis)


def register_contract(endpoint: str, token: str | None) -> str:
    """The contract, registered over the receiver's HTTP API; its version id."""
    headers = {"Content-Type": "application/json", "x-holonograph-run-mode": "production"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(
        f"{endpoint}/holonograph/contract", data=CONTRACT.read_bytes(), headers=headers
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        summary = json.loads(reply.read())
    return str(summary["versionId"])


def results(rng: random.Random, response_id: str) -> list[Attributes]:
    """What three evaluators said of one response (the conventions' attributes only)."""
    relevance = rng.choice([3.0, 4.0, 4.0, 5.0])
    correct = rng.random() < 0.85
    return [
        {
            "gen_ai.evaluation.name": "relevance",
            "gen_ai.evaluation.score.value": relevance,
            "gen_ai.evaluation.explanation": f"rated {relevance:g} of 5 by the judge",
            "gen_ai.response.id": response_id,
        },
        {
            "gen_ai.evaluation.name": "correctness",
            "gen_ai.evaluation.score.label": "pass" if correct else "fail",
            "gen_ai.response.id": response_id,
        },
        {
            "gen_ai.evaluation.name": "hallucination",
            "gen_ai.evaluation.score.label": "no" if rng.random() < 0.95 else "yes",
            "gen_ai.response.id": response_id,
        },
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", default="http://127.0.0.1:4318", help="OTLP/HTTP base URL")
    parser.add_argument("--token", help="bearer token, when the receiver requires one")
    parser.add_argument("--calls", type=int, default=6, help="model calls to send")
    parser.add_argument("--seed", type=int, default=7, help="seed of the made-up outcomes")
    parser.add_argument("--no-contract", action="store_true", help="do not register it")
    args = parser.parse_args(argv)
    endpoint = args.endpoint.rstrip("/")
    rng = random.Random(args.seed)
    if not args.no_contract:
        try:
            version = register_contract(endpoint, args.token)
        except (OSError, ValueError, KeyError) as err:  # URLError and HTTPError are OSErrors
            print(
                f"error: could not register {CONTRACT.name} at {endpoint}: {err}", file=sys.stderr
            )
            return 1
        print(f"registered {CONTRACT.name}: version {version}")

    headers = {"Authorization": f"Bearer {args.token}"} if args.token else None
    resource = Resource.create(
        {"service.name": "billing-api", "deployment.environment.name": "production"}
    )
    counted = Counted()
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(
        BatchSpanProcessor(
            CountingSpanExporter(
                OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces", headers=headers, timeout=10),
                counted,
            )
        )
    )
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(
        BatchLogRecordProcessor(
            CountingLogExporter(
                OTLPLogExporter(endpoint=f"{endpoint}/v1/logs", headers=headers, timeout=10),
                counted,
            )
        )
    )
    tracer = tracer_provider.get_tracer("examples/otel_genai.py", "1.0")
    logger = logger_provider.get_logger("examples/otel_genai.py", "1.0")

    as_events = as_logs = 0
    for call in range(args.calls):
        response_id = f"chatcmpl-{args.seed}-{call}"
        attributes: Attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.agent.name": "billing-assistant",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-5",
            "gen_ai.response.model": "gpt-5-2025-08-07",
            "gen_ai.response.id": response_id,
            "gen_ai.usage.input_tokens": rng.randint(120, 400),
            "gen_ai.usage.output_tokens": rng.randint(40, 600),
        }
        graded = results(rng, response_id)
        span = tracer.start_span("chat gpt-5", kind=trace.SpanKind.CLIENT, attributes=attributes)
        if call % 2 == 0:  # as span events of the operation span
            for result in graded:
                span.add_event(RESULT, result)
            as_events += len(graded)
        span.end()
        if call % 2 == 1:  # as log records, in the operation's context, after it ended
            context = trace.set_span_in_context(span)
            for result in graded:
                logger.emit(event_name=RESULT, attributes=result, context=context)
            as_logs += len(graded)
    tracer_provider.shutdown()  # flushes both before we exit
    logger_provider.shutdown()
    if counted.failed:  # never "sent" for what did not arrive
        print(
            f"error: {counted.failed} of {counted.failed + counted.delivered} span(s) and log"
            f" record(s) could not be exported to {endpoint}",
            file=sys.stderr,
        )
        return 1
    print(
        f"sent {args.calls} GenAI operation(s): {as_events} evaluation result(s) as span"
        f" events, {as_logs} as log records ({counted.delivered} spans and log records"
        f" delivered, {counted.failed} failed)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
