"""Ownership decided in memory for the one process that holds an embedded store
(decision 0010, "Fourth round: the log").

The small-request log answers a request before its rows reach the store, so who owns
an event id or a stream must be known without a store query per commit. The index
holds:

- a Bloom filter of every key claimed in the store (filled from `event_owners` and
  `stream_owners` at start) or by this process since: a key it does not hold has
  certainly no owner;
- the owners of the keys claimed by the log and not yet drained (exact, pinned until
  the store holds them), and of recently seen keys (bounded, least recently used).

Any other key (the filter may hold it) is looked up in the store, one query for the
commit's such keys (`ingest.store.owners.lookup`). An event id's entry is its owner
and its placement (`schemas.placement`): a re-send decided from memory keeps the
sorting key of its first version, as one decided by the store's lookup does. A
writer other than the log (an override through the API or the admin endpoint) is
noted with `foreign_write`; the next decision first reads the claims written since.
"""

from __future__ import annotations

import random
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

from ingest.store import owners
from ingest.store.owners import Owners, Submission
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

    @property
    def nbytes(self) -> int:
        return sum(len(words) * words.itemsize for words, _, _ in self._filters)


class ClaimIndex:
    """The owners the log decides against (see the module docstring)."""

    def __init__(self, recent: int = 100_000) -> None:
        self.bloom = Bloom()
        # The owners of the keys the log claimed and has not drained (pinned).
        self._pending: dict[tuple[str, str, str], Any] = {}
        self._recent: OrderedDict[tuple[str, str, str], Any] = OrderedDict()
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
                item = (kind, str(tenant), str(key))
                self.bloom.add(item)
                self._recent.pop(item, None)  # the store says again who owns it
                self._blocks[kind] = max(self._blocks[kind], int(block))

    # --- deciding ---------------------------------------------------------------------

    def _known(self, item: tuple[str, str, str]) -> Any:
        value = self._pending.get(item)
        if value is not None:
            return value
        value = self._recent.get(item)
        if value is not None:
            self._recent.move_to_end(item)
        return value

    def owners(self, store: Store, events: Iterable[Key], streams: Iterable[Key]) -> Owners:
        """What owns `events` and `streams`: from memory, and for the keys the filter may
        hold and memory does not, one store lookup."""
        if self._stale:
            self._refresh(store)
        found = Owners(claim_events=False)
        maybe_events: set[Key] = set()
        maybe_streams: set[Key] = set()
        for kind, keys, maybe in (("e", events, maybe_events), ("s", streams, maybe_streams)):
            for key in keys:
                item = (kind, *key)
                value = self._known(item)
                if value is None:
                    if item in self.bloom:
                        maybe.add(key)
                elif kind == "s":
                    found.streams[key] = value
                else:  # an event's owner and placement (None: an override's id)
                    found.events[key], place = value
                    if place is not None:
                        found.placements[key] = place
        if maybe_events or maybe_streams:
            self.store_lookups += 1
            stored = owners.lookup(store, maybe_events, maybe_streams)
            for key, agent in stored.events.items():
                found.events[key] = agent
                place = stored.placements.get(key)
                if place is not None:
                    found.placements[key] = place
                self._remember(("e", *key), (agent, place))
            for key, stream_owner in stored.streams.items():
                found.streams[key] = stream_owner
                self._remember(("s", *key), stream_owner)
        return found

    def _remember(self, item: tuple[str, str, str], value: Any) -> None:
        self._recent[item] = value
        self._recent.move_to_end(item)
        while len(self._recent) > self._recent_max:
            self._recent.popitem(last=False)

    def pin(
        self, decided: Owners, events: Iterable[Key], streams: Iterable[Key], frame: int
    ) -> list[tuple[str, str, str]]:
        """After a commit's decision: its keys' owners (claimed now or known) are known
        until frame `frame` is drained; returns the keys newly pinned."""
        pinned: list[tuple[str, str, str]] = []
        pending, add = self._pending, self.bloom.add
        placements = decided.placements
        for kind, keys, values in (("e", events, decided.events), ("s", streams, decided.streams)):
            for key in keys:
                known = values.get(key)
                if known is None:
                    continue
                item = (kind, *key)
                if item in pending:
                    continue
                add(item)
                # an event's: with the placement its re-sends keep (`schemas.placement`)
                pending[item] = (known, placements.get(key)) if kind == "e" else known
                pinned.append(item)
        return pinned

    def unpin(self, items: Sequence[tuple[str, str, str]], stored: bool) -> None:
        """`stored`: the store now holds these claims (remembered as recent); else they
        were never made durable (forgotten: the filter still sends them to the store)."""
        for item in items:
            value = self._pending.pop(item, None)
            if value is not None and stored:
                self._remember(item, value)

    def forget(self, items: Iterable[tuple[str, str, str]]) -> None:
        """Keys whose claim the store refused: the store decides them again."""
        for item in items:
            self._pending.pop(item, None)
            self._recent.pop(item, None)

    @property
    def pending(self) -> int:
        return len(self._pending)


def decide(
    index: ClaimIndex, store: Store, submissions: Sequence[Submission], frame: int
) -> tuple[list[owners.Batch], Owners, list[tuple[str, str, str]]]:
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


__all__ = ["Bloom", "ClaimIndex", "claim_rows", "decide"]
