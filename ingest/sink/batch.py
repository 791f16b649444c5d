"""What the sink holds between consuming and committing: decoded records, poison
waiting to be dead-lettered, and the offsets that become committable once the rows
are in the store. Before a batch is written, each record's ownership is checked
(`ingest.store.owners`); what it may write is kept on its item (`checked`).

The insert deduplication token is a digest of the batch's record contents, never of
offsets: a re-created topic reuses offsets for different data, while the same
records (a redelivery after a crash, in the same batch shape) give the same token.
Rows and tokens are also built for any part of a batch (`items_rows`,
`items_token`): a batch the store refuses is bisected part by part.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka.structs import TopicPartition

from ingest.export.fast import FastBatch
from ingest.sink.fast import FastRecord
from ingest.store.clickhouse import ClickHouseStore, dedup_settings
from ingest.store.owners import Submission, Writer
from ingest.store.rows import TableRows
from schemas.events import EvaluationEvent, ValidatedBatch
from schemas.records import OWNER_VERSION, BatchRecord, PoisonLetter, QuarantinedLetter
from schemas.store import QueryResult, Store

# What the sink keeps of a record it stores: a batch record decoded by the hot path
# (`ingest.sink.fast`), else its models.
StoredRecord = FastRecord | BatchRecord | QuarantinedLetter


@dataclass(frozen=True)
class Consumed:
    """One message taken from a partition; `record` is None when it yields no rows.
    `checked`: the record's batch as the ownership check lets it be stored, when that
    differs from the record."""

    tp: TopicPartition
    offset: int
    digest: bytes
    record: StoredRecord | None = None
    poison: PoisonLetter | None = None
    key: bytes | None = None
    checked: ValidatedBatch | None = None

    def batch(self) -> ValidatedBatch | FastBatch | None:
        """What this item writes: its checked batch, else its record's."""
        return self.checked if self.checked is not None else self.recorded()

    def recorded(self) -> ValidatedBatch | FastBatch | None:
        """The record's rows as decoded (None for an item that yields no rows): a
        hot-path record's `FastBatch`, else a batch of its models."""
        record = self.record
        if isinstance(record, FastRecord):
            return record.batch
        if isinstance(record, BatchRecord):
            return ValidatedBatch.model_construct(
                tenant_id=record.tenant_id,
                agents=None if record.agents is None else frozenset(record.agents),
                events=shared_resources(record.events),
                emissions=record.emissions,
                overrides=record.overrides,
            )
        if isinstance(record, QuarantinedLetter):
            return ValidatedBatch.model_construct(
                tenant_id=record.tenant_id, quarantined=(record.span,)
            )
        return None

    def submission(self) -> Submission | None:
        """The record for the ownership check, with the writer it carries: a version 4
        record names its token's agents; an older one only the agents of its events
        (what its receiver let the token write), and with none, no writer is known."""
        record, batch = self.record, self.recorded()
        if record is None or batch is None:
            return None
        writer: Writer | None = None
        if isinstance(batch, FastBatch):  # a version 4 record: its token's agents
            writer = Writer(batch.agents)
        elif record.schema_version >= OWNER_VERSION:
            assert not isinstance(record, FastRecord)
            writer = Writer(None if record.agents is None else frozenset(record.agents))
        elif batch.events:
            writer = Writer(frozenset(e.agent_id for e in batch.events))
        return Submission(batch, writer, record.received_at)


def record_rows(record: StoredRecord) -> int:
    if isinstance(record, QuarantinedLetter):
        return 1
    if isinstance(record, FastRecord):
        return record.rows
    dims = sum(len(e.outcome.dimensions) for e in record.events)
    return len(record.events) + dims + len(record.emissions) + len(record.overrides)


def shared_resources(events: tuple[EvaluationEvent, ...]) -> tuple[EvaluationEvent, ...]:
    """Let events with equal resource attributes share one dict, as they do in the
    receiver (decoding gave each its own): row building serializes a request's
    resource once per distinct dict, not once per event. Equal values, so the events
    are unchanged; the frozen models' field is swapped in `__dict__` directly."""
    shared: dict[str, Any] | None = None
    for event in events:
        resource = event.resource_attributes
        if resource is shared:
            continue
        if resource == shared:
            event.__dict__["resource_attributes"] = shared
        else:
            shared = resource
    return events


@dataclass
class Batch:
    opened_at: float
    items: list[Consumed] = field(default_factory=list)
    rows: int = 0
    # The first offset held per partition: where its next commit starts from.
    first: dict[TopicPartition, int] = field(default_factory=dict)

    def add(self, item: Consumed) -> None:
        self.items.append(item)
        self.first.setdefault(item.tp, item.offset)
        if item.record is not None:
            self.rows += record_rows(item.record)

    def __bool__(self) -> bool:
        return bool(self.items)

    def poison(self) -> list[PoisonLetter]:
        return [i.poison for i in self.items if i.poison is not None]

    def stored(self) -> list[Consumed]:
        """The items that yield rows."""
        return [i for i in self.items if i.record is not None]

    def table_rows(self) -> TableRows:
        return items_rows(self.items)

    def token(self) -> str:
        return items_token(self.items)

    def offsets(self) -> dict[TopicPartition, int]:
        """The next offset to read per partition: committable once the rows are stored."""
        nxt: dict[TopicPartition, int] = {}
        for item in self.items:
            nxt[item.tp] = max(nxt.get(item.tp, 0), item.offset + 1)
        return nxt

    def drop(self, partitions: Iterable[TopicPartition]) -> int:
        """Abandon the records of revoked partitions (their next owner rereads them)."""
        gone = set(partitions)
        kept = [i for i in self.items if i.tp not in gone]
        dropped = len(self.items) - len(kept)
        self.items = kept
        self.first = {tp: offset for tp, offset in self.first.items() if tp not in gone}
        self.rows = sum(record_rows(i.record) for i in kept if i.record is not None)
        return dropped


def items_rows(items: Iterable[Consumed]) -> TableRows:
    rows = TableRows()
    for item in items:
        record, batch = item.record, item.batch()
        if record is None or batch is None:
            continue
        if isinstance(batch, FastBatch):
            batch.add_to(rows, record.receipt_id, record.received_at)
        else:
            rows.add(batch, record.receipt_id, record.received_at)
    return rows


def items_token(items: Iterable[Consumed]) -> str:
    """A digest of the records, and of what the ownership check rejected of them."""
    digest = hashlib.sha256()
    for item in sorted(items, key=lambda i: i.digest):
        if item.record is not None:
            digest.update(item.digest)
            if item.checked is not None:
                for rejected in item.checked.quarantined:
                    digest.update(rejected.quarantine_id.encode())
    return digest.hexdigest()


def with_token(store: Store, token: str) -> Store:
    """`store` with every insert under the batch's deduplication token: our own store's
    view of itself (`ClickHouseStore.with_token`, column-wise inserts kept), any other
    wrapped (`DedupTokenStore`)."""
    if isinstance(store, ClickHouseStore):
        return store.with_token(token)
    return DedupTokenStore(store, token)


class DedupTokenStore:
    """Adds `insert_deduplication_token` (batch digest + table) to every insert, so
    a server with insert deduplication drops an identical retried block; the
    ReplacingMergeTree keys collapse everything else."""

    def __init__(self, inner: Store, token: str) -> None:
        self._inner = inner
        self._token = token
        self.url = inner.url

    def query(self, sql: str, parameters: Mapping[str, Any] | None = None) -> QueryResult:
        return self._inner.query(sql, parameters)

    def command(self, sql: str, parameters: Mapping[str, Any] | None = None) -> None:
        self._inner.command(sql, parameters)

    def insert(
        self,
        table: str,
        rows: Sequence[Sequence[Any]],
        column_names: Sequence[str],
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        self._inner.insert(table, rows, column_names, dedup_settings(self._token, table, settings))

    def close(self) -> None:
        self._inner.close()
