"""Realistic evaluation spans per the wire contract, pre-encoded as OTLP requests.

Every request must carry distinct ids (the store deduplicates by event id and by
(stream, seq)), yet encoding protobuf per request would make the client the
bottleneck. So each request shape is encoded once as a *template* whose stream
and event ids contain a fixed-width placeholder; stamping a request is one
`bytes.replace` with its zero-padded number, which keeps every protobuf length
prefix valid. One stream per request, seq 0..batch-1; a sentinel takes every
`sentinel_every`-th position of the global span sequence.
"""

from __future__ import annotations

import base64
import json
import math
import random
import time
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest as PB2ExportTraceServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import KeyValue as PB2KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PB2Span

from ingest.export.decode import to_any_value

PLACEHOLDER = b"QQQQQQQQQQ"
STREAM_PREFIX = "bench-"
PROTOBUF = "protobuf"
JSON = "json"

_SURFACES = ("classify-intent", "draft-reply", "route-ticket", "summarize-thread")
_MODELS = ("openai/gpt-5/2026-05", "anthropic/claude-sonnet-5/2026-04", "google/gemini-3/2026-03")
_PHRASES = (
    "the reply names the refund policy and the exact amount charged twice",
    "the customer is routed to billing with the duplicate charge flagged",
    "the answer stays polite, avoids blame and offers a concrete next step",
    "the intent is classified as refund request with high confidence",
    "the summary keeps the order number, the date and the promised callback",
    "tool call refund_lookup is made once with the order id from the thread",
)


def _kv(key: str, value: Any) -> PB2KeyValue:
    return PB2KeyValue(key=key, value=to_any_value(value))


def _sentence(rng: random.Random, width: int = 80) -> str:
    """About `width` characters of plausible grading text."""
    text = rng.choice(_PHRASES)
    while len(text) < width:
        text += "; " + rng.choice(_PHRASES)
    return text[:width]


@dataclass(frozen=True)
class PayloadSpec:
    batch: int = 512
    sentinel_every: int = 64
    tag: str = "00000000"
    seed: int = 7
    # Evaluations with only the attributes the contract requires and no dimensions
    # (about 0.2 KB each): the most spans a request of a given size can hold.
    minimal: bool = False

    def __post_init__(self) -> None:
        if self.batch < 1 or self.sentinel_every < 1:
            raise ValueError("batch and sentinel_every must be positive")
        if len(self.tag) != 8 or not self.tag.isalnum():
            raise ValueError("tag must be 8 alphanumeric characters")

    @property
    def templates(self) -> int:
        """Distinct request shapes before the sentinel pattern repeats."""
        return self.sentinel_every // math.gcd(self.batch, self.sentinel_every)

    def is_sentinel(self, request_no: int, index: int) -> bool:
        return (request_no * self.batch + index) % self.sentinel_every == self.sentinel_every - 1

    def stream(self, request_no: int) -> str:
        return f"{STREAM_PREFIX}{self.tag}-{request_no:010d}"


def request_number(stream: str) -> int | None:
    """Inverse of `PayloadSpec.stream` (None for streams the bench did not make)."""
    if not stream.startswith(STREAM_PREFIX):
        return None
    tail = stream.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else None


def _evaluation(spec: PayloadSpec, rng: random.Random, index: int, end_ns: int) -> PB2Span:
    stream = f"{STREAM_PREFIX}{spec.tag}-{PLACEHOLDER.decode()}"
    if spec.minimal:
        return PB2Span(
            trace_id=(rng.getrandbits(128) | 1).to_bytes(16, "big"),
            span_id=(rng.getrandbits(63) | 1).to_bytes(8, "big"),
            name="holonograph.evaluation",
            end_time_unix_nano=end_ns,
            attributes=[
                _kv("holonograph.event.id", f"evt_{spec.tag}_{PLACEHOLDER.decode()}_{index:05d}"),
                _kv("holonograph.surface.id", "s"),
                _kv("holonograph.run_mode", "production"),
                _kv("holonograph.emission.stream", stream),
                _kv("holonograph.emission.seq", index),
            ],
        )
    attributes = [
        _kv("holonograph.event.id", f"evt_{spec.tag}_{PLACEHOLDER.decode()}_{index:05d}"),
        _kv("holonograph.surface.id", rng.choice(_SURFACES)),
        _kv("holonograph.agent.id", "billing-triage"),
        _kv("holonograph.run_mode", "production"),
        _kv("holonograph.correlation.id", f"corr_{rng.getrandbits(64):016x}"),
        _kv("holonograph.emission.stream", stream),
        _kv("holonograph.emission.seq", index),
        _kv("holonograph.lens.version", "lv_2026_07_01"),
        _kv("holonograph.light_source.id", rng.choice(_MODELS)),
        _kv("holonograph.substrate.prompt_hash", f"v2-sha256-{rng.getrandbits(16):04x}"),
        _kv("holonograph.cohort_tags", ["customer-tier=enterprise", "fix_tier=tool-input-schema"]),
        _kv("holonograph.latency_ms", round(rng.uniform(200, 3000), 3)),
        _kv("holonograph.tokens.input", rng.randint(50, 2000)),
        _kv("holonograph.tokens.output", rng.randint(20, 900)),
    ]
    events = [
        PB2Span.Event(
            time_unix_nano=end_ns,
            name="holonograph.dimension",
            attributes=[
                _kv("holonograph.dimension.id", "correctness"),
                _kv("holonograph.dimension.passed", rng.random() < 0.9),
                _kv("holonograph.dimension.expected", _sentence(rng)),
                _kv("holonograph.dimension.actual", _sentence(rng)),
            ],
        ),
        PB2Span.Event(
            time_unix_nano=end_ns,
            name="holonograph.dimension",
            attributes=[
                _kv("holonograph.dimension.id", "tone"),
                _kv("holonograph.dimension.score", round(rng.random(), 4)),
                _kv("holonograph.dimension.expected", _sentence(rng)),
                _kv("holonograph.dimension.actual", _sentence(rng)),
                _kv("holonograph.dimension.judge", "anthropic/claude-haiku-5/2026-02"),
            ],
        ),
    ]
    return PB2Span(
        trace_id=(rng.getrandbits(128) | 1).to_bytes(16, "big"),
        span_id=(rng.getrandbits(63) | 1).to_bytes(8, "big"),
        name="holonograph.evaluation",
        kind=PB2Span.SPAN_KIND_INTERNAL,
        start_time_unix_nano=end_ns - 5_000_000,
        end_time_unix_nano=end_ns,
        attributes=attributes,
        events=events,
    )


def _sentinel(spec: PayloadSpec, rng: random.Random, index: int, end_ns: int) -> PB2Span:
    stream = f"{STREAM_PREFIX}{spec.tag}-{PLACEHOLDER.decode()}"
    return PB2Span(
        trace_id=(rng.getrandbits(128) | 1).to_bytes(16, "big"),
        span_id=(rng.getrandbits(63) | 1).to_bytes(8, "big"),
        name="holonograph.session.sentinel",
        kind=PB2Span.SPAN_KIND_INTERNAL,
        start_time_unix_nano=end_ns - 1_000_000,
        end_time_unix_nano=end_ns,
        attributes=[
            _kv("holonograph.emission.stream", stream),
            _kv("holonograph.emission.seq", index),
            _kv("holonograph.sentinel.interval_ms", 30_000),
            _kv("holonograph.completeness.offered", spec.sentinel_every),
            _kv("holonograph.completeness.delivered", spec.sentinel_every),
            _kv("holonograph.completeness.dropped", 0),
            _kv("holonograph.completeness.failed", 0),
        ],
    )


def build_request(spec: PayloadSpec, template: int, now_ns: int) -> PB2ExportTraceServiceRequest:
    """The request shape shared by every request number `r` with r % templates == template."""
    rng = random.Random(spec.seed * 1_000_003 + template)
    request = PB2ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.extend(
        [
            _kv("service.name", "billing-triage-agent"),
            _kv("service.instance.id", "pod-7f9c"),
            _kv("telemetry.sdk.language", "python"),
            _kv("telemetry.sdk.name", "opentelemetry"),
        ]
    )
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.name = "@holonograph/client"
    scope_spans.scope.version = "0.3.0"
    for index in range(spec.batch):
        end_ns = now_ns + index * 1_000
        make = _sentinel if spec.is_sentinel(template, index) else _evaluation
        scope_spans.spans.append(make(spec, rng, index, end_ns))
    return request


def to_otlp_json(request: PB2ExportTraceServiceRequest) -> bytes:
    """OTLP/JSON: protobuf JSON mapping, but trace and span ids as hex."""
    document = json_format.MessageToDict(request)
    for resource_spans in document.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(document, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Template:
    body: bytes
    evaluations: int
    sentinels: int


class RequestFactory:
    """Pre-encoded templates; `body(r)` stamps request number `r` into one of them."""

    def __init__(self, spec: PayloadSpec, encoding: str = PROTOBUF, now_ns: int = 0) -> None:
        if encoding not in (PROTOBUF, JSON):
            raise ValueError(f"encoding must be {PROTOBUF} or {JSON}")
        self.spec = spec
        self.encoding = encoding
        now_ns = now_ns or time.time_ns()
        self._templates: list[Template] = []
        for template in range(spec.templates):
            request = build_request(spec, template, now_ns)
            body = request.SerializeToString() if encoding == PROTOBUF else to_otlp_json(request)
            sentinels = sum(spec.is_sentinel(template, i) for i in range(spec.batch))
            self._templates.append(Template(body, spec.batch - sentinels, sentinels))

    def template(self, request_no: int) -> Template:
        return self._templates[request_no % len(self._templates)]

    def body(self, request_no: int) -> bytes:
        if not 0 <= request_no < 10**10:
            raise ValueError("request number out of range")
        return self.template(request_no).body.replace(PLACEHOLDER, b"%010d" % request_no)

    def spans(self, request_no: int) -> int:
        return self.spec.batch

    @property
    def mean_request_bytes(self) -> float:
        return sum(len(t.body) for t in self._templates) / len(self._templates)
