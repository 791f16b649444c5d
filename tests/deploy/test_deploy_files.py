"""The deployment files parse, hold what a deployment needs, and agree with the code:
every HOLONOGRAPH_* variable is a real setting that validates, ports line up between
compose, the Dockerfile, the collector config and the code's defaults."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlparse
from xml.etree import ElementTree

import pytest
import yaml

from ingest.service.config import ServeConfig, SinkConfig
from ingest.store.url import normalize_store_url
from schemas.tables import DATABASE
from schemas.topics import DEAD_LETTER_TOPIC, RECORDS_TOPIC

ROOT = Path(__file__).resolve().parents[2]
_DEFAULT = re.compile(r"\$\{(?:env:)?([A-Z0-9_]+)(?::?-([^}]*))?\}")


def _load(path: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / path).read_text())
    return loaded


def _expand(value: str) -> str:
    """`${VAR:-default}` / `${env:VAR:-default}` -> default, as with VAR unset."""
    return _DEFAULT.sub(lambda m: m[2] or "", value)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return _load("docker-compose.yml")


def _env(compose: dict[str, Any], service: str) -> dict[str, str]:
    raw = compose["services"][service].get("environment", {})
    return {k: _expand(str(v)) for k, v in raw.items()}


def _settings(env: dict[str, str], model: type[ServeConfig] | type[SinkConfig]) -> Any:
    fields = {f"HOLONOGRAPH_{name.upper()}" for name in model.model_fields}
    ours = {k: v for k, v in env.items() if k.startswith("HOLONOGRAPH_")}
    assert set(ours) <= fields, f"not settings of {model.__name__}: {set(ours) - fields}"
    with pytest.MonkeyPatch.context() as patch:
        for key in fields:
            patch.delenv(key, raising=False)
        for key, value in ours.items():
            patch.setenv(key, value)
        return model()


def _published(service: dict[str, Any]) -> dict[int, int]:
    """container port -> host port."""
    out = {}
    for spec in service.get("ports", []):
        parts = str(spec).split(":")
        out[int(parts[-1])] = int(parts[-2])
    return out


def test_compose_has_the_services_of_the_scale_out_path(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert {"kafka", "clickhouse", "receiver", "sink", "grafana"} <= set(services)
    assert services["kafka"]["image"].startswith("apache/kafka:")
    assert services["clickhouse"]["image"].startswith("clickhouse/clickhouse-server:")
    assert services["grafana"]["image"].startswith("grafana/grafana:")
    for name in ("kafka", "clickhouse"):
        assert "healthcheck" in services[name]
    assert services["receiver"]["depends_on"]["kafka"]["condition"] == "service_healthy"
    assert services["sink"]["depends_on"]["clickhouse"]["condition"] == "service_healthy"


def test_kafka_is_kraft_without_auto_created_topics(compose: dict[str, Any]) -> None:
    env = _env(compose, "kafka")
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert "zookeeper" not in str(compose).lower()
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"  # the services create them
    assert "PLAINTEXT://kafka:9092" in env["KAFKA_ADVERTISED_LISTENERS"]


def test_receiver_settings_validate_and_match_ports(compose: dict[str, Any]) -> None:
    service = compose["services"]["receiver"]
    config = _settings(_env(compose, "receiver"), ServeConfig)
    assert service["command"] == ["serve"]
    assert config.kafka == "kafka:9092"  # the broker's advertised listener
    assert config.host == "0.0.0.0"
    published = _published(service)
    assert {config.grpc_port, config.http_port, config.metrics_port} <= set(published)
    assert (config.grpc_port, config.http_port) == (4317, 4318)  # the OTLP defaults
    assert config.kafka_records_topic == RECORDS_TOPIC
    assert config.kafka_dead_letter_topic == DEAD_LETTER_TOPIC
    kafka_limit = int(_env(compose, "kafka")["KAFKA_MESSAGE_MAX_BYTES"])
    assert config.kafka_max_message_bytes <= kafka_limit


def test_sink_settings_validate_and_reach_clickhouse(compose: dict[str, Any]) -> None:
    service = compose["services"]["sink"]
    config = _settings(_env(compose, "sink"), SinkConfig)
    assert service["command"] == ["sink"]
    assert config.kafka == "kafka:9092"
    store = urlparse(normalize_store_url(config.store_url()))
    clickhouse = _env(compose, "clickhouse")
    assert (store.hostname, store.port) == ("clickhouse", 8123)
    assert store.username == "holonograph_writer"  # not the administrator
    assert store.password == clickhouse["HOLONOGRAPH_WRITER_PASSWORD"]
    assert 8123 in _published(compose["services"]["clickhouse"])
    assert config.metrics_port in _published(service)
    receiver = _settings(_env(compose, "receiver"), ServeConfig)
    assert config.topics() == receiver.topics()  # both sides agree on topics


def test_dockerfile_builds_the_cli_and_exposes_the_ports(compose: dict[str, Any]) -> None:
    text = (ROOT / "deploy/Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11", text, re.M)
    exposed = {int(p) for line in re.findall(r"^EXPOSE (.+)$", text, re.M) for p in line.split()}
    assert {4317, 4318, int(re.search(r"HOLONOGRAPH_METRICS_PORT=(\d+)", text)[1])} <= exposed  # type: ignore[index]
    assert 'ENTRYPOINT ["holonograph"]' in text
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    for include in packages["packages"]["find"]["include"]:
        package = include.rstrip("*")
        assert f"COPY {package} ./{package}" in text, package
    assert compose["services"]["receiver"]["build"]["dockerfile"] == "deploy/Dockerfile"


def test_collector_routes_holonograph_spans_to_the_receiver(compose: dict[str, Any]) -> None:
    config = _load("deploy/otel-collector.yaml")
    pipeline = config["service"]["pipelines"]["traces/holonograph"]
    assert pipeline["exporters"] == ["otlp/holonograph"]
    assert not any(p.startswith("batch") for p in pipeline["processors"])
    exporter = config["exporters"]["otlp/holonograph"]
    host, port = _expand(exporter["endpoint"]).rsplit(":", 1)
    assert host in compose["services"] and int(port) == 4317
    assert exporter["retry_on_failure"]["max_elapsed_time"] == 0
    assert exporter["sending_queue"]["storage"] in config["service"]["extensions"]
    sidecar = compose["services"]["otel-collector"]
    assert sidecar["environment"]["HOLONOGRAPH_RECEIVER_ENDPOINT"] == _expand(exporter["endpoint"])

    drop = config["processors"]["filter/holonograph_only"]["traces"]["span"][0]
    pattern = re.search(r'IsMatch\(name, "(.+)"\)', drop)[1]  # type: ignore[index]
    regex = re.compile(pattern.replace("\\\\", "\\"))
    assert drop.startswith("not ")  # the filter drops what does not match
    for name in ("holonograph.evaluation", "holonograph.session.sentinel"):
        assert regex.search(name)
    for name in ("GET /orders", "holonographX", "llm.call"):
        assert not regex.search(name)
    for used in {p for pipe in config["service"]["pipelines"].values() for p in pipe["processors"]}:
        assert used in config["processors"]


def test_grafana_provisions_the_clickhouse_data_source(compose: dict[str, Any]) -> None:
    grafana = compose["services"]["grafana"]
    assert "grafana-clickhouse-datasource" in grafana["environment"]["GF_INSTALL_PLUGINS"]
    mount = next(v for v in grafana["volumes"] if v.endswith("/etc/grafana/provisioning:ro"))
    local = ROOT / mount.split(":")[0]
    source = yaml.safe_load((local / "datasources/clickhouse.yaml").read_text())
    (datasource,) = source["datasources"]
    assert datasource["type"] == "grafana-clickhouse-datasource"
    data = datasource["jsonData"]
    assert data["host"] == "clickhouse" and data["port"] == 9000 and data["protocol"] == "native"
    assert data["defaultDatabase"] == DATABASE
    assert data["username"] == "holonograph_reader"
    assert datasource["secureJsonData"]["password"] == "${HOLONOGRAPH_READER_PASSWORD}"
    assert "HOLONOGRAPH_READER_PASSWORD" in grafana["environment"]


def test_the_grafana_login_is_the_documented_one(compose: dict[str, Any]) -> None:
    env = _env(compose, "grafana")
    assert env["GF_SECURITY_ADMIN_USER"] == "admin"
    assert env["GF_SECURITY_ADMIN_PASSWORD"] == "holonograph-grafana"  # the default
    readme = (ROOT / "README.md").read_text()
    assert "log in as `admin` with the password in\n`GRAFANA_ADMIN_PASSWORD`, default" in readme
    assert "`holonograph-grafana`" in readme


def _mounted(compose: dict[str, Any], service: str, container_path: str) -> Path:
    volumes = compose["services"][service]["volumes"]
    spec = next(v for v in volumes if v.split(":")[1] == container_path)
    assert spec.endswith(":ro")
    return ROOT / spec.split(":")[0]


def test_clickhouse_has_a_writer_and_a_read_only_reader_on_the_holonograph_database(
    compose: dict[str, Any],
) -> None:
    users_file = _mounted(compose, "clickhouse", "/etc/clickhouse-server/users.d/holonograph.xml")
    config_file = _mounted(compose, "clickhouse", "/etc/clickhouse-server/config.d/holonograph.xml")
    users = ElementTree.parse(users_file).getroot()
    env = _env(compose, "clickhouse")
    grants = {}
    for name in ("holonograph_writer", "holonograph_reader"):
        user = users.find(f"users/{name}")
        assert user is not None, name
        password = user.find("password")
        assert password is not None and password.get("from_env") in env  # no secret in git
        assert user.findtext("profile") == name
        grants[name] = [q.text for q in user.findall("grants/query")]
    assert grants == {
        "holonograph_writer": [f"GRANT ALL ON {DATABASE}.*"],
        "holonograph_reader": [f"GRANT SELECT ON {DATABASE}.*"],
    }
    assert users.findtext("profiles/holonograph_writer/readonly") == "0"
    reader = users.find("profiles/holonograph_reader")
    assert reader is not None and reader.findtext("readonly") == "1"
    changeable = {
        c.tag
        for c in reader.findall("constraints/*")
        if c.find("changeable_in_readonly") is not None
    }
    assert changeable == {"additional_table_filters", "max_execution_time"}
    config = ElementTree.parse(config_file).getroot()
    replace = "access_control_improvements/settings_constraints_replace_previous"
    assert config.findtext(replace) == "true"


def test_no_process_output_is_committed() -> None:
    """`sink.err` / `sink.out` (a sink's redirected output) were once committed at the
    root (issue 27): they are ignored, and no such file is tracked anywhere."""
    ignored = (ROOT / ".gitignore").read_text().split()
    assert {"sink.err", "sink.out"} <= set(ignored)
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing is tracked")
    listed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert not [p for p in listed if re.search(r"(^|/)[^/]+\.(out|err)$", p)]
