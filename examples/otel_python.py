"""Send Holonograph evaluation spans with the official OpenTelemetry Python SDK.

    pip install opentelemetry-sdk opentelemetry-exporter-otlp-proto-http
    holonograph serve                                    # in another terminal
    python examples/otel_python.py --endpoint http://127.0.0.1:4318

What a Holonograph client with `emit.mode = "otlp"` puts on the wire (schemas/WIRE.md),
done by hand with a plain tracer, so any OpenTelemetry-instrumented app can do it:

- one `holonograph.evaluation` span per evaluation, carrying its four layers
  (substrate, light source, lens, outcome) as `holonograph.*` attributes;
- one `holonograph.dimension` span event per graded dimension (`passed` and/or `score`);
- every span carries its emission stream and the next ordinal on it (0, 1, 2, ...),
  assigned when the event is recorded, so the collector can count what never arrived;
- a `holonograph.session.sentinel` now and then, with the client's own counters;
- at shutdown a last sentinel with `holonograph.emission.final = true`: the stream
  stopped cleanly (without it, a silent stream is eventually reported `dead`).

Then see what arrived: `holonograph completeness --stream <the stream printed>`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import sys
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

import requests
from google.protobuf.message import DecodeError
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Tracer
from opentelemetry.util.types import AttributeValue

Attributes = dict[str, AttributeValue]

SENTINEL_INTERVAL_MS = 30_000


def rfc3339(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class EmissionStream:
    """One client instance's stream: its id, the next ordinal, and what it counted
    since the last sentinel (offered = recorded; delivered/failed = exporter results)."""

    stream_id: str = field(default_factory=lambda: f"stream_{uuid.uuid4().hex[:12]}")
    next_seq: int = 0
    offered: int = 0
    delivered: int = 0
    failed: int = 0
    window_start: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Over the whole run, for the exit code: spans the exporter could not deliver, and
    # spans the collector answered it rejected (OTLP partial success), with its reason.
    undelivered: int = 0
    rejected: int = 0
    rejection: str = ""

    def take_seq(self, event: bool = True) -> int:
        """The next ordinal; an event (not a sentinel) also counts as offered."""
        with self.lock:
            seq, self.next_seq = self.next_seq, self.next_seq + 1
            self.offered += event
            return seq

    def exported(self, spans: int, ok: bool) -> None:
        with self.lock:
            if ok:
                self.delivered += spans
            else:
                self.failed += spans
                self.undelivered += spans

    def answered(self, response: requests.Response, *args: object, **kwargs: object) -> None:
        """A `requests` response hook: an OTLP success may still reject some spans
        (partial success, with the collector's reason); count them."""
        if response.status_code != 200 or not response.content:
            return
        answer = ExportTraceServiceResponse()
        try:
            answer.ParseFromString(response.content)
        except DecodeError:
            return
        if answer.partial_success.rejected_spans:
            with self.lock:
                self.rejected += answer.partial_success.rejected_spans
                self.rejection = answer.partial_success.error_message

    def close_window(self) -> Attributes:
        """The counters of the window that ends now (they start again at zero)."""
        with self.lock:
            now = dt.datetime.now(dt.UTC)
            counters: Attributes = {
                "holonograph.completeness.offered": self.offered,
                "holonograph.completeness.delivered": self.delivered,
                "holonograph.completeness.dropped": 0,  # the queue below is large enough
                "holonograph.completeness.failed": self.failed,
                "holonograph.completeness.window_start": rfc3339(self.window_start),
                "holonograph.completeness.window_end": rfc3339(now),
            }
            self.offered = self.delivered = self.failed = 0
            self.window_start = now
            return counters


class CountingExporter(SpanExporter):
    """The OTLP exporter, with each result counted on the stream for its sentinels."""

    def __init__(self, inner: SpanExporter, stream: EmissionStream) -> None:
        self._inner = inner
        self._stream = stream

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self._inner.export(spans)
        self._stream.exported(len(spans), result is SpanExportResult.SUCCESS)
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._inner.force_flush(timeout_millis)


@dataclass
class Dimension:
    id: str
    passed: bool | None = None
    score: float | None = None
    expected: str | None = None
    actual: str | None = None

    def attributes(self) -> Attributes:
        attrs: Attributes = {"holonograph.dimension.id": self.id}
        for name in ("passed", "score", "expected", "actual"):
            value = getattr(self, name)
            if value is not None:
                attrs[f"holonograph.dimension.{name}"] = value
        return attrs


def record_evaluation(
    tracer: Tracer,
    stream: EmissionStream,
    surface_id: str,
    dimensions: Sequence[Dimension],
    *,
    run_mode: str = "production",
    light_source: str = "openai/gpt-5/2026-05",  # a version of a routed light source
    lens_version: str = "lv_2026_07_01",
    prompt_hash: str = "ph_3f9a",
) -> str:
    """One evaluation span with its dimension events; returns its event id."""
    event_id = f"evt_{uuid.uuid4().hex[:16]}"
    attributes: Attributes = {
        "holonograph.event.id": event_id,
        "holonograph.surface.id": surface_id,
        "holonograph.run_mode": run_mode,  # required: a span without it is rejected
        "holonograph.emission.stream": stream.stream_id,
        "holonograph.emission.seq": stream.take_seq(),
        "holonograph.agent.id": "billing-triage",
        "holonograph.lens.version": lens_version,
        "holonograph.light_source.id": light_source,
        "holonograph.substrate.prompt_hash": prompt_hash,
        "holonograph.latency_ms": round(random.uniform(200, 900), 1),
        "holonograph.sdk.name": "examples/otel_python.py",
    }
    with tracer.start_as_current_span("holonograph.evaluation", attributes=attributes) as span:
        for dimension in dimensions:
            span.add_event("holonograph.dimension", dimension.attributes())
    return event_id


def record_sentinel(tracer: Tracer, stream: EmissionStream, *, final: bool = False) -> None:
    """A sentinel: an ordinal of its own, the interval, and the window's counters."""
    attributes: Attributes = {
        "holonograph.emission.stream": stream.stream_id,
        "holonograph.emission.seq": stream.take_seq(event=False),
        "holonograph.sentinel.interval_ms": SENTINEL_INTERVAL_MS,
        **stream.close_window(),
    }
    if final:
        attributes["holonograph.emission.final"] = True
    tracer.start_span("holonograph.session.sentinel", attributes=attributes).end()


def correctness(passed: bool) -> Dimension:
    """The README's contract (docs/examples/contracts/billing-triage.json) declares
    correctness a score: the grade carries one beside pass/fail."""
    return Dimension("correctness", passed=passed, score=1.0 if passed else 0.0, expected="refund")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", default="http://127.0.0.1:4318", help="OTLP/HTTP base URL")
    parser.add_argument("--evaluations", type=int, default=6, help="evaluations to send")
    parser.add_argument("--seed", type=int, default=7, help="seed of the made-up outcomes")
    args = parser.parse_args(argv)
    random.seed(args.seed)

    stream = EmissionStream()
    session = requests.Session()
    session.hooks["response"].append(stream.answered)
    endpoint = f"{args.endpoint.rstrip('/')}/v1/traces"
    exporter = CountingExporter(OTLPSpanExporter(endpoint, timeout=10, session=session), stream)
    provider = TracerProvider(resource=Resource.create({"service.name": "billing-triage-agent"}))
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=8192))
    tracer = provider.get_tracer("examples/otel_python.py", "1.0")

    sentinels = 0
    for index in range(args.evaluations):
        record_evaluation(
            tracer,
            stream,
            "classify-intent",
            [
                correctness(random.random() < 0.9),
                Dimension("tone", score=round(random.uniform(0.6, 1.0), 3)),
            ],
        )
        if index == args.evaluations // 2:
            record_sentinel(tracer, stream)  # a real client does this on a timer
            sentinels += 1
    record_sentinel(tracer, stream, final=True)
    provider.shutdown()  # flushes: the final sentinel goes out before we exit
    spans = args.evaluations + sentinels + 1
    if stream.undelivered:  # never say "sent" for what did not arrive
        print(
            f"error: {stream.undelivered} of {spans} span(s) could not be exported to"
            f" {endpoint} (is `holonograph serve` listening there?)",
            file=sys.stderr,
        )
        return 1
    if stream.rejected:
        print(
            f"error: the collector rejected {stream.rejected} of {spans} span(s):"
            f" {stream.rejection} (see `holonograph quarantine`)",
            file=sys.stderr,
        )
        return 1
    print(
        f"sent {args.evaluations} evaluation(s) and {sentinels + 1} sentinel(s)"
        f" on {stream.stream_id}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
