"""A job command whose stores are closed ends without the interpreter's teardown
(`holonograph.cli.leaving`): the same exit code and output, its writes kept, and the
ordinary exit whenever that would not be so."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from holonograph.cli import leaving
from ingest.store.clickhouse import open_store
from tests.holonograph.cli.test_completeness import data_dir as data_dir

ROOT = Path(__file__).resolve().parents[3]


class Ended(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


@pytest.fixture
def ended(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """`os._exit` raising `Ended`, the module's counts reset, and the `atexit` runs seen."""
    ran: list[str] = []

    def exit_now(code: int) -> None:
        raise Ended(code)

    monkeypatch.setattr(leaving.os, "_exit", exit_now)
    monkeypatch.setattr(leaving.atexit, "_run_exitfuncs", lambda: ran.append("atexit"))
    monkeypatch.setattr(leaving, "_held", 0)
    monkeypatch.setattr(leaving, "_released", 0)
    yield ran


def test_a_command_that_opened_no_store_exits_as_before(ended: list[str]) -> None:
    leaving.leave(0)  # returns: the interpreter exits
    assert ended == []


def test_a_store_still_open_keeps_the_ordinary_exit(ended: list[str]) -> None:
    leaving.hold()
    leaving.hold()
    leaving.release()
    leaving.leave(1)
    assert ended == []


def test_settled_ends_with_the_code_after_the_atexit_handlers(ended: list[str]) -> None:
    leaving.hold()
    leaving.release()
    for code, status in ((None, 0), (1, 1), (3, 3)):
        with pytest.raises(Ended) as done:
            leaving.leave(code)
        assert done.value.code == status
    assert ended == ["atexit"] * 3
    leaving.leave("a message")  # the interpreter prints it: its own exit
    assert len(ended) == 3


def test_a_running_thread_keeps_the_ordinary_exit(ended: list[str]) -> None:
    leaving.hold()
    leaving.release()
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)
    worker.start()
    try:
        leaving.leave(0)  # the interpreter would join it: so does this exit
    finally:
        stop.set()
        worker.join()
    assert ended == []


class _Broken:
    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_stream_that_cannot_flush_keeps_the_ordinary_exit(
    ended: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    leaving.hold()
    leaving.release()
    monkeypatch.setattr(sys, "stdout", _Broken())
    leaving.leave(0)  # the interpreter's exit reports the pipe, as before
    assert ended == []


def test_a_process_started_without_stdout_still_leaves(
    ended: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    leaving.hold()
    leaving.release()
    monkeypatch.setattr(sys, "stdout", None)  # `holonograph ... >&-`
    with pytest.raises(Ended):
        leaving.leave(0)


def holonograph(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "holonograph", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.clickhouse
def test_a_process_that_left_early_kept_its_writes_and_its_output(
    data_dir: Path,
) -> None:
    """`--refresh` writes the status tables and exits 1 (a finding) through `leave`; the
    next process reads what it wrote, and the piped JSON is whole."""
    args = ["completeness", "--data-dir", str(data_dir), "--as-of", "2026-07-01T12:00:00Z"]
    wrote = holonograph(*args, "--refresh", "--json")
    assert wrote.returncode == 1, wrote.stderr[-2000:]
    assert [s["stream"] for s in json.loads(wrote.stdout)["streams"]] == [
        "crashed",
        "lossy",
        "clean",
    ]
    again = holonograph(*args)
    assert again.returncode == 1, again.stderr[-2000:]
    assert "tables stream_status, completeness_windows refreshed 2026-07-01T12:00:00Z" in (
        again.stdout
    )
    store = open_store(f"chdb://{data_dir}")
    try:
        got = store.query(
            "SELECT emission_stream, status FROM holonograph.stream_status FINAL"
            " ORDER BY emission_stream"
        ).rows
    finally:
        store.close()
    assert got == [("clean", "closed-complete"), ("crashed", "dead"), ("lossy", "closed-lossy")]


@pytest.mark.clickhouse
def test_a_job_command_is_settled_once_its_stores_are_closed(
    data_dir: Path,
    ended: list[str],
) -> None:
    from click.testing import CliRunner

    from holonograph.cli import cli

    result = CliRunner().invoke(cli, ["completeness", "--data-dir", str(data_dir), "--json"])
    assert result.exit_code == 1, result.output
    assert leaving.settled()
    missing = CliRunner().invoke(cli, ["completeness", "--data-dir", str(data_dir / "none")])
    assert missing.exit_code == 3, missing.output
    assert not leaving.settled()  # the one that failed to open stays held: the usual exit
