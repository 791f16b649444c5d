"""The schedule file is checked whole at start: each mistake names its line (serve exits
2 before listening), and the examples in docs/schedules.md load."""

from __future__ import annotations

import importlib
import json
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from holonograph.schedule.config import ScheduleFileError, parse_schedule
from holonograph.schedule.webhooks import sign
from tests.holonograph.schedule.helpers import SECRET, schedule_text, secret_file

ROOT = Path(__file__).resolve().parents[3]
GOOD = schedule_text("https://hooks.example.com/holonograph")


def problem(text: str, tmp_path: Path) -> str:
    secret_file(tmp_path)
    with pytest.raises(ScheduleFileError) as caught:
        parse_schedule(text, "test.yaml", base=tmp_path)
    return str(caught.value)


def test_a_good_file_loads_with_its_parts(tmp_path: Path) -> None:
    secret_file(tmp_path)
    loaded = parse_schedule(GOOD, "test.yaml", base=tmp_path)
    [schedule] = loaded.schedules
    assert (schedule.name, schedule.cron, schedule.job.name) == (
        "loss-check", "*/5 * * * *", "completeness",
    )  # fmt: skip
    assert schedule.request.bucket == "hour"  # type: ignore[attr-defined]
    assert [w.name for w in schedule.webhooks] == ["ops"]
    assert "s3cret" not in repr(loaded)  # the secret is never printed
    assert loaded.label_names() == ("severity", "team")


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("    cron:", "    crn:", "test.yaml:8: unknown field 'crn'"),
        (
            "job: completeness",
            "job: completness",
            "test.yaml:9: unknown job 'completness'; schedulable jobs: completeness,"
            " conformance.check, conformance.derive",
        ),
        (
            "      bucket: hour",
            "      bucket: hour\n      sinse: 2026-07-01",
            "test.yaml:12: unknown field 'sinse' in a completeness request (known: asOf,",
        ),
        ("bucket: hour", "bucket: fortnight", "test.yaml:11: completeness request bucket:"),
        ('"*/5 * * * *"', '"61 * * * *"', "test.yaml:8: cron '61 * * * *' is not a 5-field"),
        ("webhooks: [ops]", "webhooks: [pager]", "test.yaml:15: unknown webhook 'pager'"),
        ("      team: data", "      job: data", "test.yaml:13: label 'job' is not"),
        (
            "      bucket: hour",
            "      tenant: acme",
            "test.yaml:11: a request names no tenant: set the schedule's `tenant:`",
        ),
        ("    maxAttempts: 5", "    maxAttempts: 0", "test.yaml:5: webhooks.0.maxAttempts:"),
        (
            "https://hooks.example.com",
            "http://hooks.example.com",
            "test.yaml:3: webhooks.0.url: use https:// (plain http:// only to a loopback",
        ),
        ("webhooks: [ops]", "webhooks: [ops", "test.yaml:16: not valid YAML"),
        ("  - name: loss-check", "  - name: Loss Check", "test.yaml:7: schedules.0.name:"),
    ],
)
def test_a_mistake_names_its_line(old: str, new: str, expected: str, tmp_path: Path) -> None:
    assert old in GOOD
    assert problem(GOOD.replace(old, new), tmp_path).startswith(expected)


def test_a_schedule_defined_twice_is_refused(tmp_path: Path) -> None:
    entry = GOOD[GOOD.index("  - name: loss-check") :]
    assert "test.yaml:16: schedule 'loss-check' is defined twice" in problem(GOOD + entry, tmp_path)


def test_a_secret_others_can_read_is_refused(tmp_path: Path) -> None:
    secret_file(tmp_path, mode=0o644)
    with pytest.raises(ScheduleFileError) as caught:
        parse_schedule(GOOD, "test.yaml", base=tmp_path)
    assert "test.yaml:4:" in str(caught.value)
    assert "readable by group or others" in str(caught.value)
    (tmp_path / "webhook.secret").unlink()
    with pytest.raises(ScheduleFileError, match=r"test\.yaml:4: cannot read"):
        parse_schedule(GOOD, "test.yaml", base=tmp_path)


def test_the_documented_examples_load(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "schedules.md").read_text()
    examples = re.findall(r"```yaml\n(.*?)```", text, re.S)
    assert examples
    secret_file(tmp_path)
    for example in examples:
        example = example.replace("/etc/holonograph/webhook.secret", "webhook.secret")
        assert parse_schedule(example, "docs/schedules.md", base=tmp_path).schedules
    # The documented verification accepts what the scheduler signs, and nothing else.
    [snippet] = re.findall(r"```python\n(.*?)```", text, re.S)
    scope: dict[str, Any] = {}
    exec(snippet, scope)
    now, body = int(time.time()), b'{"schedule":"hourly-loss"}'
    signature = sign(SECRET, now, body)
    assert scope["verify"](SECRET, body, str(now), signature)
    assert not scope["verify"](SECRET, body + b" ", str(now), signature)
    assert not scope["verify"](SECRET, body, str(now - 3600), sign(SECRET, now - 3600, body))


def serve(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "holonograph", "serve", "--grpc-port", "0", "--http-port", "0",
         *args],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.mark.e2e
def test_serve_with_a_bad_schedule_exits_2_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "schedule.yaml"
    path.write_text(GOOD.replace("job: completeness", "job: drfit"))
    secret_file(tmp_path)
    process = serve("--data-dir", str(tmp_path / "data"), "--schedule", str(path))
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 2
    assert f"error: schedule file {path}:9: unknown job 'drfit'" in stderr
    assert "Traceback" not in stderr
    assert not (tmp_path / "data").exists()  # refused before the store was opened


@pytest.mark.e2e
@pytest.mark.clickhouse
def test_serve_shows_its_schedules_on_readyz_and_metrics(tmp_path: Path) -> None:
    path = tmp_path / "schedule.yaml"
    path.write_text(GOOD.replace('"*/5 * * * *"', '"0 3 1 1 *"'))
    secret_file(tmp_path)
    process = serve(
        "--data-dir", str(tmp_path / "data"), "--schedule", str(path), "--json",
        "--metrics-port", "0",
    )  # fmt: skip
    try:
        assert process.stdout is not None
        announced = json.loads(process.stdout.readline())
        with urllib.request.urlopen(announced["admin"] + "/readyz", timeout=30) as answer:
            ready = json.loads(answer.read())
        with urllib.request.urlopen(announced["metrics"], timeout=30) as answer:
            metrics = answer.read().decode()
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
    assert ready["status"] == "ready"
    schedule = ready["schedules"]["loss-check"]
    assert schedule["job"] == "completeness" and schedule["cron"] == "0 3 1 1 *"
    assert schedule["nextFire"].endswith("-01-01T03:00:00Z")
    assert schedule["lastRun"] is None and schedule["lastSuccess"] is None
    assert (
        'holonograph_schedule_finding{job="completeness",schedule="loss-check",'
        'severity="page",team="data"} 0.0'
    ) in metrics
    assert process.returncode == 0


def test_a_request_its_job_refuses_as_a_whole_names_the_request(tmp_path: Path) -> None:
    text = GOOD.replace("job: completeness", "job: conformance.check").replace(
        "bucket: hour", "persist: true"
    )
    assert problem(text, tmp_path) == (
        "test.yaml:10: conformance.check request: give fixtureId (a live fixture),"
        " fixture (inline) or surfaceId"
    )


def test_the_job_vocabulary_is_keyed_by_job_module() -> None:
    from holonograph.schedule.jobs import SCHEDULABLE

    for key, job in SCHEDULABLE.items():
        try:
            module = importlib.import_module(f"processors.{key}.job")
        except ModuleNotFoundError:
            module = importlib.import_module(f"processors.{key}")
        assert module.JOB is job, key


@pytest.mark.e2e
def test_serve_refuses_a_schedule_with_kafka(tmp_path: Path) -> None:
    path = tmp_path / "schedule.yaml"
    path.write_text(GOOD)
    secret_file(tmp_path)
    process = serve("--kafka", "127.0.0.1:1", "--schedule", str(path))
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 2
    assert "--schedule runs jobs on the store, and with --kafka" in stderr
