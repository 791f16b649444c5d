"""What `holonograph demo` sends: days of multiplexed calls on a few surfaces of one agent,
as evaluation spans and session sentinels built with the OpenTelemetry SDK tracer and
sent with its OTLP/HTTP exporter (as any instrumented app would), then one deploy
through the change API and a few human overrides through `POST /hil/override`.

The truth planted in it, which the analyses should find:

- the first surface's primary vendor ships a new version (`acme/m/2026-05` ->
  `acme/m/2026-10`, recorded on the events) halfway through, and its pass rate drops
  from 0.88 to 0.62 while the observer, on the same calls, stays at 0.80 (`drift`);
- a deploy of the agent is recorded at that moment (`drift` cites it, `changes` lists it);
- every call has a primary and an observer sharing its correlation id and no call falls
  back (`compare`: paired on every call, zero fallbacks);
- on one day the second surface's primary stream dropped events, and its sentinel says
  so (`completeness`: a gap the client counted);
- a few failed calls after the change were corrected by a human (`lessons`).

Everything comes from the seed and the window's end: the same plan sends the same
spans (same event ids, so a second run is a replay the store deduplicates).
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import requests
from google.protobuf.message import DecodeError
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator

from holonograph.demo.calls import MultiplexSurface, MxCall, emissions, generate

AGENT = "support-agent"
SURFACES = ("answer-question", "classify-intent", "summarize-ticket", "route-ticket", "draft-reply")
PRIMARY, VERSIONS = "acme/m", ("acme/m/2026-05", "acme/m/2026-10")
OBSERVER, OBSERVER_SERVED = "beta/o", "beta/o/2026-04"
DIMENSION = "correctness"
RATES_BEFORE, RATES_AFTER, OBSERVER_RATE = 0.88, 0.62, 0.80
STEADY_RATES = (0.84, 0.78, 0.9, 0.72)  # the other surfaces' primaries, constant
GAP_SHARE = 0.3  # of the gap day's primary events on the second surface
SENTINEL_INTERVAL_MS = 60_000
_HOUR = dt.timedelta(hours=1)
_NS = 1_000_000_000


class DemoFailed(Exception):
    """The collector did not take what the demo sent (unreachable, refused, rejected)."""


@dataclass(frozen=True)
class DemoPlan:
    """`days` of calls ending at `until` (an hour boundary) on `surfaces` surfaces."""

    until: dt.datetime
    days: int = 14
    surfaces: int = 3
    calls_per_day: int = 120
    overrides: int = 5
    seed: int = 7

    def __post_init__(self) -> None:
        if not 1 <= self.surfaces <= len(SURFACES):
            raise ValueError(f"surfaces must be 1..{len(SURFACES)}")
        if self.days < 2 or self.calls_per_day < 24:
            raise ValueError("a demo needs at least 2 days of at least 24 calls a day")

    @property
    def start(self) -> dt.datetime:
        return self.until - dt.timedelta(days=self.days)

    @property
    def change_at(self) -> dt.datetime:
        """When the first surface's primary vendor changed (and the deploy happened)."""
        return self.start + self.specs()[0].change_at * _HOUR

    @property
    def gap_surface(self) -> str:
        return SURFACES[min(1, self.surfaces - 1)]

    @property
    def gap_day(self) -> dt.date:
        return (self.start + dt.timedelta(days=self.days // 3, hours=12)).date()

    @property
    def gap_stream(self) -> str:
        return f"{self.gap_surface}/primary/{self.gap_day:%Y-%m-%d}"

    @property
    def deploy_id(self) -> str:
        return f"demo-deploy-{self.change_at:%Y%m%dT%H}"

    def specs(self) -> list[MultiplexSurface]:
        buckets = self.days * 24
        per_hour = max(1, round(self.calls_per_day / 24))
        specs = []
        for index, surface in enumerate(SURFACES[: self.surfaces]):
            changed = index == 0
            steady = STEADY_RATES[(index - 1) % len(STEADY_RATES)]
            specs.append(
                MultiplexSurface(
                    surface_id=surface,
                    agent_id=AGENT,
                    start=self.start,
                    buckets=buckets,
                    calls=(per_hour, per_hour),
                    primary=PRIMARY,
                    versions=VERSIONS,
                    observer=OBSERVER,
                    observer_served=OBSERVER_SERVED,
                    change_at=buckets // 2 if changed else buckets,
                    recorded=True,
                    primary_rate=(RATES_BEFORE, RATES_AFTER) if changed else (steady, steady),
                    observer_rate=(OBSERVER_RATE, OBSERVER_RATE),
                    fallback=0.0,
                    dimension_id=DIMENSION,
                    id_prefix=f"{self.start:%Y%m%d%H}-",
                )
            )
        return specs


@dataclass(frozen=True)
class _Item:
    """One span to record: an evaluation (with its outcome) or a sentinel."""

    end_ns: int
    name: str
    attributes: dict[str, Any]
    passed: bool | None = None


@dataclass
class _Stream:
    first_ns: int
    last_ns: int
    next_seq: int = 0
    offered: int = 0
    dropped: int = 0


@dataclass
class DemoSummary:
    """What was sent, and where the planted truth is."""

    plan: DemoPlan
    endpoint: str
    spans: int = 0
    evaluations: int = 0
    sentinels: int = 0
    calls: int = 0
    dropped: int = 0
    overrides: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        plan = self.plan
        return {
            "endpoint": self.endpoint,
            "agentId": AGENT,
            "surfaces": list(SURFACES[: plan.surfaces]),
            "since": plan.start,
            "until": plan.until,
            "calls": self.calls,
            "spans": self.spans,
            "evaluations": self.evaluations,
            "sentinels": self.sentinels,
            "plantedChange": {
                "surfaceId": SURFACES[0],
                "at": plan.change_at,
                "lightSource": {"from": VERSIONS[0], "to": VERSIONS[1]},
                "primaryPassRate": {"from": RATES_BEFORE, "to": RATES_AFTER},
            },
            "deploy": {"id": plan.deploy_id, "at": plan.change_at},
            "deliveryGap": {"stream": plan.gap_stream, "dropped": self.dropped},
            "overrides": self.overrides,
        }


def _items(plan: DemoPlan) -> tuple[list[_Item], list[MxCall], int]:
    """Every span of the plan in time order, the calls, and the events the gap dropped."""
    items: list[_Item] = []
    calls_out: list[MxCall] = []
    dropped_total = 0
    for spec in plan.specs():
        calls = generate(spec, plan.seed)
        calls_out.extend(calls)
        laid = list(emissions(spec, calls))
        sizes: dict[str, int] = {}
        for _, _, stream_id, _ in laid:
            sizes[stream_id] = sizes.get(stream_id, 0) + 1
        streams: dict[str, _Stream] = {}
        for call, event, stream_id, seq in laid:
            end = int(call.timestamp.timestamp() * _NS)
            stream = streams.setdefault(stream_id, _Stream(end, end))
            stream.last_ns, stream.next_seq = end, seq + 1
            stream.offered += 1
            if stream_id == plan.gap_stream and _in_gap(seq, sizes[stream_id]):
                stream.dropped += 1  # lost in the client's buffer: never exported
                continue
            attributes = {
                "holonograph.event.id": event.event_id,
                "holonograph.surface.id": spec.surface_id,
                "holonograph.agent.id": spec.agent_id,
                "holonograph.run_mode": spec.run_mode,
                "holonograph.emission.stream": stream_id,
                "holonograph.emission.seq": seq,
                "holonograph.correlation.id": call.correlation_id,
                "holonograph.lens.version": "lv_1",
                "holonograph.light_source.id": event.served,
                "holonograph.light_source.requested": event.requested,
                "holonograph.multiplex.role": event.role,
                "holonograph.sdk.name": "holonograph demo",
            }
            items.append(_Item(end, "holonograph.evaluation", attributes, event.passed))
        for stream_id, stream in streams.items():
            dropped_total += stream.dropped
            items.append(_sentinel(stream_id, stream))
    items.sort(key=lambda item: item.end_ns)
    return items, calls_out, dropped_total


def _in_gap(seq: int, size: int) -> bool:
    low = int(size * (0.5 - GAP_SHARE / 2))
    return low <= seq < low + max(1, int(size * GAP_SHARE))


def _sentinel(stream_id: str, stream: _Stream) -> _Item:
    """The stream's last word: its counters over the day, and that it ended cleanly."""
    end = stream.last_ns + _NS
    return _Item(
        end,
        "holonograph.session.sentinel",
        {
            "holonograph.emission.stream": stream_id,
            "holonograph.emission.seq": stream.next_seq,
            "holonograph.emission.final": True,
            "holonograph.sentinel.interval_ms": SENTINEL_INTERVAL_MS,
            "holonograph.completeness.offered": stream.offered,
            "holonograph.completeness.delivered": stream.offered - stream.dropped,
            "holonograph.completeness.dropped": stream.dropped,
            "holonograph.completeness.failed": 0,
            "holonograph.completeness.window_start": _rfc3339(stream.first_ns),
            "holonograph.completeness.window_end": _rfc3339(end),
        },
    )


def _rfc3339(ns: int) -> str:
    moment = dt.datetime.fromtimestamp(ns / _NS, dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class SeededIds(IdGenerator):
    """Trace and span ids from a seed: the same flags send the same spans (the tests'
    emitters use it too)."""

    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)

    def generate_span_id(self) -> int:
        return self._random.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self._random.getrandbits(128) or 1


def _batches(items: Sequence[_Item], seed: int, size: int) -> Iterator[list[ReadableSpan]]:
    """The items as SDK spans, `size` at a time (never all of them in memory)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": AGENT}), id_generator=SeededIds(seed)
    )
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("holonograph.demo", "1")
    try:
        for index, item in enumerate(items, 1):
            span = tracer.start_span(
                item.name, attributes=item.attributes, start_time=item.end_ns - 1_000_000
            )
            if item.passed is not None:
                span.add_event(
                    "holonograph.dimension",
                    {
                        "holonograph.dimension.id": DIMENSION,
                        "holonograph.dimension.passed": item.passed,
                    },
                    timestamp=item.end_ns,
                )
            span.end(end_time=item.end_ns)
            if index % size == 0 or index == len(items):
                yield list(memory.get_finished_spans())
                memory.clear()
    finally:
        provider.shutdown()


@dataclass
class _Answers:
    """A `requests` hook: an OTLP success may still reject spans (partial success)."""

    rejected: int = 0
    reason: str = ""

    def __call__(self, response: requests.Response, *args: object, **kwargs: object) -> None:
        if response.status_code != 200 or not response.content:
            return
        answer = ExportTraceServiceResponse()
        try:
            answer.ParseFromString(response.content)
        except DecodeError:
            return
        if answer.partial_success.rejected_spans:
            self.rejected += answer.partial_success.rejected_spans
            self.reason = answer.partial_success.error_message


def send(
    plan: DemoPlan,
    endpoint: str,
    token: str | None = None,
    batch: int = 1000,
    progress: Callable[[int, int], None] = lambda sent, total: None,
    timeout: float = 30.0,
) -> DemoSummary:
    """Send the plan to the collector at `endpoint` (its OTLP/HTTP base URL, which also
    serves the HTTP API); raises DemoFailed at the first thing it did not take."""
    base = endpoint.rstrip("/")
    items, calls, dropped = _items(plan)
    summary = DemoSummary(plan, base, calls=len(calls), dropped=dropped)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    session = requests.Session()
    answers = _Answers()
    session.hooks["response"].append(answers)
    exporter = OTLPSpanExporter(
        f"{base}/v1/traces", headers=headers, timeout=timeout, session=session
    )
    try:
        for spans in _batches(items, plan.seed, batch):
            if exporter.export(spans) is not SpanExportResult.SUCCESS:
                raise DemoFailed(
                    f"the export to {base}/v1/traces failed after {summary.spans} of"
                    f" {len(items)} span(s) (is `holonograph serve` listening there?)"
                )
            if answers.rejected:
                raise DemoFailed(
                    f"the collector rejected {answers.rejected} span(s): {answers.reason}"
                    " (see `holonograph quarantine`)"
                )
            summary.spans += len(spans)
            progress(summary.spans, len(items))
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]
    summary.sentinels = sum(item.passed is None for item in items)
    summary.evaluations = len(items) - summary.sentinels
    api = _Api(session, base, headers, timeout)
    api.post(
        "/holonograph/changes",
        {
            "agentId": AGENT,
            "kind": "deploy",
            "at": _rfc3339(int(plan.change_at.timestamp() * _NS)),
            "description": f"{AGENT} v2.0: primary answers from {VERSIONS[1]}",
            "id": plan.deploy_id,
            "artifactId": AGENT,
            "artifactVersion": "2.0",
        },
    )
    for call in _overridden(plan, calls):
        event_id = f"override-{call.correlation_id}"
        api.post("/hil/override", _override(call, event_id))
        summary.overrides.append(event_id)
    return summary


def _overridden(plan: DemoPlan, calls: Sequence[MxCall]) -> list[MxCall]:
    """The first failed primary answers on the changed surface after the change."""
    prefix = f"call-{SURFACES[0]}-"
    failed = [
        c
        for c in calls
        if c.correlation_id.startswith(prefix)
        and c.timestamp >= plan.change_at
        and any(e.role == "primary" and not e.passed for e in c.events)
    ]
    return failed[: plan.overrides]


def _override(call: MxCall, event_id: str) -> dict[str, Any]:
    return {
        "agentId": AGENT,
        "surfaceId": SURFACES[0],
        "correlationId": call.correlation_id,
        "originalOutput": {"answer": "Refunds take 30 days."},
        "correctedOutput": {"answer": "Refunds take 5 business days; see the billing FAQ."},
        "rationale": "The new model version quotes the old refund policy.",
        "tags": ["outdated-policy"],
        "eventId": event_id,
        "runMode": "production",
        "at": _rfc3339(int((call.timestamp + dt.timedelta(minutes=5)).timestamp() * _NS)),
    }


@dataclass(frozen=True)
class _Api:
    session: requests.Session
    base: str
    headers: dict[str, str]
    timeout: float

    def post(self, path: str, body: dict[str, Any]) -> None:
        headers = {**self.headers, "x-holonograph-run-mode": "production"}
        try:
            reply = self.session.post(
                f"{self.base}{path}", json=body, headers=headers, timeout=self.timeout
            )
        except requests.RequestException as err:
            raise DemoFailed(f"POST {self.base}{path}: {err}") from None
        if reply.status_code >= 300:
            raise DemoFailed(f"POST {self.base}{path} answered {reply.status_code}: {reply.text}")
