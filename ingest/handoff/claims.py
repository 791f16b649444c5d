"""Ownership decided in memory for the one process that holds an embedded store
(decision 0010, "Fourth round: the log").

The small-request log answers a request before its rows reach the store, so who owns
an event id or a stream must be known without a store query per commit. The index
holds:

- a Bloom filter of every key claimed in the store (filled from `event_owners` and
  `stream_owners` at start) or by this process since: a key it does not hold has
  certainly no owner;
- the owners of the keys claimed by the log and not yet drained (exact, pinned until
  the store holds them), and of recently seen keys (bounded: two generations, the
  older dropped whole when the newer fills).

A key the filter does not hold is new: it is added and decided from the commit alone,
and memory is asked only about the others. Those memory does not know (the filter may
hold them) are looked up in the store, one query for the commit's such keys
(`ingest.store.owners.lookup`). A commit's keys are taken as sets and its decision's
owners kept as the dicts it made, so a commit of new keys costs one filter step a key
and no other Python a key (bench/RESULTS.md, "Ninth round"). An event id's entry is
its owner and its placement (`schemas.placement`): a re-send decided from memory keeps
the sorting key of its first version, as one decided by the store's lookup does. A
writer other than the log (an override through the API or the admin endpoint) is
noted with `foreign_write`; the next decision first reads the claims written since.
"""

from __future__ import annotations

import random
from array import array
from collections.abc import Iterable, Sequence
from typing import Any

from ingest.store import owners
from ingest.store.owners import Owners, StreamOwner, Submission
from schemas.placement import Placement
from schemas.store import Store
from schemas.tables import EVENT_OWNERS, STREAM_OWNERS

Key = tuple[str, str]
_PAGE = 100_000


def _masks(count: int = 4096, k: int = 7) -> tuple[int, ...]:
    """`count` 64-bit words of `k` bits each (fixed: the filter is rebuilt every start)."""
    rng = random.Random(7)
    return tuple(sum(1 << bit for bit in rng.sample(range(64), k)) for _ in range(count))


_MASKS = _masks()


class Bloom:
    """A blocked Bloom filter over Python's hash of a key (salted per process: the filter
    never leaves it): a key sets 7 bits of one 64-bit word, the word chosen by the
    hash's low half and the bits (a mask of a fixed table) by its high half, so adding
    or asking is one word, not seven bits apart. At ~10 bits a key it answers ~1-2%
    false positives (each costs a store lookup, never a wrong decision); grown by
    adding a filter twice as large (a scalable Bloom filter)."""

    def __init__(self, capacity: int = 1 << 20) -> None:
        self._filters: list[tuple[array[int], int, int]] = []  # words, word count, capacity
        self._count = 0
        self._capacity = 0
        self._grow(capacity)

    def _grow(self, capacity: int) -> None:
        words = max(1, capacity * 10 // 64)  # ~10 bits a key
        self._filters.append((array("Q", bytes(8 * words)), words, capacity))
        self._capacity += capacity
        self._count = 0

    def add(self, item: tuple[str, str, str]) -> None:
        words, size, capacity = self._filters[-1]
        if self._count >= capacity:
            self._grow(capacity * 2)
            words, size, capacity = self._filters[-1]
        self._count += 1
        h = hash(item)
        words[(h & 0xFFFFFFFF) % size] |= _MASKS[(h >> 32) & 0xFFF]

    def __contains__(self, item: tuple[str, str, str]) -> bool:
        h = hash(item)
        at, mask = h & 0xFFFFFFFF, _MASKS[(h >> 32) & 0xFFF]
        for words, size, _ in self._filters:  # noqa: SIM110 (no generator per question)
            if words[at % size] & mask == mask:
                return True
        return False

    def held_or_add(self, kind: str, keys: Iterable[Key]) -> set[Key]:
        """The keys whose `(kind, *key)` the filter may hold; every other one is added
        (`add`), all in one call: a commit's keys, each hashed once."""
        held: set[Key] = set()
        masks, filters = _MASKS, self._filters
        words, size, capacity = filters[-1]
        for pair in keys:
            h = hash((kind, *pair))
            at, mask = h & 0xFFFFFFFF, masks[(h >> 32) & 0xFFF]
            for old_words, old_size, _ in filters:
                if old_words[at % old_size] & mask == mask:
                    held.add(pair)
                    break
            else:
                if self._count >= capacity:
                    self._grow(capacity * 2)
                    words, size, capacity = filters[-1]
                self._count += 1
                words[at % size] |= mask
        return held

    @property
    def nbytes(self) -> int:
        return sum(len(words) * words.itemsize for words, _, _ in self._filters)


class _Known:
    """Owners by key, for each kind: events' (`events`, with `placements`) and streams'."""

    __slots__ = ("events", "placements", "streams")

    def __init__(self) -> None:
        self.events: dict[Key, str] = {}
        self.placements: dict[Key, Placement | None] = {}
        self.streams: dict[Key, StreamOwner] = {}

    def __len__(self) -> int:
        return len(self.events) + len(self.streams)

    def add(self, known: _Known) -> None:
        self.events.update(known.events)
        self.placements.update(known.placements)
        self.streams.update(known.streams)

    def drop(self, kind: str, key: Key) -> None:
        if kind == "e":
            self.events.pop(key, None)
            self.placements.pop(key, None)
        else:
            self.streams.pop(key, None)


class Pinned(_Known):
    """What one commit's decision made known (`ClaimIndex.pin`), kept by the index until
    its frame is drained (`ClaimIndex.unpin`): its owners, and a copy of its placements
    (the frame's rows are written under the decision's own)."""

    __slots__ = ("frame",)

    def __init__(
        self,
        frame: int = 0,
        events: dict[Key, str] | None = None,
        placements: dict[Key, Placement] | None = None,
        streams: dict[Key, StreamOwner] | None = None,
    ) -> None:
        super().__init__()
        self.frame = frame
        self.events = events or {}
        self.placements = dict(placements or {})
        self.streams = streams or {}


class ClaimIndex:
    """The owners the log decides against (see the module docstring)."""

    def __init__(self, recent: int = 100_000) -> None:
        self.bloom = Bloom()
        # What each logged and undrained commit decided (pinned), and all of it merged
        # (`_pending`, rebuilt after a drain unpins: later commits' owners agree with
        # earlier ones', so a merge in any order holds each key's one owner).
        self._frames: dict[int, Pinned] = {}
        self._pending = _Known()
        self._stale_pending = False
        # Recently seen keys: the newer generation takes them; once it holds half of
        # `recent` keys it becomes the older one, and the older one is dropped.
        self._recent = _Known()
        self._older = _Known()
        self._recent_max = recent
        self._blocks = {"e": -1, "s": -1}
        self._stale = False
        self.store_lookups = 0  # commits that needed one (metrics, tests)

    # --- filling ----------------------------------------------------------------------

    def load(self, store: Store) -> int:
        """Every claim the store holds (paged by the tables' sorting key); returns how
        many keys were read."""
        read = 0
        for kind, table, column in (
            ("e", EVENT_OWNERS, "event_id"),
            ("s", STREAM_OWNERS, "emission_stream"),
        ):
            top = store.query(f"SELECT count(), max(_block_number) FROM {table.qualified}").rows
            self._blocks[kind] = int(top[0][1]) if top and int(top[0][0]) else -1
            last: tuple[str, str] | None = None
            while True:
                after = (
                    ""
                    if last is None
                    else f" WHERE (tenant_id, {column}) > ({{t:String}}, {{k:String}})"
                )
                params = {} if last is None else {"t": last[0], "k": last[1]}
                rows = store.query(
                    f"SELECT DISTINCT tenant_id, {column} FROM {table.qualified}{after}"
                    f" ORDER BY tenant_id, {column} LIMIT {_PAGE}",
                    params,
                ).rows
                for tenant, key in rows:
                    self.bloom.add((kind, str(tenant), str(key)))
                read += len(rows)
                if len(rows) < _PAGE:
                    break
                last = (str(rows[-1][0]), str(rows[-1][1]))
        return read

    def foreign_write(self) -> None:
        """Another writer of this process may have claimed keys: read them before the
        next decision (thread-safe: a flag)."""
        self._stale = True

    def _refresh(self, store: Store) -> None:
        self._stale = False
        for kind, table, column in (
            ("e", EVENT_OWNERS, "event_id"),
            ("s", STREAM_OWNERS, "emission_stream"),
        ):
            since = self._blocks[kind]
            where = "" if since < 0 else " WHERE _block_number > {b:UInt64}"
            rows = store.query(
                f"SELECT tenant_id, {column}, _block_number FROM {table.qualified}{where}",
                {} if since < 0 else {"b": since},
            ).rows
            for tenant, key, block in rows:
                pair = (str(tenant), str(key))
                self.bloom.add((kind, *pair))
                self._recent.drop(kind, pair)  # the store says again who owns it
                self._older.drop(kind, pair)
                self._blocks[kind] = max(self._blocks[kind], int(block))

    # --- deciding ---------------------------------------------------------------------

    def owners(self, store: Store, events: Iterable[Key], streams: Iterable[Key]) -> Owners:
        """What owns `events` and `streams`: nothing for a key the filter does not hold
        (added to it now), from memory, and for the keys the filter may hold and memory
        does not, one store lookup."""
        if self._stale:
            self._refresh(store)
        if self._stale_pending:
            self._merge_pending()
        found = Owners(claim_events=False)
        maybe_events = self._known("e", self.bloom.held_or_add("e", events), found)
        maybe_streams = self._known("s", self.bloom.held_or_add("s", streams), found)
        if maybe_events or maybe_streams:
            self.store_lookups += 1
            stored = owners.lookup(store, maybe_events, maybe_streams)
            for key, agent in stored.events.items():
                found.events[key] = agent
                place = stored.placements.get(key)
                if place is not None:
                    found.placements[key] = place
                self._remember("e", key, agent, place)
            for key, stream_owner in stored.streams.items():
                found.streams[key] = stream_owner
                self._remember("s", key, stream_owner)
        return found

    def _known(self, kind: str, keys: set[Key], found: Owners) -> set[Key]:
        """Record in `found` the owners memory holds of `keys` (the filter's): pending,
        then recent (kept recent); returns the others."""
        unknown: set[Key] = set()
        for key in keys:
            for at, known in enumerate((self._pending, self._recent, self._older)):
                if kind == "s":
                    stream_owner = known.streams.get(key)
                    if stream_owner is None:
                        continue
                    found.streams[key] = stream_owner
                    if at:
                        self._remember("s", key, stream_owner)
                    break
                agent = known.events.get(key)
                if agent is None:
                    continue
                found.events[key] = agent
                place = known.placements.get(key)  # None: an override's id
                if place is not None:
                    found.placements[key] = place
                if at:
                    self._remember("e", key, agent, place)
                break
            else:
                unknown.add(key)
        return unknown

    def _remember(self, kind: str, key: Key, owner: Any, place: Placement | None = None) -> None:
        recent = self._recent
        if kind == "s":
            recent.streams[key] = owner
        else:
            recent.events[key] = owner
            recent.placements[key] = place
        if len(recent) >= self._recent_max // 2:
            self._age()

    def _age(self) -> None:
        """The newer generation of recent keys (half of `recent`) becomes the older; the
        older is dropped."""
        self._older, self._recent = self._recent, _Known()

    def pin(
        self, decided: Owners, events: Iterable[Key], streams: Iterable[Key], frame: int
    ) -> Pinned:
        """After a commit's decision: its keys' owners (claimed now or known) are known
        until frame `frame` is drained; returns what it pins (the decision's owners of
        `events` and `streams`: their every key, as `decide` gives them)."""
        pinned = Pinned(frame, decided.events, decided.placements, decided.streams)
        self._frames[frame] = pinned
        self._pending.add(pinned)
        return pinned

    def unpin(self, pinned: Pinned, stored: bool) -> None:
        """`stored`: the store now holds these claims (remembered as recent); else they
        were never made durable (forgotten: the filter still sends them to the store)."""
        if self._frames.get(pinned.frame) is not pinned:
            return
        del self._frames[pinned.frame]
        self._stale_pending = True
        if stored:
            self._recent.add(pinned)
            if len(self._recent) >= self._recent_max // 2:
                self._age()

    def _merge_pending(self) -> None:
        self._stale_pending = False
        self._pending = _Known()
        for pinned in self._frames.values():
            self._pending.add(pinned)

    def forget(self, items: Iterable[tuple[str, str, str]]) -> None:
        """Keys whose claim the store refused: the store decides them again."""
        for kind, tenant, key in items:
            pair = (tenant, key)
            for pinned in self._frames.values():
                pinned.drop(kind, pair)
            for known in (self._pending, self._recent, self._older):
                known.drop(kind, pair)

    @property
    def pending(self) -> int:
        if self._stale_pending:
            self._merge_pending()
        return len(self._pending)


def decide(
    index: ClaimIndex, store: Store, submissions: Sequence[Submission], frame: int
) -> tuple[list[owners.Batch], Owners, Pinned]:
    """`ingest.store.owners.check` for one writer, against `index`: each submission's
    batch as it may be stored, the decision (its `stream_claims` and override
    `event_claims` are the rows the log carries to the store), the keys pinned."""
    events = owners._event_keys(submissions)
    streams = owners._stream_keys(submissions)
    decided = index.owners(store, events, streams)
    decided.stored_overrides = owners.stored_overrides(store, owners._override_keys(submissions))
    checked = [owners.decide(decided, s) for s in submissions]
    return checked, decided, index.pin(decided, events, streams, frame)


def claim_rows(decided: Owners) -> tuple[list[list[Any]], list[list[Any]]]:
    """(event claim rows, stream claim rows) of a decision, as `owners.claim` writes."""
    return list(decided.event_claims.values()), list(decided.stream_claims.values())


__all__ = ["Bloom", "ClaimIndex", "Pinned", "claim_rows", "decide"]
