"""Ownership decided in memory for the one process that holds an embedded store
(decision 0010, "Fourth round: the log").

The small-request log answers a request before its rows reach the store, so who owns
an event id or a stream must be known without a store query per commit. The index
holds:

- the hashes of every key claimed in the store (filled from `event_owners` and
  `stream_owners` at start) or by this process since (`KeyHashes`): a key whose hash
  it does not hold has certainly no owner;
- the owners of the keys claimed by the log and not yet drained (exact, pinned until
  the store holds them), and of recently seen keys (bounded: two generations, the
  older dropped whole when the newer fills).

A key whose hash is not held is new: it is added and decided from the commit alone,
and memory is asked only about the others. Those memory does not know (claimed, and
drained long enough ago to be forgotten: a re-send) are looked up in the store, one
query for the commit's such keys (`ingest.store.owners.lookup`). A commit's keys are
taken as sets and its decision's owners kept as the dicts it made, so a commit of new
keys costs a hash a key and no other Python a key (bench/RESULTS.md, "Ninth round").
An event id's entry is its owner and its placement (`schemas.placement`): a re-send
decided from memory keeps the sorting key of its first version, as one decided by the
store's lookup does. A writer other than the log (an override through the API or the
admin endpoint) is noted with `foreign_write`; the next decision first reads the
claims written since.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, cast

import numpy as np

from ingest.store import owners
from ingest.store.owners import Owners, StreamOwner, Submission
from schemas.placement import Placement
from schemas.store import Store
from schemas.tables import EVENT_OWNERS, STREAM_OWNERS

Key = tuple[str, str]
_PAGE = 100_000


class KeyHashes:
    """The 64-bit hashes of every key of one kind claimed (Python's hash of the key,
    salted per process: they never leave it), in sorted NumPy runs and, the newest, a
    set. A key whose hash it does not hold has certainly no owner; one whose hash it
    holds was claimed, but for two keys of one hash (~n/2**64: a store lookup, never a
    wrong decision). It replaced a Bloom filter of ~10 bits a key, whose 1-2% false
    positives made nearly every commit of a few thousand new keys look its keys up in
    the store once it was full (bench/RESULTS.md, "Tenth round"): 8 bytes a key here.
    Runs are merged as a binary counter does (one run at most a quarter the size of the
    one before), so a key is merged again ~log4(n / FRESH) times and a question asks
    that many runs."""

    FRESH = 1 << 15  # hashes kept in the set before they become a run

    def __init__(self) -> None:
        self._runs: list[np.ndarray[Any, np.dtype[np.int64]]] = []  # largest first
        self._fresh: set[int] = set()

    def __contains__(self, key: Key) -> bool:
        h = hash(key)
        if h in self._fresh:
            return True
        for run in self._runs:
            at = int(np.searchsorted(run, h))
            if at < len(run) and int(run[at]) == h:
                return True
        return False

    def extend(self, keys: Sequence[Key]) -> None:
        """Hold `keys` (the store's claims, read at start), without asking first."""
        if keys:
            self._add_run(np.fromiter(map(hash, keys), np.int64, len(keys)))

    def held_or_add(self, keys: Iterable[Key]) -> set[Key]:
        """The keys whose hash is held; every other one is held from now on, all in one
        call: a commit's keys, each hashed once, asked of every run in one step."""
        pairs = keys if isinstance(keys, (list, tuple)) else list(keys)
        hashes = list(map(hash, pairs))
        by_hash = dict(zip(hashes, pairs, strict=True))
        if len(by_hash) < len(pairs):  # two keys of one hash: each asked alone
            return self._one_by_one(pairs)
        held = self._fresh.intersection(hashes)
        if self._runs:
            asked = np.fromiter(hashes, np.int64, len(hashes))
            asked.sort()  # a run searched in order: ~4x faster than at random (cache)
            found = np.zeros(len(asked), dtype=bool)
            for run in self._runs:
                at = np.searchsorted(run, asked)
                np.minimum(at, len(run) - 1, out=at)
                found |= run[at] == asked
            if found.any():
                held.update(asked[found].tolist())
        if held:
            self._fresh.update(h for h in hashes if h not in held)
        else:
            self._fresh.update(hashes)
        if len(self._fresh) >= self.FRESH:
            self._seal()
        return {by_hash[h] for h in held}

    def _one_by_one(self, pairs: Sequence[Key]) -> set[Key]:
        held = set()
        for pair in pairs:
            if pair in self:
                held.add(pair)
            else:
                self._fresh.add(hash(pair))
        if len(self._fresh) >= self.FRESH:
            self._seal()
        return held

    def _seal(self) -> None:
        run = np.fromiter(self._fresh, np.int64, len(self._fresh))
        self._fresh = set()
        self._add_run(run)

    def _add_run(self, run: np.ndarray[Any, np.dtype[np.int64]]) -> None:
        run.sort()
        runs = self._runs
        runs.append(run)
        while len(runs) > 1 and len(runs[-2]) < 4 * len(runs[-1]):
            merged = np.concatenate(runs[-2:])
            merged.sort(kind="stable")  # two sorted runs: merged in one pass
            runs[-2:] = [merged]

    def __len__(self) -> int:
        return len(self._fresh) + sum(len(run) for run in self._runs)

    @property
    def nbytes(self) -> int:
        """Memory held: the runs, and the set (~60 bytes a key, at most `FRESH`)."""
        return sum(run.nbytes for run in self._runs) + 60 * len(self._fresh)


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
    its frame is drained (`ClaimIndex.unpin`): its owners and placements, the decision's
    own dicts (the frame's rows are written under its placements: a key dropped from
    them copies them first, `drop`)."""

    __slots__ = ("_shared", "frame")

    def __init__(
        self,
        frame: int = 0,
        events: dict[Key, str] | None = None,
        placements: dict[Key, Placement] | None = None,
        streams: dict[Key, StreamOwner] | None = None,
    ) -> None:
        # The three dicts set here, not by `_Known.__init__` (a commit's pin: no spare dicts).
        self.frame = frame
        self.events = events or {}
        # The decision's dict, not a copy (mypy: read as this class's wider type).
        self.placements = cast(dict[Key, Placement | None], placements or {})
        self.streams = streams or {}
        self._shared = placements is not None

    def drop(self, kind: str, key: Key) -> None:
        if kind == "e" and self._shared and key in self.placements:
            self.placements, self._shared = dict(self.placements), False
        super().drop(kind, key)

    def claimed(self) -> Iterable[tuple[str, Key]]:
        yield from (("e", key) for key in self.events)
        yield from (("s", key) for key in self.streams)


class ClaimIndex:
    """The owners the log decides against (see the module docstring)."""

    def __init__(self, recent: int = 100_000) -> None:
        # The hashes of every key claimed, by kind: event ids ("e") and streams ("s").
        self.claimed = {"e": KeyHashes(), "s": KeyHashes()}
        # What each logged and undrained commit decided (pinned), asked frame by frame
        # (a few frames, and only about keys whose hash is held: later commits' owners
        # agree with earlier ones', so any frame that knows a key knows its one owner).
        # Not merged: a merge cost three dict updates of a commit's keys a commit.
        self._frames: dict[int, Pinned] = {}
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
                self.claimed[kind].extend([(str(tenant), str(key)) for tenant, key in rows])
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
            # A set: the claim tables hold a row a write (a re-send claims its key again),
            # and a key twice sends `held_or_add` key by key.
            pairs = {(str(tenant), str(key)) for tenant, key, _ in rows}
            self.claimed[kind].held_or_add(pairs)
            for pair in pairs:
                self._recent.drop(kind, pair)  # the store says again who owns it
                self._older.drop(kind, pair)
            if rows:
                self._blocks[kind] = max(self._blocks[kind], *(int(row[2]) for row in rows))

    # --- deciding ---------------------------------------------------------------------

    def owners(self, store: Store, events: Iterable[Key], streams: Iterable[Key]) -> Owners:
        """What owns `events` and `streams`: nothing for a key whose hash is not held
        (held from now on), from memory, and for the keys claimed that memory does not
        know, one store lookup."""
        if self._stale:
            self._refresh(store)
        found = Owners(claim_events=False)
        maybe_events = self._known("e", self.claimed["e"].held_or_add(events), found)
        maybe_streams = self._known("s", self.claimed["s"].held_or_add(streams), found)
        if maybe_events or maybe_streams:
            self.store_lookups += 1
            stored = owners.lookup(store, maybe_events, maybe_streams)
            for key, agent in stored.events.items():
                self._found(found, "e", key, agent, stored.placements.get(key), remember=True)
            for key, stream_owner in stored.streams.items():
                self._found(found, "s", key, stream_owner, None, remember=True)
        return found

    def _known(self, kind: str, keys: set[Key], found: Owners) -> set[Key]:
        """Record in `found` the owners memory holds of `keys` (those claimed): pending,
        then recent (kept recent); returns the others."""
        unknown: set[Key] = set()
        if not keys:
            return unknown
        memory = [*self._frames.values(), self._recent, self._older]
        pinned = len(self._frames)
        for key in keys:
            for at, known in enumerate(memory):
                owner = (known.streams if kind == "s" else known.events).get(key)
                if owner is not None:
                    place = None if kind == "s" else known.placements.get(key)
                    self._found(found, kind, key, owner, place, remember=at >= pinned)
                    break
            else:
                unknown.add(key)
        return unknown

    def _found(
        self,
        found: Owners,
        kind: str,
        key: Key,
        owner: Any,
        place: Placement | None,
        remember: bool,
    ) -> None:
        """Record `key`'s owner in `found` (and its placement: None is an override's
        id); `remember`: keep it recent (it came from the store or from recent keys)."""
        if kind == "s":
            found.streams[key] = owner
        else:
            found.events[key] = owner
            if place is not None:
                found.placements[key] = place
        if remember:
            self._remember(kind, key, owner, place)

    def _remember(self, kind: str, key: Key, owner: Any, place: Placement | None = None) -> None:
        recent = self._recent
        if kind == "s":
            recent.streams[key] = owner
        else:
            recent.events[key] = owner
            recent.placements[key] = place
        self._age_if_full()

    def _age_if_full(self) -> None:
        """Once the newer generation of recent keys holds half of `recent`, it becomes
        the older; the older is dropped."""
        if len(self._recent) >= self._recent_max // 2:
            self._older, self._recent = self._recent, _Known()

    def pin(self, decided: Owners, frame: int) -> Pinned:
        """After a commit's decision: its keys' owners (claimed now or known) are known
        until frame `frame` is drained; returns what it pins (the decision's owners: every
        key of the commit, as `decide` gives them)."""
        pinned = Pinned(frame, decided.events, decided.placements, decided.streams)
        self._frames[frame] = pinned
        return pinned

    def unpin(self, pinned: Pinned, stored: bool) -> None:
        """`stored`: the store now holds these claims (remembered as recent); else they
        were never made durable (forgotten: their hashes still send them to the store)."""
        if self._frames.get(pinned.frame) is not pinned:
            return
        del self._frames[pinned.frame]
        if stored:
            self._recent.add(pinned)
            self._age_if_full()

    def forget(self, items: Iterable[tuple[str, str, str]]) -> None:
        """Keys whose claim the store refused: the store decides them again."""
        for kind, tenant, key in items:
            pair = (tenant, key)
            for pinned in self._frames.values():
                pinned.drop(kind, pair)
            for known in (self._recent, self._older):
                known.drop(kind, pair)

    @property
    def pending(self) -> int:
        """Keys pinned (each counted once)."""
        return len({(kind, key) for p in self._frames.values() for kind, key in p.claimed()})


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
    return checked, decided, index.pin(decided, frame)


def claim_rows(decided: Owners) -> tuple[list[list[Any]], list[list[Any]]]:
    """(event claim rows, stream claim rows) of a decision, as `owners.claim` writes."""
    return list(decided.event_claims.values()), list(decided.stream_claims.values())


__all__ = ["ClaimIndex", "KeyHashes", "Pinned", "claim_rows", "decide"]
