"""Stop means stop, for the long-running commands (`serve`, `sink`).

The first SIGTERM or Ctrl-C asks the service to stop gracefully and arms a watchdog:
whatever the broker or the store is doing, the process is gone `--stop-timeout`
seconds later. A second signal exits at once. Either way the exit is `os._exit`,
which waits for nothing: not for a thread blocked in a store call, not for a broker
that stopped answering. That loses nothing acknowledged: a client is answered only
once its data is durable, and the sink commits offsets only after the store took the
rows, so what was not committed is read again by the next sink.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading

import click

from holonograph.cli.errors import EXIT_INTERRUPTED


class Stopping:
    """Installs the handlers on the running loop; `requested` is set by the first signal."""

    def __init__(self, timeout_seconds: float, unfinished: str) -> None:
        self.timeout_seconds = timeout_seconds
        # What a forced exit leaves behind, said when it happens.
        self._unfinished = unfinished
        self.requested = asyncio.Event()
        self._watchdog: threading.Timer | None = None

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._signal, sig)

    def _signal(self, sig: int) -> None:
        if self.requested.is_set():
            self._exit(f"{signal.Signals(sig).name} again: exiting now; {self._unfinished}")
            return
        self.requested.set()
        click.echo(
            f"stopping (at most {self.timeout_seconds:g}s; Ctrl-C again to exit now)", err=True
        )
        # A daemon thread: it outlives a blocked event loop and runs during interpreter
        # shutdown, while the main thread waits for the executor's threads.
        self._watchdog = threading.Timer(self.timeout_seconds, self._expired)
        self._watchdog.daemon = True
        self._watchdog.start()

    def _expired(self) -> None:
        self._exit(f"did not stop within {self.timeout_seconds:g}s: exiting; {self._unfinished}")

    def expire(self) -> None:
        """The graceful stop ran out of time: exit now, as the watchdog would."""
        self._expired()

    @staticmethod
    def _exit(message: str) -> None:
        click.echo(message, err=True)
        sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED)

    def margin(self) -> float:
        """What the graceful stop may take, leaving the watchdog a moment to spare."""
        return max(self.timeout_seconds - 1.0, self.timeout_seconds * 0.8)
