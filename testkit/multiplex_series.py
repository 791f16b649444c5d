"""A month of seeded multiplex calls with a known truth, for the per-role series, the
observer control and the fallback count (drift, compare, the topology scan, the drift
benchmark's multiplex regime).

Each call of the surface lands on the primary (`primary`, its served id one of
`versions`) and one observer (`observer`), one event each sharing the call's
correlation id, graded pass/fail on one dimension. At bucket `change_at` the primary's
pass rate moves from `primary_rate[0]` to `[1]` and the observer's from
`observer_rate[0]` to `[1]`. With `recorded` the primary's served id rolls over from
`versions[0]` to `versions[1]` at the change (a vendor shipping a new version behind
the alias: recorded on the events); without, nothing recorded changes (a silent
change). Both vendors answer the same input, so their outcomes on a call are
correlated (`agree`: the chance the observer's draw is the primary's), and `tau` moves
both vendors' rates together from bucket to bucket (the inputs' difficulty, AR(1) with
`rho`): noise the within-call contrast cancels and a per-vendor series does not.

With probability `fallback` a call's primary is unavailable: the observer answers as
primary (Guide chapter 11: fallback in array order) and the call has no observer.

The calls go to a store either through the receiver as raw OTLP export requests
(`otlp_requests`: the spans an SDK sends) or straight into the tables
(`write_rows`, for the benchmark). Everything random comes from the seed; the
generated `MxCall`s are the truth a test compares with. The generator itself is
`holonograph.demo.calls` (the demo sends the same calls); this module adds the ways
into a store.
"""

from __future__ import annotations

import datetime as dt
import hashlib

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from holonograph.demo.calls import MultiplexSurface, MxCall, MxEvent, emissions, generate
from schemas.store import Store
from schemas.tables import EMISSION_RECEIPTS, EVALUATION_DIMENSIONS, EVALUATION_EVENTS

__all__ = ["MultiplexSurface", "MxCall", "MxEvent", "generate", "otlp_requests", "write_rows"]


def _value(value: object) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    return AnyValue(string_value=str(value))


def _attributes(values: dict[str, object]) -> list[KeyValue]:
    return [KeyValue(key=k, value=_value(v)) for k, v in values.items()]


def otlp_requests(spec: MultiplexSurface, calls: list[MxCall], batch: int = 2000) -> list[bytes]:
    """The calls' evaluation spans as serialized OTLP export requests of `batch` spans:
    the wire contract's attributes, one `holonograph.dimension` span event each."""
    requests, spans = [], []
    resource = _attributes({"service.name": spec.agent_id})
    last = sum(len(c.events) for c in calls) - 1
    for index, (call, event, stream, seq) in enumerate(emissions(spec, calls)):
        end = int(call.timestamp.timestamp() * 1_000_000_000)
        attributes = {
            "holonograph.event.id": event.event_id,
            "holonograph.surface.id": spec.surface_id,
            "holonograph.agent.id": spec.agent_id,
            "holonograph.run_mode": spec.run_mode,
            "holonograph.emission.stream": stream,
            "holonograph.emission.seq": seq,
            "holonograph.correlation.id": call.correlation_id,
            "holonograph.lens.version": "lv_1",
            "holonograph.light_source.id": event.served,
            "holonograph.light_source.requested": event.requested,
            "holonograph.multiplex.role": event.role,
        }
        digest = hashlib.sha256(event.event_id.encode()).digest()
        spans.append(
            Span(
                trace_id=digest[:16],
                span_id=digest[16:24],
                name="holonograph.evaluation",
                kind=Span.SPAN_KIND_INTERNAL,
                start_time_unix_nano=end - 1_000_000,
                end_time_unix_nano=end,
                attributes=_attributes(attributes),
                events=[
                    Span.Event(
                        time_unix_nano=end,
                        name="holonograph.dimension",
                        attributes=_attributes(
                            {
                                "holonograph.dimension.id": spec.dimension_id,
                                "holonograph.dimension.passed": event.passed,
                            }
                        ),
                    )
                ],
            )
        )
        if len(spans) == batch or index == last:
            request = ExportTraceServiceRequest()
            resource_spans = request.resource_spans.add()
            resource_spans.resource.attributes.extend(resource)
            scope = resource_spans.scope_spans.add()
            scope.scope.name = "testkit.multiplex_series"
            scope.spans.extend(spans)
            requests.append(request.SerializeToString())
            spans = []
    return requests


_EVENT_COLUMNS = EVALUATION_EVENTS.pick(
    "tenant_id", "event_id", "surface_id", "agent_id", "correlation_id", "run_mode",
    "provenance", "timestamp", "lens_version", "light_source_id", "light_source_requested",
    "multiplex_role", "sdk_name", "sdk_version", "dimension_ids", "emission_stream",
    "emission_seq", "emission_final", "resource_attributes", "extras", "ingested_at",
    "contract_version_id",
)  # fmt: skip
_DIMENSION_COLUMNS = EVALUATION_DIMENSIONS.pick(
    "tenant_id", "event_id", "dimension_id", "passed", "surface_id", "agent_id",
    "correlation_id", "run_mode", "provenance", "timestamp", "lens_version",
    "light_source_id", "light_source_requested", "emission_stream", "ingested_at",
)  # fmt: skip
_RECEIPT_COLUMNS = EMISSION_RECEIPTS.pick(
    "tenant_id", "emission_stream", "emission_seq", "receipt_id", "kind", "final",
    "quarantined", "event_id", "surface_id", "event_time", "received_at",
)  # fmt: skip


def write_rows(
    store: Store,
    spec: MultiplexSurface,
    calls: list[MxCall],
    ingested_at: dt.datetime,
    contract_version_id: str = "",
) -> int:
    """Store the calls' events, their dimension rows and receipts as the receiver would
    (columns through `schemas.tables`); returns the number of events."""
    events, dimensions, receipts = [], [], []
    provenance = "production-state" if spec.run_mode == "production" else "exploratory-state"
    for call, event, stream, seq in emissions(spec, calls):
        layers = [spec.surface_id, spec.agent_id, call.correlation_id, spec.run_mode, provenance,
                  call.timestamp, "lv_1", event.served, event.requested]  # fmt: skip
        events.append(
            [spec.tenant_id, event.event_id, *layers, event.role, "testkit", "1",
             [spec.dimension_id], stream, seq, False, "{}", "{}", ingested_at,
             contract_version_id]
        )  # fmt: skip
        dimensions.append(
            [spec.tenant_id, event.event_id, spec.dimension_id, event.passed, *layers, stream,
             ingested_at]
        )  # fmt: skip
        receipts.append(
            [spec.tenant_id, stream, seq, f"r-{event.event_id}", "evaluation", False, False,
             event.event_id, spec.surface_id, call.timestamp, ingested_at]
        )  # fmt: skip
    store.insert(EVALUATION_EVENTS.qualified, events, _EVENT_COLUMNS)
    store.insert(EVALUATION_DIMENSIONS.qualified, dimensions, _DIMENSION_COLUMNS)
    store.insert(EMISSION_RECEIPTS.qualified, receipts, _RECEIPT_COLUMNS)
    return len(events)
