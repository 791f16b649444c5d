"""The hand-off: where a validated batch goes to become durable, and the steps every
caller (the export handler, replay, tests) takes to put it there:

    with handoff.arriving():                  event loop: a request is on its way
        prepared = handoff.prepare(batch)     the hand-off's own work that needs no
                                              event loop (the export handler runs it
                                              on its decode thread, after validation)
    stored = await handoff.submit(prepared, receipt_id, size_bytes)
                                              event loop, with no await since leaving
                                              `arriving`: returns once durable

Every implementation takes every step; one with nothing to do in a step does
nothing there (the embedded hand-off's `prepare`, Kafka's `arriving`). What a step
hands the next travels in the value it returns (`Prepared`), never in the hand-off:
a request abandoned between two steps leaves nothing behind. `readiness` says why
the hand-off cannot take requests now, and `close` writes what it holds.

A batch is a `ValidatedBatch`, or, for a hand-off whose `takes_fast_batches` is true,
also the hot path's `FastBatch` (`ingest.export.fast`: an all-valid request's rows,
without models); a hand-off that needs the models of one calls its `materialize`.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol, TypeVar

from ingest.export.fast import FastBatch
from schemas.events import ValidatedBatch

# What a hand-off is given and answers with.
AnyBatch = ValidatedBatch | FastBatch


@dataclass(frozen=True)
class Prepared:
    """A batch ready to `submit`: `batch` is what its client will be answered for (what
    the hand-off cannot carry already moved to `quarantined`). A hand-off subclasses it
    to carry the work its `prepare` did."""

    batch: AnyBatch


PreparedT = TypeVar("PreparedT", bound=Prepared)


class Handoff(Protocol[PreparedT]):
    # True: `prepare` takes a `FastBatch` as it is (the export handler then tries the
    # hot path first); a hand-off without the attribute is given models only.
    # `fast_batch_json`: the fast batches it is given carry their models' JSON.
    takes_fast_batches: bool

    def arriving(self) -> AbstractContextManager[None]:
        """Mark a request as received and still being validated; exit before `submit`.
        A commit about to be written may wait for it (group commit)."""
        ...

    def prepare(self, batch: AnyBatch) -> PreparedT:
        """Quarantine what the hand-off cannot carry, so the client is told, and do the
        work `submit` needs that needs no event loop; safe to run off the loop."""
        ...

    async def submit(self, prepared: PreparedT, receipt_id: str, size_bytes: int) -> AnyBatch:
        """Returns once the batch is durable, with the batch as it was stored: spans the
        store refused for good moved from events and emissions to `quarantined` (a
        hand-off that refuses nothing returns `prepared.batch`). Raises a
        `RetryableError` (nothing promised) for the client to retry, or a
        `PermanentError` when the store refused every span of the request."""
        ...

    async def readiness(self) -> str | None:
        """Why it cannot take requests now (its store or broker), or None."""
        ...

    async def close(self) -> None:
        """Refuse new requests, make durable what it holds, disconnect."""
        ...
