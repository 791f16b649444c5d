"""Every expected failure of a command: its documented exit code, one `error:` line
(and a `hint:`) naming the cause, never a traceback; a bug: exit 70 and a trace file."""

from __future__ import annotations

import json
import socket
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from holonograph import storeaccess
from holonograph.cli import COMMANDS, cli
from ingest.store.clickhouse import open_store
from schemas.migrations import apply_migrations
from testkit.faulty_store import FaultyStore
from tests.holonograph.cli.test_serve import ServeProcess, holonograph

pytestmark = [pytest.mark.clickhouse]

ROOT = Path(__file__).resolve().parents[3]


def assert_clear(stderr: str, *causes: str) -> None:
    """One error line naming every cause, and no traceback."""
    assert "Traceback" not in stderr, stderr
    assert stderr.count("error: ") == 1, stderr
    for cause in causes:
        assert cause in stderr, stderr


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("listener", ["--grpc-port", "--http-port"])
def test_serve_on_a_port_in_use_exits_2_and_leaves_nothing_behind(
    tmp_path: Path, busy_port: int, listener: str
) -> None:
    ports = {"--grpc-port": "0", "--http-port": "0", listener: str(busy_port)}
    args = [arg for pair in ports.items() for arg in pair]
    done = holonograph("serve", "--data-dir", str(tmp_path / "d"), *args)
    assert done.returncode == 2
    assert_clear(done.stderr, f"cannot listen on 127.0.0.1:{busy_port}", "hint: ", "another port")
    assert not (tmp_path / "d" / ".holonograph-admin.json").exists()


def test_bad_configuration_names_the_setting_its_flag_and_variable(tmp_path: Path) -> None:
    done = holonograph("serve", "--data-dir", str(tmp_path), "--http-port", "70000")
    assert done.returncode == 2
    assert_clear(done.stderr, "http_port (--http-port or HOLONOGRAPH_HTTP_PORT)", "65535")
    assert len(done.stderr.strip().splitlines()) == 1
    done = holonograph("sink", "--kafka", "nowhere", "--data-dir", str(tmp_path))
    assert done.returncode == 2
    assert_clear(done.stderr, "kafka (--kafka or HOLONOGRAPH_KAFKA)", "use host:port")


def test_store_unreachable_exits_3_with_the_reason(tmp_path: Path) -> None:
    url = f"http://reader:s3cret@127.0.0.1:{closed_port()}"
    for args in (
        ["query", "--store", url, "SELECT 1"],
        ["drift", "--store", url, "--surface", "s", "--since", "2026-07-01T00:00:00Z",
         "--until", "2026-07-02T00:00:00Z"],
        ["serve", "--store", url, "--grpc-port", "0", "--http-port", "0"],
    ):  # fmt: skip
        done = holonograph(*args)
        assert done.returncode == 3, (args, done.stderr)
        assert_clear(done.stderr, "store unreachable: Connection refused", "hint: ")
        assert "s3cret" not in done.stderr  # credentials never printed


def test_a_store_that_refuses_exits_3(tmp_path: Path) -> None:
    """A stale token in the owner's admin file: the owner refuses the analysis."""
    data_dir = tmp_path / "data"
    server = ServeProcess(data_dir)
    try:
        admin_file = data_dir / ".holonograph-admin.json"
        info = json.loads(admin_file.read_text())
        admin_file.write_text(json.dumps({**info, "read_token": "stale", "write_token": "old"}))
        done = holonograph(
            "drift", "--data-dir", str(data_dir), "--surface", "s",
            "--since", "2026-07-01T00:00:00Z", "--until", "2026-07-02T00:00:00Z",
        )  # fmt: skip
    finally:
        server.stop()
    assert done.returncode == 3
    assert_clear(done.stderr, "the store refused: admin endpoint: bad or missing token")


def test_missing_input_file_exits_2(tmp_path: Path) -> None:
    missing = tmp_path / "surface.yaml"
    done = holonograph("conformance", "derive", str(missing))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert f"cannot read {missing}: No such file or directory" in done.stderr
    done = holonograph("conformance", "suite", "run", str(missing), "--data-dir", str(tmp_path))
    assert done.returncode == 2
    assert f"cannot read {missing}" in done.stderr


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    store = open_store(f"chdb://{path}")
    apply_migrations(store)
    store.close()
    return path


def _run_with_failing_store(
    monkeypatch: pytest.MonkeyPatch, store_dir: Path, error: type[Exception]
) -> Result:
    """`holonograph conformance list` on a store that starts failing (the fault seam)."""
    real_connect = storeaccess.connect

    def connect(url: str, **options: Any) -> FaultyStore:
        faulty = FaultyStore(real_connect(url, **options))
        faulty.fail("the store broke (injected)", error=error)
        return faulty

    monkeypatch.setattr(storeaccess, "connect", connect)
    return CliRunner().invoke(cli, ["conformance", "list", "--data-dir", str(store_dir)])


def test_a_store_failing_mid_command_exits_3(
    monkeypatch: pytest.MonkeyPatch, store_dir: Path
) -> None:
    result = _run_with_failing_store(monkeypatch, store_dir, ConnectionResetError)
    assert result.exit_code == 3
    assert_clear(result.stderr, "unavailable: the store broke (injected)")


def test_an_unexpected_exception_exits_70_with_a_trace_file(
    monkeypatch: pytest.MonkeyPatch, store_dir: Path, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    result = _run_with_failing_store(monkeypatch, store_dir, AssertionError)
    assert result.exit_code == 70
    assert_clear(result.stderr, "unexpected AssertionError: the store broke (injected)")
    (trace,) = (tmp_path / "cache" / "holonograph").iterdir()
    assert f"hint: the full trace is in {trace}" in result.stderr
    assert stat.S_IMODE(trace.stat().st_mode) == 0o600
    assert stat.S_IMODE(trace.parent.stat().st_mode) == 0o700
    text = trace.read_text()
    assert "Traceback (most recent call last)" in text
    assert "AssertionError: the store broke (injected)" in text
    assert "command: holonograph" in text


def test_help_documents_the_exit_codes_and_lists_every_command() -> None:
    done = holonograph("--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    assert "Exit codes: 0 ok; 1 the command found something" in text
    assert "2 usage or configuration error; 3 store or broker unreachable or refusing" in text
    assert "70 internal error" in text
    for name in COMMANDS:
        assert f" {name} " in text
        assert cli.get_command(None, name).name == name  # type: ignore[arg-type, union-attr]


def test_a_bad_store_url_is_a_usage_error_in_one_line() -> None:
    """The rule names `ingest.store.url.StoreURLError` (where the class lives): a usage
    error, exit 2, never reported as a bug."""
    from holonograph.cli.errors import translate
    from ingest.store.url import StoreURLError

    failure = translate(StoreURLError("'ftp://nowhere': use chdb:///path or http(s)://host:8123"))
    assert failure.exit_code == 2
    for args in (["query", "SELECT 1"], ["conformance", "list"], ["completeness"]):
        result = CliRunner().invoke(cli, [*args, "--store", "ftp://nowhere"])
        assert result.exit_code == 2, result.output
        assert_clear(
            result.stderr,
            "error: invalid store URL 'ftp://nowhere': use chdb:///path or http(s)://host:8123",
        )
        assert result.stderr.splitlines()[1].startswith("hint: --store chdb:///path")
        assert len(result.stderr.splitlines()) == 2
