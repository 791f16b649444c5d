"""The backend choice of the test suites (`testkit/backends.py`, `tests/conftest.py`):
what each setting selects, and, in a pytest of its own on a tiny test file, that a
containers run without Docker skips with the documented reason instead of failing,
and that the one-backend markers skip on the other backend only."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from ingest.store.clickhouse import ClickHouseStore
from testkit.backends import (
    CLICKHOUSE_IMAGE,
    KAFKA_IMAGE,
    MARKER_DATABASE,
    BackendError,
    Backends,
    choose,
    compose_service,
    container_image,
    docker_unreachable,
    kafka_environment,
    refuse_foreign_database,
    reset_database,
)

ROOT = Path(__file__).resolve().parents[2]
NO_DOCKER = "unix:///nonexistent/holonograph-test/docker.sock"

TINY = textwrap.dedent(
    """
    import pytest

    def test_plain():
        assert 1 + 1 == 2

    def test_on_the_store(store):
        assert store.query("SELECT 1").scalar() == 1

    def test_on_the_broker(broker):
        assert broker.bootstrap

    @pytest.mark.chdb_only("needs a data directory")
    def test_embedded_only():
        pass

    @pytest.mark.tansu_only("pauses the broker")
    def test_tansu_only():
        pass
    """
)

# Two tests creating the same table: the second fails unless `holonograph` was
# dropped and migrated again between them.
FRESH = textwrap.dedent(
    """
    import pytest

    @pytest.mark.parametrize("n", [1, 2])
    def test_fresh(store, n):
        store.command("CREATE TABLE holonograph.probe (x UInt8) ENGINE = Memory")
        assert store.query("SELECT count() FROM holonograph.schema_migrations").scalar() > 0
    """
)


def test_default_is_tansu_and_chdb() -> None:
    backends = choose(None, {})
    assert backends == Backends("default", None, None)
    assert (backends.real_kafka, backends.server_store) == (False, False)


def test_the_option_wins_over_the_environment() -> None:
    environ = {"HOLONOGRAPH_TEST_BACKEND": "containers"}
    assert choose(None, environ).name == "containers"
    assert choose("default", environ).name == "default"
    assert choose("containers", {"HOLONOGRAPH_TEST_BACKEND": ""}).name == "containers"


def test_containers_means_real_kafka_and_a_server_store() -> None:
    backends = choose("containers", {})
    assert (backends.real_kafka, backends.server_store) == (True, True)
    assert backends.describe() == (
        "backend containers: Kafka an Apache Kafka container,"
        " ClickHouse a ClickHouse server container"
    )


def test_explicit_servers_replace_either_half_and_never_show_a_password() -> None:
    kafka = choose(None, {"HOLONOGRAPH_TEST_KAFKA": "kafka.lan:9092"})
    assert (kafka.kafka, kafka.real_kafka, kafka.server_store) == ("kafka.lan:9092", True, False)
    url = "http://tester:s3cret@ch.lan:8123"
    server = choose(None, {"HOLONOGRAPH_TEST_CLICKHOUSE": url})
    assert (server.clickhouse, server.real_kafka, server.server_store) == (url, False, True)
    assert "s3cret" not in server.describe()
    assert "http://tester:***@ch.lan:8123" in server.describe()


def test_an_unknown_backend_is_a_usage_error() -> None:
    with pytest.raises(BackendError, match=r"unknown test backend 'docker'.*default, containers"):
        choose(None, {"HOLONOGRAPH_TEST_BACKEND": "docker"})


def test_kafka_advertises_the_port_it_listens_on() -> None:
    env = kafka_environment("localhost", 41234)
    assert env["KAFKA_LISTENERS"].startswith("PLAINTEXT://:41234,")
    assert env["KAFKA_ADVERTISED_LISTENERS"] == "PLAINTEXT://localhost:41234"
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft, no ZooKeeper


def test_the_containers_are_the_images_docker_compose_deploys() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert compose["services"]["kafka"]["image"] == KAFKA_IMAGE
    assert compose["services"]["clickhouse"]["image"] == CLICKHOUSE_IMAGE


def test_a_compose_service_is_its_image_laptop_environment_and_checkout_mounts() -> None:
    grafana = compose_service("grafana")
    assert grafana.image.startswith("grafana/grafana:")
    assert grafana.environment["GF_INSTALL_PLUGINS"] == "grafana-clickhouse-datasource"
    assert grafana.environment["HOLONOGRAPH_READER_PASSWORD"] == "holonograph-reader"
    (provisioning,) = grafana.mounts  # the named volume grafana-data is left out
    assert provisioning.host == ROOT / "deploy" / "grafana" / "provisioning"
    assert (provisioning.container, provisioning.mode) == ("/etc/grafana/provisioning", "ro")
    clickhouse = compose_service("clickhouse")
    assert clickhouse.image == CLICKHOUSE_IMAGE
    assert clickhouse.environment["HOLONOGRAPH_READER_PASSWORD"] == "holonograph-reader"
    assert {m.container for m in clickhouse.mounts} == {
        "/etc/clickhouse-server/users.d/holonograph.xml",
        "/etc/clickhouse-server/config.d/holonograph.xml",
    }
    assert all(m.host.is_file() and m.mode == "ro" for m in clickhouse.mounts)


def test_another_image_is_named_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOLONOGRAPH_TEST_CLICKHOUSE_IMAGE", "clickhouse/clickhouse-server:25.8")
    assert container_image("clickhouse") == "clickhouse/clickhouse-server:25.8"
    assert container_image("kafka") == KAFKA_IMAGE


def test_the_workflow_runs_the_readme_command_and_fails_on_docker_skips() -> None:
    readme = (ROOT / "README.md").read_text()
    match = re.search(r"<!-- test-command: containers -->\n```sh\n(.*?)\n```", readme, re.DOTALL)
    assert match, "README.md has no containers test command"
    command = match[1]
    assert (
        command == 'HOLONOGRAPH_TEST_BACKEND=containers python -m pytest -m "kafka or clickhouse"'
    )
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "containers.yml").read_text())
    (job,) = workflow["jobs"].values()
    assert job["runs-on"] == "ubuntu-latest"
    (step,) = [step for step in job["steps"] if command in step.get("run", "")]
    assert step["shell"] == "bash"  # pipefail: pytest's exit status survives the tee
    assert '! grep -q "Docker engine not reachable"' in step["run"]


def test_docker_unreachable_names_the_engine_it_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", NO_DOCKER)
    reason = docker_unreachable()
    assert reason is not None
    assert reason.startswith(f"Docker engine not reachable at {NO_DOCKER} (")
    assert reason.endswith(
        "the containers backend needs Docker; without HOLONOGRAPH_TEST_BACKEND=containers"
        " the tests run on Tansu + chDB"
    )


@pytest.mark.chdb_only("needs a store the suite never marked as its own")
def test_a_server_is_refused_until_the_suite_made_its_database(store: ClickHouseStore) -> None:
    """The migrated store holds a `holonograph` the suite did not mark as its own."""
    url = "http://tester:s3cret@ch.lan:8123"
    reason = refuse_foreign_database(store, url)
    assert reason is not None
    assert reason.startswith(
        "http://tester:***@ch.lan:8123 holds a database holonograph the test suite did not"
        f" create (no database {MARKER_DATABASE} there)"
    )
    reset_database(store)
    databases = {row[0] for row in store.query("SELECT name FROM system.databases").rows}
    assert MARKER_DATABASE in databases
    assert "holonograph" not in databases
    assert refuse_foreign_database(store, url) is None


def _pytest(
    tmp_path: Path, *args: str, tiny_text: str = TINY, workers: str = "0", **environ: str
) -> subprocess.CompletedProcess[str]:
    """A pytest of its own on the tiny file, with the suite's fixtures as plugins;
    serial unless `workers` says otherwise (pyproject's default is `-n auto`)."""
    tiny = tmp_path / "test_tiny.py"
    tiny.write_text(tiny_text)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("HOLONOGRAPH_TEST_", "PYTEST_"))
    }
    env.update(PYTHONPATH=str(ROOT), **environ)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest",
         "-p", "tests.e2e.kafka.conftest", "-p", "no:cacheprovider",
         "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT),
         "-rs", "-n", workers, *args, str(tiny)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_containers_without_docker_skip_with_the_reason(tmp_path: Path) -> None:
    done = _pytest(tmp_path, HOLONOGRAPH_TEST_BACKEND="containers", DOCKER_HOST=NO_DOCKER)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "backend containers: Kafka an Apache Kafka container" in out  # the header
    assert "1 passed, 4 skipped" in out
    skips = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    docker = [line for line in skips if f"Docker engine not reachable at {NO_DOCKER} (" in line]
    assert len(docker) == 2, out  # the store test and the broker test, with one reason
    assert all(line.endswith("the tests run on Tansu + chDB") for line in docker), out
    assert "chDB only: needs a data directory; this run's store is a ClickHouse server" in out
    assert "Tansu only: pauses the broker; this run's broker is Apache Kafka" in out
    assert not [line for line in out.splitlines() if line.startswith("ERROR")], out


def test_the_option_selects_containers_too(tmp_path: Path) -> None:
    done = _pytest(tmp_path, "--backend", "containers", DOCKER_HOST=NO_DOCKER)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 4 skipped" in done.stdout
    assert f"Docker engine not reachable at {NO_DOCKER}" in done.stdout


def test_default_backend_runs_the_one_backend_tests(tmp_path: Path) -> None:
    """(The store and broker fixtures' default path is the rest of the suite.)"""
    done = _pytest(tmp_path, "-k", "not store and not broker", DOCKER_HOST=NO_DOCKER)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "backend default: Kafka Tansu, ClickHouse chDB" in done.stdout
    assert "3 passed, 2 deselected" in done.stdout
    assert "skipped" not in done.stdout


def test_a_named_server_gets_holonograph_migrated_afresh_for_every_test(tmp_path: Path) -> None:
    """`HOLONOGRAPH_TEST_CLICKHOUSE` takes any store URL; a chDB one stands in for a
    server here (no server on this machine): the fixture path is the same."""
    server = f"chdb://{tmp_path / 'server'}"
    done = _pytest(tmp_path, tiny_text=FRESH, HOLONOGRAPH_TEST_CLICKHOUSE=server)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"backend default: Kafka Tansu, ClickHouse {server}" in done.stdout
    assert "2 passed" in done.stdout


def test_an_unknown_backend_stops_the_run_before_any_test(tmp_path: Path) -> None:
    from_env = _pytest(tmp_path, HOLONOGRAPH_TEST_BACKEND="docker")
    assert from_env.returncode == pytest.ExitCode.USAGE_ERROR, from_env.stdout
    assert "unknown test backend 'docker'" in from_env.stderr
    from_option = _pytest(tmp_path, "--backend", "docker")
    assert from_option.returncode == pytest.ExitCode.USAGE_ERROR, from_option.stdout
    assert "invalid choice: 'docker'" in from_option.stderr


def test_auto_runs_workers_but_serially_on_a_clickhouse_server_of_ones_own(
    tmp_path: Path,
) -> None:
    """`-n auto` starts workers (one per CPU, at most 4), except on a named ClickHouse
    server: every test there re-creates the one `holonograph` database."""
    expected = min(4, len(os.sched_getaffinity(0)))
    parallel = _pytest(tmp_path, "-k", "plain", workers="auto")
    assert parallel.returncode == 0, parallel.stdout + parallel.stderr
    assert f"created: {expected}/{expected} workers" in parallel.stdout, parallel.stdout
    serial = _pytest(
        tmp_path, "-k", "plain", workers="auto", HOLONOGRAPH_TEST_CLICKHOUSE="http://127.0.0.1:9"
    )
    assert serial.returncode == 0, serial.stdout + serial.stderr
    assert "workers" not in serial.stdout and "1 passed" in serial.stdout, serial.stdout
