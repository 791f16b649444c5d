"""The read executor: store work for requests (the admin endpoint's queries, the HTTP
API's analyses) on a bounded pool of threads of its own, never the one the commit path
or the periodic jobs use, so however slow the reads, ingest goes on.

Past `workers` running and `WAITING_PER_WORKER` times as many waiting, `run` refuses
at once with `WorkersBusy` (a retry delay, never a client timeout). A caller that goes
away before its answer (its task cancelled: a closed connection, a timeout) stops its
statements in the store: the work marks each one (`ingest.store.reader.Marked`) with
the marker it is given, and they are killed by that mark from a thread of their own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

from ingest.redact import redact
from ingest.store.limits import LimitRequest
from ingest.store.reader import new_marker
from schemas.store import Store

log = logging.getLogger(__name__)

T = TypeVar("T")

# Requests waiting for a worker, per worker, before more are refused.
WAITING_PER_WORKER = 3
# How long a cancelled request's statement may take to stop before we say so.
CANCEL_SECONDS = 10.0
RETRY_AFTER_SECONDS = 1


class Sessions(Protocol):
    """A connection to the owner's store for one request: `reading` a read-only one
    (scoped to `tenant`, within `limits` and the owner's, if given), `writing` a
    writing one; `cancel` stops the running statements marked `marker`."""

    def reading(
        self, tenant: str | None = None, limits: LimitRequest | None = None
    ) -> AbstractContextManager[Store]: ...

    def writing(self) -> AbstractContextManager[Store]: ...

    def cancel(self, marker: str) -> None: ...

    def close(self) -> None: ...


class WorkersBusy(Exception):
    """Every worker is busy and the queue is full: retry after `retry_after` seconds."""

    def __init__(self, outstanding: int) -> None:
        super().__init__(f"{outstanding} store requests are running or waiting; retry later")
        self.retry_after = RETRY_AFTER_SECONDS


class StoreWorkers:
    """`run(work)`: `work(marker)` on a worker thread, within the bound, stopped in the
    store if its caller goes away. `sessions` (None: the process holds no store) is
    what the work opens its connections from."""

    def __init__(self, sessions: Sessions | None, workers: int = 4) -> None:
        self.sessions = sessions
        self._pool = concurrent.futures.ThreadPoolExecutor(workers, "store-read")
        self._max_outstanding = workers * (1 + WAITING_PER_WORKER)
        self.outstanding = 0
        # Kills run on a thread of their own: never behind the queries they stop.
        self._canceller = concurrent.futures.ThreadPoolExecutor(1, "store-cancel")

    async def run(self, work: Callable[[str], T]) -> T:
        if self.outstanding >= self._max_outstanding:
            raise WorkersBusy(self.outstanding)
        marker = new_marker()
        self.outstanding += 1
        running = self._pool.submit(work, marker)
        try:
            return await asyncio.wrap_future(running)
        except asyncio.CancelledError:
            if not running.cancel():  # started: stop it in the store, not just here
                await self._stop(marker, running)
            raise
        finally:
            self.outstanding -= 1

    async def off_loop(self, function: Callable[..., T], *args: Any) -> T:
        """A CPU-bound step (decoding a large body) on a worker, off the event loop."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, function, *args)

    async def _stop(self, marker: str, running: concurrent.futures.Future[Any]) -> None:
        """Kill the marked statements until the work is done (a statement that had not
        reached the server's process list yet is killed at the next try)."""
        sessions, loop = self.sessions, asyncio.get_running_loop()
        finished = asyncio.wrap_future(running)
        # Its outcome (the store's "query was cancelled") is nobody's to read.
        finished.add_done_callback(lambda done: done.cancelled() or done.exception())
        if sessions is None:
            return
        deadline = loop.time() + CANCEL_SECONDS
        while not finished.done() and loop.time() < deadline:
            try:
                await loop.run_in_executor(self._canceller, sessions.cancel, marker)
            except Exception as err:
                log.warning("cancelling an abandoned request failed: %s", redact(str(err)))
                return
            await asyncio.wait([finished], timeout=0.2)
        if not finished.done():
            log.warning("an abandoned store request still runs after %gs", CANCEL_SECONDS)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._canceller.shutdown(wait=False)
