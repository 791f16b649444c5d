"""The hand-off: where a validated batch goes to become durable (`ingest.handoff.embedded`)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable

from schemas.events import DecodedBatch


class Handoff(Protocol):
    """Where validated batches go. `submit` returns once they are durable, with the
    batch as it was stored: spans the store refused for good moved from events and
    emissions to `quarantined` (a hand-off that refuses nothing returns `batch`).
    It raises a `RetryableError` (nothing promised) for the client to retry, or a
    `PermanentError` when the store refused every span of the request."""

    async def submit(
        self, batch: DecodedBatch, receipt_id: str, size_bytes: int
    ) -> DecodedBatch: ...

    async def close(self) -> None: ...


@runtime_checkable
class ScreeningHandoff(Protocol):
    """A hand-off with limits of its own (Kafka's message size): `screen` moves what it
    cannot carry into `quarantined` before submit, so the client is told; `readiness`
    says why it cannot take requests now (None when it can)."""

    def screen(self, batch: DecodedBatch) -> DecodedBatch: ...

    async def readiness(self) -> str | None: ...


@runtime_checkable
class GroupCommitHandoff(Protocol):
    """A hand-off whose commits may wait for requests still being decoded."""

    def arriving(self) -> AbstractContextManager[None]: ...
