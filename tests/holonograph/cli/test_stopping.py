"""Stop means stop, whatever a service is doing: a process whose graceful stop waits on
a store call that never returns (a thread blocked in it, which nothing in Python can
interrupt) still exits within its bound on SIGTERM, and a second Ctrl-C exits at once;
a stop that finishes in time exits normally."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

# A service whose stop waits on a "store" call blocked for good, as `serve` and `sink`
# would on a ClickHouse server that stopped answering.
SERVICE = textwrap.dedent(
    """
    import asyncio, sys, threading, time
    from holonograph.cli.stopping import Stopping

    async def main(bound: float, stop_takes: float, how: str) -> None:
        stopping = Stopping(bound, "nothing was acknowledged")
        stopping.install()
        print("ready", flush=True)
        await stopping.requested.wait()
        if how == "blocks-the-loop":  # even the event loop stops turning
            time.sleep(stop_takes)
        stuck = asyncio.to_thread(time.sleep, stop_takes)  # a store call that hangs
        if how == "gives-up":  # the service's own bound, as `sink` and `serve` have
            try:
                await asyncio.wait_for(stuck, stopping.margin())
            except TimeoutError:
                stopping.expire()
        else:  # no bound of its own: the watchdog's
            await stuck
        print("stopped", flush=True)

    asyncio.run(main(float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]))
    """
)


def start(bound: float, stop_takes: float, how: str = "gives-up") -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", SERVICE, str(bound), str(stop_takes), how],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    return process


def stop(process: subprocess.Popen[str], *signals: signal.Signals) -> tuple[float, str, str]:
    """Send `signals`, each after the process said it is stopping (a second Ctrl-C is
    one the process saw after the first); the seconds until it exited, and its output."""
    assert process.stderr is not None
    started = time.monotonic()
    seen: list[str] = []
    for n, sig in enumerate(signals):
        if n:
            while not any("stopping (" in line for line in seen):
                line = process.stderr.readline()
                if not line:
                    break
                seen.append(line)
        process.send_signal(sig)
    stdout, stderr = process.communicate(timeout=60)
    return time.monotonic() - started, stdout, "".join(seen) + stderr


@pytest.mark.parametrize(
    ("sig", "how"),
    [
        (signal.SIGTERM, "gives-up"),
        (signal.SIGINT, "gives-up"),
        (signal.SIGTERM, "hangs"),
        (signal.SIGTERM, "blocks-the-loop"),
    ],
)
def test_a_stop_stuck_in_a_blocked_call_ends_within_the_bound(
    sig: signal.Signals, how: str
) -> None:
    process = start(bound=2.0, stop_takes=600, how=how)
    seconds, stdout, stderr = stop(process, sig)
    assert seconds < 2.0 + 1.5, stderr
    assert process.returncode == 130
    assert "stopping (at most 2s; Ctrl-C again to exit now)" in stderr
    assert "did not stop within 2s: exiting; nothing was acknowledged" in stderr
    assert "stopped" not in stdout


def test_a_second_signal_exits_at_once() -> None:
    process = start(bound=60.0, stop_takes=600)
    seconds, _, stderr = stop(process, signal.SIGINT, signal.SIGINT)
    assert seconds < 1.5, stderr
    assert process.returncode == 130
    assert "SIGINT again: exiting now; nothing was acknowledged" in stderr


def test_a_stop_that_finishes_in_time_exits_normally() -> None:
    process = start(bound=5.0, stop_takes=0.1)
    _, stdout, stderr = stop(process, signal.SIGTERM)
    assert process.returncode == 0, stderr
    assert stdout.strip() == "stopped"
