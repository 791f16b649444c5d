"""Replay: put dead-lettered records and quarantined spans through validation again,
after a fix (a contract change, a sink that reads a newer record version).

Idempotent by construction. A quarantined span that now validates is handed off
under the receipt id it first arrived with (from its dead letter, or the smallest
receipt id `emission_receipts` holds for its (stream, seq)), so its receipt row is
replaced rather than counted twice, and its event id collapses as always. A poison record that now
decodes is re-produced byte for byte to the topic it came from. Replaying twice
changes nothing.

Replayed spans are checked against the contracts in force now (`contracts`), so a
span a contract rejected lands once a new version allows it, recording that version.

A replayed span keeps its tenant (the quarantine row's, or its letter's). Spans
rejected because their token may not write their agent, or for ownership (another
agent's event id, another token's stream: `ingest.store.owners`), stay rejected:
replay runs without the token, so it cannot vouch for it; the client must send them
again. A span from the quarantine table is written as the service writes (any agent of
its tenant); one from a dead letter that names its token's agents (version 4), as that
token.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.structs import TopicPartition
from google.protobuf.message import DecodeError as PB2DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest as PB2ExportTraceServiceRequest,
)
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans as PB2ResourceSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PB2Span

from ingest.export.contracts import ContractBook
from ingest.export.decode import to_key_values
from ingest.export.principal import Principal
from ingest.export.request import AGENT_REJECTED, validate_request
from ingest.handoff.protocol import Handoff
from ingest.store.owners import EVENT_OWNED, STREAM_OWNED
from schemas.events import ValidatedBatch
from schemas.records import BatchRecord, PoisonLetter, QuarantinedLetter, RecordError, decode
from schemas.store import Store
from schemas.tables import DATABASE
from schemas.times import to_store_time

SOURCE = "replay"


@dataclass
class ReplayReport:
    seen: int = 0
    replayed: int = 0
    still_rejected: int = 0
    skipped: int = 0
    reasons: Counter[str] = field(default_factory=Counter)

    def as_json(self) -> dict[str, Any]:
        return {
            "seen": self.seen,
            "replayed": self.replayed,
            "stillRejected": self.still_rejected,
            "skipped": self.skipped,
            "reasons": dict(self.reasons.most_common()),
        }


def revalidate(
    span_proto: bytes,
    resource: Mapping[str, Any],
    tenant_id: str,
    contracts: ContractBook | None = None,
    agents: frozenset[str] | None = None,
) -> ValidatedBatch:
    """The span through today's decode and validation (and today's contracts), as a
    one-span request of its tenant from a token that may write `agents` (None: any)."""
    resource_spans = PB2ResourceSpans()
    resource_spans.resource.attributes.extend(to_key_values(resource))
    resource_spans.scope_spans.add().spans.append(PB2Span.FromString(span_proto))
    request = PB2ExportTraceServiceRequest(resource_spans=[resource_spans])
    return validate_request(
        request,
        source=SOURCE,
        principal=Principal(tenant_id=tenant_id, agents=agents),
        contracts=contracts,
    )


NOT_REPLAYED_AGENT = "rejected for its token's agents: not replayed (the client must resend)"
NOT_REPLAYED_OWNER = "rejected for ownership: not replayed (the client must resend)"


async def _resubmit(
    handoff: Handoff[Any], span_proto: bytes, resource: Mapping[str, Any], receipt_id: str,
    tenant_id: str, reason: str, report: ReplayReport, contracts: ContractBook | None,
    agents: frozenset[str] | None = None,
) -> None:  # fmt: skip
    if reason.startswith(AGENT_REJECTED):
        report.still_rejected += 1
        report.reasons[NOT_REPLAYED_AGENT] += 1
        return
    if EVENT_OWNED in reason or STREAM_OWNED in reason:
        report.still_rejected += 1
        report.reasons[NOT_REPLAYED_OWNER] += 1
        return
    try:
        batch = revalidate(span_proto, resource, tenant_id, contracts, agents)
    except PB2DecodeError:  # a span the decoder could not read when it arrived either
        report.still_rejected += 1
        report.reasons["span: not a decodable OTLP span"] += 1
        return
    if batch.quarantined:
        report.still_rejected += 1
        report.reasons[batch.quarantined[0].reason] += 1
        return
    with handoff.arriving():
        prepared = handoff.prepare(batch)
    stored = await handoff.submit(prepared, receipt_id, len(span_proto))
    if stored.quarantined:  # the store refused it
        report.still_rejected += 1
        report.reasons[stored.quarantined[0].reason] += 1
        return
    report.replayed += 1


def _original_receipt(
    store: Store, tenant_id: str, stream: str | None, seq: int | None, qid: str
) -> str:
    """The smallest receipt id of that (tenant, stream, seq): the same on every replay."""
    if stream is not None and seq is not None:
        found = store.query(
            f"SELECT receipt_id FROM {DATABASE}.emission_receipts FINAL"
            " WHERE tenant_id = {tenant:String} AND emission_stream = {stream:String}"
            " AND emission_seq = {seq:UInt64} ORDER BY receipt_id LIMIT 1",
            {"tenant": tenant_id, "stream": stream, "seq": seq},
        ).scalar()
        if found:
            return str(found)
    return "replay-" + hashlib.sha256(qid.encode()).hexdigest()[:32]


async def replay_quarantine(
    store: Store,
    handoff: Handoff[Any],
    reason: str | None = None,
    since: dt.datetime | None = None,
    limit: int | None = None,
    contracts: ContractBook | None = None,
) -> ReplayReport:
    """Quarantined spans from the table (optionally those whose reason contains
    `reason`, received since `since`) through validation again, and the check against
    `contracts`."""
    rows = store.query(
        f"SELECT tenant_id, quarantine_id, emission_stream, emission_seq, reason,"
        f" resource_attributes, hex(span_proto) FROM {DATABASE}.quarantine FINAL"
        " WHERE position(reason, {reason:String}) > 0 AND received_at >= {since:DateTime64(3)}"
        " ORDER BY received_at, quarantine_id LIMIT {limit:UInt64}",
        {
            "reason": reason or "",
            "since": to_store_time(since or dt.datetime(1970, 1, 1, tzinfo=dt.UTC)),
            "limit": limit if limit is not None else 2**62,
        },
    ).rows
    report = ReplayReport()
    for tenant, qid, stream, seq, reason, resource, span_hex in rows:
        report.seen += 1
        if not span_hex:
            report.skipped += 1
            report.reasons["original span not kept"] += 1
            continue
        receipt = _original_receipt(store, tenant, stream, seq, qid)
        await _resubmit(
            handoff, bytes.fromhex(span_hex), json.loads(resource), receipt, tenant, reason, report,
            contracts,
        )  # fmt: skip
    return report


async def dead_letters(bootstrap: str, topic: str) -> AsyncIterator[tuple[bytes | None, bytes]]:
    """Every message on the dead-letter topic up to its end when the replay started."""
    partitions = await _partitions(bootstrap, topic)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False
    )
    await consumer.start()
    try:
        consumer.assign(partitions)
        ends = await consumer.end_offsets(partitions)
        await consumer.seek_to_beginning(*partitions)
        remaining = {tp for tp in partitions if ends[tp] > 0}
        while remaining:
            fetched = await consumer.getmany(*remaining, timeout_ms=1000)
            for tp, messages in fetched.items():
                for message in messages:
                    if message.offset < ends[tp]:
                        yield message.key, message.value or b""
            for tp in list(remaining):
                if await consumer.position(tp) >= ends[tp]:
                    remaining.discard(tp)
    finally:
        await consumer.stop()


async def _partitions(bootstrap: str, topic: str) -> list[TopicPartition]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        (described,) = await admin.describe_topics([topic])
    finally:
        await admin.close()
    if described["error_code"]:
        raise RuntimeError(f"topic {topic}: Kafka error {described['error_code']}")
    return [TopicPartition(topic, p["partition"]) for p in described["partitions"]]


async def replay_dead_letters(
    bootstrap: str,
    topic: str,
    handoff: Handoff[Any],
    producer: AIOKafkaProducer,
    contracts: ContractBook | None = None,
) -> ReplayReport:
    report = ReplayReport()
    async for _key, value in dead_letters(bootstrap, topic):
        report.seen += 1
        try:
            letter = decode(value)
        except RecordError as err:
            report.skipped += 1
            report.reasons[f"undecodable dead letter: {err}"] += 1
            continue
        if isinstance(letter, QuarantinedLetter):
            span = letter.span
            if not span.span_proto:
                report.skipped += 1
                report.reasons["original span not kept"] += 1
                continue
            agents = None if letter.agents is None else frozenset(letter.agents)
            await _resubmit(
                handoff, span.span_proto, span.resource_attributes, letter.receipt_id,
                letter.tenant_id, span.reason, report, contracts, agents,
            )  # fmt: skip
        elif isinstance(letter, PoisonLetter):
            await _replay_poison(letter, producer, report)
        elif isinstance(letter, BatchRecord):
            report.skipped += 1
    return report


async def _replay_poison(
    letter: PoisonLetter, producer: AIOKafkaProducer, report: ReplayReport
) -> None:
    try:
        decode(letter.value)
    except RecordError as err:
        report.still_rejected += 1
        report.reasons[str(err)] += 1
        return
    await producer.send_and_wait(letter.source_topic, letter.value, key=letter.key)
    report.replayed += 1
