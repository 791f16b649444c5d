"""Light commands stay light: `holonograph --help`, `query`, `completeness` and
`quarantine` never import the heavy libraries other commands need (they cost seconds
at start-up). Checked on the import set `python -X importtime` reports, not on time."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from holonograph.cli import BLAS_THREAD_VARIABLES
from tests.holonograph.cli.test_serve import ServeProcess

ROOT = Path(__file__).resolve().parents[3]
HEAVY = frozenset(
    {
        "scipy", "matplotlib", "numpy", "pandas", "pyarrow", "aiohttp", "grpc", "aiokafka",
        "clickhouse_connect", "chdb", "opentelemetry", "google", "prometheus_client",
    }
)  # fmt: skip


def imported(*args: str, codes: tuple[int, ...] = (0, 1)) -> set[str]:
    """Every module the command imported (dotted names); it exits with one of `codes`."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "holonograph", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode in codes, done.stderr[-2000:]
    rows = [line.split("|") for line in done.stderr.splitlines() if line.startswith("import time:")]
    return {row[2].strip() for row in rows[1:] if len(row) == 3}


def heavy(modules: set[str]) -> set[str]:
    return {name for name in modules if name.split(".")[0] in HEAVY}


@pytest.mark.parametrize(
    "args", [["--help"], ["query", "--help"], ["completeness", "--help"], ["quarantine", "-h"]]
)
def test_help_imports_nothing_heavy(args: list[str]) -> None:
    modules = imported(*args)
    assert heavy(modules) == set()
    assert "processors.drift" not in modules  # other commands' modules are not loaded


def test_the_command_group_loads_no_models() -> None:
    """`holonograph --help` (the group every command goes through) imports neither
    pydantic nor any schema's models: each command loads the models it uses."""
    modules = imported("--help")
    assert not {name for name in modules if name.split(".")[0] in {"pydantic", "pydantic_core"}}
    assert not {"schemas.analysis", "schemas.events", "schemas.completeness"} & modules
    assert "schemas.times" in modules  # the guard reads the import set it means to
    assert "yaml" not in modules  # no --config: no YAML parser


@pytest.mark.parametrize("command", ["quarantine", "completeness"])
def test_a_command_loads_only_its_own_models(command: str) -> None:
    """The analyses' report models (`schemas.analysis`) are drift's and compare's, not
    theirs; and no command's `-h` opens the store."""
    modules = imported(command, "-h")
    assert f"processors.{command}.job" in modules
    assert "schemas.analysis" not in modules
    assert not {name for name in modules if name.split(".")[0] in {"chdb", "clickhouse_connect"}}


def test_drift_help_opens_no_store_driver() -> None:
    modules = imported("drift", "-h")
    assert "processors.drift.job" in modules
    assert not {name for name in modules if name.split(".")[0] in {"chdb", "clickhouse_connect"}}


def test_the_guard_sees_a_heavy_command() -> None:
    assert "numpy" in {name.split(".")[0] for name in heavy(imported("drift", "-h"))}


def test_analysis_commands_leave_scipy_stats_and_signal_until_needed() -> None:
    """Seconds of start-up: drift and compare import only scipy.special, when used."""
    for args in (["drift", "-h"], ["compare", "-h"]):
        modules = imported(*args)
        assert not {"scipy.stats", "scipy.signal", "scipy.optimize", "matplotlib"} & modules


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    data_dir = tmp_path_factory.mktemp("startup") / "data"
    server = ServeProcess(data_dir)
    yield data_dir
    server.stop()


@pytest.mark.e2e
@pytest.mark.clickhouse
@pytest.mark.parametrize(
    "args",
    [
        ["query", "--json", "SELECT count() FROM holonograph.evaluation_events"],
        ["completeness", "--json"],
        ["quarantine", "--json"],
    ],
)
def test_light_commands_through_the_admin_endpoint_import_nothing_heavy(
    served: Path, args: list[str]
) -> None:
    """While `serve` holds the store, these talk HTTP to it: no driver, no server libs."""
    assert heavy(imported(*args, "--data-dir", str(served))) == set()


@pytest.fixture(scope="module")
def offline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated embedded store no process holds (made by another process: chDB opens
    one directory per process)."""
    data_dir = tmp_path_factory.mktemp("offline") / "data"
    made = subprocess.run(
        [sys.executable, "-c", "import sys; from holonograph.storeaccess import connect;"
         " connect(f'chdb://{sys.argv[1]}', write=True).close()", str(data_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr[-2000:]
    return data_dir


@pytest.mark.clickhouse
@pytest.mark.parametrize(
    "args",
    [
        ["quarantine", "--json"],
        ["completeness", "--json"],
        ["query", "--json", "SELECT count() FROM holonograph.evaluation_events"],
        # a surface the empty store never saw: exit 2, after the store was opened and read
        [
            "drift",
            "--surface",
            "s",
            "--since",
            "2026-01-01T00:00:00Z",
            "--until",
            "2026-01-02T00:00:00Z",
        ],
    ],
)
def test_offline_commands_reach_chdb_without_clickhouse_connect_or_pyarrow(
    offline: Path, args: list[str]
) -> None:
    """chDB opened in the command's own process, through chDB's own connection
    (`ingest.store.embedded`): neither clickhouse-connect (its import, HTTP stack and
    per-client handshake were a third of such a command, bench/RESULTS.md) nor chDB's
    Arrow support (pyarrow) nor its Python connection layer is loaded; nor its
    package's `__init__` (an in-memory engine started for a version string, its UDF
    layer): the extension is loaded alone (`ingest.store.embedded._engine_alone`)."""
    modules = imported(*args, "--data-dir", str(offline), codes=(0, 1, 2))
    assert "ingest.store.embedded" in modules
    assert "chdb" not in modules and "chdb.udf" not in modules  # the package never ran
    assert not {name for name in modules if name.split(".")[0] == "clickhouse_connect"}
    assert "chdb.state.sqlitelike" not in modules
    # (`-X importtime` lists the refused `import pyarrow` too: nothing of it loads)
    assert not {name for name in modules if name.startswith("pyarrow.")}


def test_drift_reads_change_records_without_the_contract_models() -> None:
    drift = imported("drift", "-h")
    assert "processors.drift.job" in drift
    assert not {"schemas.contracts", "schemas.conformance", "schemas.genai"} & drift


def test_pyarrow_still_imports_after_chdb_opened_without_it(tmp_path: Path) -> None:
    """chDB's connection module, loaded with pyarrow absent, leaves it importable: the
    store then loads it for its Arrow inserts (`ingest.store.arrow`), and any other user
    of pyarrow in the process gets the real module."""
    code = (
        "import sys; from ingest.store.clickhouse import open_store;"
        " s = open_store(f'chdb://{sys.argv[1]}'); assert s.query('SELECT 1').rows == [(1,)];"
        " assert sys.modules['chdb.state.sqlitelike'].pa is None;"
        " import pyarrow; assert pyarrow.array([1, 2]).to_pylist() == [1, 2];"
        " print(pyarrow.__name__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "store")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "pyarrow"


def test_serve_mounts_the_analyses_without_importing_scipy() -> None:
    """`serve` mounts drift and variance over HTTP and on schedules: scipy (seconds of
    start-up, half of serve's) is imported by the first reading, not at start."""
    check = (
        "import sys, holonograph.cli.serve, holonograph.api, holonograph.schedule.jobs;"
        " print(sorted({m.split('.')[0] for m in sys.modules} & {'scipy', 'numpy'}));"
        " print('processors.variance.decompose' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:2] == ["['numpy']", "True"]


def test_the_command_runs_numpy_on_one_blas_thread_unless_told_otherwise() -> None:
    """Small solves contend on BLAS threads: the command defaults them to one, and an
    operator's own setting is kept."""
    code = (
        "import os, sys; sys.argv = ['holonograph', '--help'];"
        " from holonograph.cli import main, BLAS_THREAD_VARIABLES\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(','.join(os.environ[v] for v in BLAS_THREAD_VARIABLES), file=sys.stderr)"
    )
    for given, expected in ((None, "1,1,1"), ("4", "4,1,1")):
        env = {k: v for k, v in os.environ.items() if k not in BLAS_THREAD_VARIABLES}
        if given is not None:
            env["OPENBLAS_NUM_THREADS"] = given
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stderr.strip().splitlines()[-1] == expected


def test_the_command_skips_pydantic_plugin_discovery_unless_told_otherwise() -> None:
    """pydantic scans every installed distribution's entry points for plugins at its
    first model: the command says there are none to look for, and an operator's own
    setting is kept (checked by whether that scan runs)."""
    code = (
        "import os, sys, importlib.metadata as md; sys.argv = ['holonograph', '--help']\n"
        "scans = []\n"
        "real = md.entry_points\n"
        "def counted(**kw):\n    scans.append(kw)\n    return real(**kw)\n"
        "md.entry_points = counted\n"
        "from holonograph.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "import pydantic.plugin._loader as loader\n"
        "loader.entry_points = counted\n"
        "list(loader.get_plugins())\n"
        "print(os.environ['PYDANTIC_DISABLE_PLUGINS'], len(scans), file=sys.stderr)"
    )
    for given, expected in ((None, "__all__ 0"), ("some_plugin", "some_plugin 1")):
        env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
        if given is not None:
            env["PYDANTIC_DISABLE_PLUGINS"] = given
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stderr.strip().splitlines()[-1] == expected
