"""Identity owned by the agent: who may write an event id, and an emission stream, at
the store edge (docs/security.md, "Event ids and streams have owners").

- An event id belongs, per tenant, to the agent of its first write. A later write of
  it must name that agent; one naming another agent is rejected, whatever the token
  may write (one event id is one event, of one agent), and nothing of it is stored.
  The receiver already refused agents the token may not write, so a token that may
  not write the owner can never replace its event.
- An emission stream belongs to the agents of the token that opened it (its first
  receipt). A later span on it, an evaluation or a sentinel, valid or quarantined,
  needs a token that may write every one of them (the same token, a rotated one, one
  with more agents); from any other it is rejected and the stream gets no receipt.

One commit (a group commit of the embedded writer, a batch of the sink) is checked
at once:

    lookup: one query for every key of the commit ─► decide, submission by submission
      in the order received (the first to name a new key claims it) ─► claim the new
      streams (one insert) ─► several writers: claim the new event ids too, read the
      claims back, and where another writer's claim came first, decide again against it

The lookup also gives each stored event's *placement* (`schemas.placement`: the
surface and hour its rows are sorted under, recorded with its first claim that has
one); a new id's is its first version's in the commit. `check` returns them with the
batches (`Checked.placements`), and `ingest.store.rows.write_rows` writes every row of
the commit under its event's, so every re-send keeps its event's one sorting key.

Every event row written claims its id (the view `event_owners_mv` of migration 0009,
in the same insert, with its placement since 0016), so one writer needs no claim of
its own for ids: the next commit sees the last one's. A key's owner is its claim with
the lowest `_block_number` (the store's insert order): once a writer has read its own
claim back, no claim it has not seen can come before it, so two writers that claimed a
key at once agree which one stands, and the loser stores nothing. One writer (an
embedded chDB store, held by one process) skips the read-back. Claims are written
before the rows they allow: a commit that fails after them leaves the keys claimed by
the writer whose retry comes next.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ingest.export.fast import FastBatch
from ingest.store.clickhouse import ClickHouseStore, PreEscaped
from ingest.store.errors import is_permanent
from ingest.store.rows import ingest_version, ticks_ms
from ingest.store.url import is_embedded
from schemas.events import (
    EmissionRecord,
    EvaluationEvent,
    OverrideEvent,
    QuarantineRecord,
    ValidatedBatch,
    decoded_quarantine,
)
from schemas.overrides import content_digest
from schemas.placement import Placement, placed_hour
from schemas.store import Store
from schemas.tables import EVALUATION_EVENTS, EVENT_OWNERS, LESSON_OVERRIDES, STREAM_OWNERS

# Every ownership rejection's reason starts with one of these (replay keeps them rejected).
EVENT_OWNED = "holonograph.event.id: owned by another agent"
STREAM_OWNED = "holonograph.emission.stream: owned by another token"
# An override's event id already stored with other content (replay keeps it rejected).
OVERRIDE_CONFLICT = "holonograph.event.id: an override already stored with other content"

Key = tuple[str, str]  # (tenant_id, event id or stream)


@dataclass(frozen=True)
class StreamOwner:
    """The agents of the token that opened a stream (`any_agent`: it could write any)."""

    any_agent: bool
    agents: frozenset[str] = frozenset()

    def describe(self) -> str:
        if self.any_agent:
            return "any agent"
        return ", ".join(repr(a) for a in sorted(self.agents)) or "no agent"


@dataclass(frozen=True)
class Writer:
    """Who a write comes from, as ownership sees it: the agents its token may write
    (`agents` None: any agent)."""

    agents: frozenset[str] | None

    def covers(self, owner: StreamOwner) -> bool:
        """May write as the stream's opener: every agent the opener could write."""
        if self.agents is None:
            return True
        return not owner.any_agent and owner.agents <= self.agents

    def owner(self) -> StreamOwner:
        if self.agents is None:
            return StreamOwner(any_agent=True)
        return StreamOwner(any_agent=False, agents=self.agents)


Batch = ValidatedBatch | FastBatch


@dataclass(frozen=True)
class Submission:
    """One request's batch (embedded: a hot-path `FastBatch` too) or one record's (sink),
    with its writer: None for a record written before ownership with no event to tell
    its token's agents by (its streams are neither checked nor claimed). `order` is the
    place in its commit, as `ingest_version` counts it."""

    batch: Batch
    writer: Writer | None
    received_at: dt.datetime
    order: int = 0


@dataclass
class Owners:
    """What the store says owns the keys of a commit, and what the commit claims."""

    events: dict[Key, str] = field(default_factory=dict)
    streams: dict[Key, StreamOwner] = field(default_factory=dict)
    event_claims: dict[Key, list[Any]] = field(default_factory=dict)
    stream_claims: dict[Key, list[Any]] = field(default_factory=dict)
    # False: the commit's event rows claim their new ids themselves (one writer), so
    # `decide` records only who owns them within the commit, no claim rows.
    claim_events: bool = field(default=True, compare=False)
    # Overrides (`lesson_overrides`): (agent, content digest) of those stored, and of
    # those this commit writes.
    stored_overrides: dict[Key, tuple[str, str]] = field(default_factory=dict)
    new_overrides: dict[Key, tuple[str, str]] = field(default_factory=dict)
    # Event id -> its placement: the store's, or a new id's first version's here.
    placements: dict[Key, Placement] = field(default_factory=dict, compare=False)


class Checked(list[Batch]):
    """`check`'s batches, with the placement of every event id they hold that the
    store or the commit placed (`ingest.store.rows.TableRows.placements`)."""

    placements: dict[Key, Placement]

    def __init__(self, batches: Iterable[Batch], placements: dict[Key, Placement]) -> None:
        super().__init__(batches)
        self.placements = placements


def verify_claims(store: Store) -> bool:
    """Whether `check` must read its claims back on `store`: where another writer may
    claim at once (a ClickHouse server, sinks and receivers side by side), not on a
    chDB directory, which only the one process holding it writes (its own commits run
    one at a time)."""
    return not is_embedded(store.url)


def check(store: Store, submissions: Sequence[Submission], *, verify: bool) -> Checked:
    """Each submission's batch as it may be stored: spans rejected for ownership moved
    to `quarantined` with the reason (a `FastBatch` stays one when none is), with the
    events' placements. Claims the new streams in `store` before returning; with
    `verify` (more than one writer), the new event ids too, and reads the claims back
    (a placement another writer claimed first is the one its rows take). Raises what
    the store raises."""
    if not submissions:
        return Checked([], {})
    owners = lookup(store, _event_keys(submissions), _stream_keys(submissions))
    owners.claim_events = verify  # else the event rows claim their ids as they are written
    owners.stored_overrides = stored_overrides(store, _override_keys(submissions))
    checked = [decide(owners, s) for s in submissions]
    if not (owners.event_claims or owners.stream_claims):
        return Checked(checked, owners.placements)
    claim(store, owners)
    if not verify:
        return Checked(checked, owners.placements)
    stood = lookup(store, set(owners.event_claims), set(owners.stream_claims))
    placements = {**owners.placements, **stood.placements}
    lost = {k for k, agent in stood.events.items() if owners.events.get(k) != agent} | {
        k for k, owner in stood.streams.items() if owners.streams.get(k) != owner
    }
    if not lost:
        return Checked(checked, placements)
    known = Owners(
        events={**owners.events, **stood.events},
        streams={**owners.streams, **stood.streams},
        stored_overrides=owners.stored_overrides,
        placements=placements,
    )
    return Checked([decide(known, s) for s in submissions], placements)


# --- the decision ---------------------------------------------------------------------


def decide(owners: Owners, submission: Submission) -> Batch:
    """Check one batch against `owners`, recording in `owners` what it claims. A hot-path
    batch that may be stored whole is checked on its rows and stays one; any other is
    checked, and rejected from, on its models (the reference path's batch)."""
    batch = submission.batch
    if isinstance(batch, FastBatch):
        if _fast_stands(owners, submission, batch):
            return batch
        batch = batch.materialize()
        submission = replace(submission, batch=batch)
    tenant = batch.tenant_id
    foreign = _foreign_streams(owners, submission)
    stamps = _stamps(submission)
    rejected: list[QuarantineRecord] = []
    refused_arrivals: set[tuple[str, int, str]] = set()
    events: list[EvaluationEvent] = []
    for event in batch.events:
        stream = event.stream
        if stream in foreign:
            rejected.append(decoded_quarantine(event, foreign[stream]))
            continue
        key = (tenant, event.event_id)
        owner = owners.events.get(key)
        place = (event.surface_id, placed_hour(event.timestamp))
        if owner is None:
            _claim_event(owners, key, event.agent_id, stamps, place)
        elif owner != event.agent_id:
            rejected.append(
                decoded_quarantine(event, _event_reason(event, owner, submission.writer))
            )
            if event.emission is not None:
                refused_arrivals.add((stream, event.emission.seq, event.event_id))
            continue
        owners.placements.setdefault(key, place)  # a stored id without one: this first
        events.append(event)
    overrides: list[OverrideEvent] = []
    resent = False
    for override in batch.overrides:
        reason = _override_refused(owners, tenant, override, foreign, submission.writer, stamps)
        if reason == "":
            overrides.append(override)
            continue
        resent = resent or reason is None
        if reason is not None:
            rejected.append(decoded_quarantine(override, reason))
            if override.emission is not None and override.stream not in foreign:
                refused_arrivals.add((override.stream, override.emission.seq, override.event_id))
    emissions: list[EmissionRecord] = []
    for emission in batch.emissions:
        if emission.stream in foreign:
            if emission.kind == "sentinel" and not emission.quarantined:
                rejected.append(decoded_quarantine(emission, foreign[emission.stream]))
            continue  # an arrival on someone else's stream: no receipt at all
        arrival = (emission.stream, emission.seq, emission.event_id)
        if arrival in refused_arrivals and emission.kind == "evaluation":
            # Arrived on the writer's own stream, invalid: as a rejection at the door.
            emission = emission.model_copy(update={"quarantined": True, "event_id": ""})
        emissions.append(emission)
    if not (foreign or rejected or resent):
        return batch
    quarantined = tuple(
        q.model_copy(update={"reason": f"{q.reason}; {foreign[q.emission_stream]}"})
        if q.emission_stream in foreign
        else q
        for q in batch.quarantined
    )
    return batch.model_copy(
        update={
            "events": tuple(events),
            "emissions": tuple(emissions),
            "quarantined": (*quarantined, *rejected),
            "overrides": tuple(overrides),
        }
    )


def _override_refused(
    owners: Owners, tenant: str, override: OverrideEvent, foreign: dict[str, str],
    writer: Writer | None, stamps: tuple[int, int],
) -> str | None:  # fmt: skip
    """Why `override` may not be stored ('' : it may; None: it is a re-send of a stored
    override (or of one earlier in the commit), which writes nothing). Records what it
    claims in `owners`."""
    if override.stream in foreign:
        return foreign[override.stream]
    key = (tenant, override.event_id)
    digest = content_digest(override)
    known = owners.new_overrides.get(key) or owners.stored_overrides.get(key)
    if known is not None:
        agent, stored_digest = known
        if stored_digest == digest:
            return None
        if agent == override.agent_id:
            return (
                f"{OVERRIDE_CONFLICT}: {override.event_id!r}; a correction of a correction"
                " is a new override (a new holonograph.event.id)"
            )
        return _owned_reason(override.event_id, agent, override.agent_id, writer)
    owner = owners.events.get(key)
    if owner is None:
        _claim_event(owners, key, override.agent_id, stamps, None, always=True)
    elif owner != override.agent_id:
        return _owned_reason(override.event_id, owner, override.agent_id, writer)
    owners.new_overrides[key] = (override.agent_id, digest)
    return ""


def _fast_stands(owners: Owners, submission: Submission, batch: FastBatch) -> bool:
    """Whether nothing of a hot-path batch is rejected (`decide`'s outcome on its models,
    from its rows: no event id repeats in it and every stream has an arrival); if so,
    records in `owners` what it claims, as `decide` would."""
    writer, tenant = submission.writer, batch.tenant_id
    streams = [(tenant, stream) for stream in batch.streams()]
    if writer is not None:
        for key in streams:
            owner = owners.streams.get(key)
            if owner is not None and not writer.covers(owner):
                return False
    known = owners.events
    identities = batch.identities()
    for event_id, agent in identities:
        first = known.get((tenant, event_id))
        if first is not None and first != agent:
            return False
    if writer is not None:
        for key in streams:
            if key not in owners.streams:
                _claim_stream(owners, key, writer, submission)
    stamps = _stamps(submission)
    places = _fast_placements(batch)
    for event_id, agent in identities:
        key = (tenant, event_id)
        if key not in known:
            _claim_event(owners, key, agent, stamps, places[event_id])
        else:
            owners.placements.setdefault(key, places[event_id])
    return True


_EVENT_ID, _SURFACE, _TIMESTAMP = (
    EVALUATION_EVENTS.columns.index(c) for c in ("event_id", "surface_id", "timestamp")
)


def _fast_placements(batch: FastBatch) -> dict[str, Placement]:
    """Each event's own placement, from a hot-path batch's rows (timestamps in ticks)."""
    return {row[_EVENT_ID]: (row[_SURFACE], placed_hour(row[_TIMESTAMP])) for row in batch.events}


def _stamps(submission: Submission) -> tuple[int, int]:
    """An event claim's receipt time and version: its submission's."""
    received_at = submission.received_at
    return ticks_ms(received_at), ingest_version(received_at, submission.order)


def _claim_event(
    owners: Owners,
    key: Key,
    agent: str,
    stamps: tuple[int, int],
    place: Placement | None,
    always: bool = False,
) -> None:
    """`place`: the placement of the id's first version (None: an override, which has
    no event rows); `always`: an override's id, which no row claims as it is written."""
    owners.events[key] = agent
    if place is not None:
        owners.placements.setdefault(key, place)
    if owners.claim_events or always:
        owners.event_claims[key] = [*key, agent, *stamps, *(place or ("", 0))]


def _claim_stream(owners: Owners, key: Key, writer: Writer, submission: Submission) -> None:
    owners.streams[key] = mine = writer.owner()
    owners.stream_claims[key] = [
        *key, mine.any_agent, sorted(mine.agents), ticks_ms(submission.received_at),
    ]  # fmt: skip


def _foreign_streams(owners: Owners, submission: Submission) -> dict[str, str]:
    """The batch's streams its writer may not write, with the reason; claims the new
    streams it records an arrival on."""
    writer = submission.writer
    if writer is None:
        return {}
    batch = submission.batch
    assert isinstance(batch, ValidatedBatch)
    arrived = {e.stream for e in batch.emissions}
    foreign: dict[str, str] = {}
    for stream in _streams_of(batch):
        key = (batch.tenant_id, stream)
        owner = owners.streams.get(key)
        if owner is None:
            if stream in arrived:
                _claim_stream(owners, key, writer, submission)
        elif not writer.covers(owner):
            foreign[stream] = (
                f"{STREAM_OWNED}: {stream!r} was opened by a token that may write"
                f" {owner.describe()}; this token may not write as it"
            )
    return foreign


def _streams_of(batch: Batch) -> Iterator[str]:
    if isinstance(batch, FastBatch):
        yield from batch.streams()
        return
    seen: set[str] = set()
    for stream in (
        *(e.stream for e in batch.emissions),
        *(e.emission.stream for e in batch.events if e.emission is not None),
        *(o.emission.stream for o in batch.overrides if o.emission is not None),
        *(q.emission_stream for q in batch.quarantined if q.emission_stream is not None),
    ):
        if stream not in seen:
            seen.add(stream)
            yield stream


def _event_reason(event: EvaluationEvent, owner: str, writer: Writer | None) -> str:
    return _owned_reason(event.event_id, owner, event.agent_id, writer)


def _owned_reason(event_id: str, owner: str, agent: str, writer: Writer | None) -> str:
    head = f"{EVENT_OWNED}: {event_id!r} belongs to agent {owner!r}"
    if writer is not None and writer.agents is not None and owner not in writer.agents:
        return f"{head}, which this token may not write"
    return f"{head}; a span naming agent {agent!r} cannot replace it"


def _event_keys(submissions: Iterable[Submission]) -> set[Key]:
    keys: set[Key] = set()
    for s in submissions:
        tenant, batch = s.batch.tenant_id, s.batch
        if isinstance(batch, FastBatch):  # its event ids, all distinct
            keys.update([(tenant, event_id) for event_id in batch.event_ids])
        else:
            keys.update((tenant, event_id) for event_id, _ in _ids(batch))
    return keys | _override_keys(submissions)


def _override_keys(submissions: Iterable[Submission]) -> set[Key]:
    return {
        (s.batch.tenant_id, o.event_id)
        for s in submissions
        if isinstance(s.batch, ValidatedBatch)
        for o in s.batch.overrides
    }


def _ids(batch: Batch) -> Iterator[tuple[str, str]]:
    """(event id, agent id) of each event of a batch."""
    if isinstance(batch, FastBatch):
        yield from batch.identities()
    else:
        for event in batch.events:
            yield event.event_id, event.agent_id


def _stream_keys(submissions: Iterable[Submission]) -> set[Key]:
    return {
        (s.batch.tenant_id, stream)
        for s in submissions
        if s.writer is not None
        for stream in _streams_of(s.batch)
    }


# --- the store ------------------------------------------------------------------------

_KEYS = (
    "SELECT tenant_id, key FROM format(JSONCompactColumns,"
    " 'tenant_id String, key String', {%s:String})"
)
# An event's placement: its first claim that has one (an override's claim has none).
_LOOKUP = (
    f"SELECT 'event', tenant_id, event_id, argMin(agent_id, _block_number), false, [],"
    " argMinIf(placed_surface_id, _block_number, placed_surface_id != ''),"
    " toUInt32(argMinIf(placed_hour, _block_number, placed_surface_id != ''))"
    f" FROM {EVENT_OWNERS.qualified} WHERE (tenant_id, event_id) IN ({_KEYS % 'events'})"
    " GROUP BY tenant_id, event_id"
    " UNION ALL"
    " SELECT 'stream', tenant_id, emission_stream, '', argMin(any_agent, _block_number),"
    " argMin(agents, _block_number), '', toUInt32(0)"
    f" FROM {STREAM_OWNERS.qualified} WHERE (tenant_id, emission_stream) IN ({_KEYS % 'streams'})"
    " GROUP BY tenant_id, emission_stream"
)


def lookup(store: Store, events: set[Key], streams: set[Key]) -> Owners:
    """The owners of `events` and `streams` the store holds, and the events'
    placements: one query."""
    owners = Owners()
    if not events and not streams:
        return owners
    params = {"events": _keys(store, events), "streams": _keys(store, streams)}
    rows = store.query(_LOOKUP, params).rows
    for kind, tenant, key, agent, any_agent, agents, surface, hour in rows:
        if kind == "event":
            owners.events[(str(tenant), str(key))] = str(agent)
            if surface:
                owners.placements[(str(tenant), str(key))] = (str(surface), int(hour))
        else:
            owners.streams[(str(tenant), str(key))] = StreamOwner(
                bool(any_agent), frozenset(str(a) for a in agents)
            )
    return owners


def _keys(store: Store, keys: set[Key]) -> Any:
    """The keys as one JSON parameter, escaped here when the store is ours (see
    `PreEscaped`)."""
    ordered = sorted(keys)
    text = json.dumps([[t for t, _ in ordered], [k for _, k in ordered]])
    return PreEscaped(text) if isinstance(store, ClickHouseStore) else text


_STORED_OVERRIDES = (
    f"SELECT tenant_id, event_id, argMax(agent_id, recorded_at),"
    f" argMax(content_digest, recorded_at) FROM {LESSON_OVERRIDES.qualified}"
    f" WHERE (tenant_id, event_id) IN ({_KEYS % 'keys'}) GROUP BY tenant_id, event_id"
)


def stored_overrides(store: Store, keys: set[Key]) -> dict[Key, tuple[str, str]]:
    """(agent, content digest) of the stored overrides among `keys`: one query, none
    for a commit without overrides."""
    if not keys:
        return {}
    rows = store.query(_STORED_OVERRIDES, {"keys": _keys(store, keys)}).rows
    return {(str(t), str(k)): (str(agent), str(digest)) for t, k, agent, digest in rows}


def claim(store: Store, owners: Owners) -> None:
    """Insert the claims `decide` recorded. A claim the store refuses for good (a value
    it cannot hold) is left out: the rows it would allow are refused the same way."""
    for table, claims in (
        (EVENT_OWNERS, owners.event_claims),
        (STREAM_OWNERS, owners.stream_claims),
    ):
        rows = list(claims.values())
        if rows:
            _insert_keeping_good(store, table.qualified, rows, table.columns)


def _insert_keeping_good(
    store: Store, table: str, rows: list[list[Any]], columns: tuple[str, ...]
) -> None:
    try:
        store.insert(table, rows, columns)
    except Exception as err:
        if not is_permanent(err):
            raise
        if len(rows) > 1:
            middle = len(rows) // 2
            _insert_keeping_good(store, table, rows[:middle], columns)
            _insert_keeping_good(store, table, rows[middle:], columns)


__all__ = [
    "EVENT_OWNED",
    "OVERRIDE_CONFLICT",
    "STREAM_OWNED",
    "Checked",
    "Owners",
    "StreamOwner",
    "Submission",
    "Writer",
    "check",
    "claim",
    "decide",
    "lookup",
]
