"""Relative times on every time flag (`--since 24h`, `--since 7d`, `--until now`): one
parser (`schemas.times.parse_moment`), read against one clock per command, giving the
same window as the absolute spellings of the same moments."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from holonograph.cli import cli
from ingest.store.clickhouse import open_store
from schemas.migrations import apply_migrations
from schemas.times import parse_moment
from testkit import multiplex
from testkit.multiplex import MultiplexSpec

NOW = dt.datetime(2026, 6, 2, 0, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("now", NOW),
        ("NOW", NOW),
        ("24h", NOW - dt.timedelta(hours=24)),
        ("7d", NOW - dt.timedelta(days=7)),
        ("90m", NOW - dt.timedelta(minutes=90)),
        ("30s", NOW - dt.timedelta(seconds=30)),
        ("2w", NOW - dt.timedelta(weeks=2)),
        ("1.5h", NOW - dt.timedelta(minutes=90)),
        ("now-24h", NOW - dt.timedelta(hours=24)),
        ("2026-06-01T00:00:00Z", dt.datetime(2026, 6, 1, tzinfo=dt.UTC)),
        ("2026-06-01", dt.datetime(2026, 6, 1, tzinfo=dt.UTC)),
    ],
)
def test_relative_and_absolute_spellings_parse(text: str, expected: dt.datetime) -> None:
    assert parse_moment(text, NOW) == expected


@pytest.mark.parametrize("text", ["24", "24y", "yesterday", "-24h", "2026-06-01T00:00:00"])
def test_other_text_is_refused_with_what_is_accepted(text: str) -> None:
    with pytest.raises(ValueError, match=repr(text).replace("(", r"\(")):
        parse_moment(text, NOW)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("relative-times") / "store"
    store = open_store(f"chdb://{path}")
    try:
        apply_migrations(store)
        multiplex.seed(store, MultiplexSpec(calls=120, fallbacks=0), 7)
    finally:
        store.close()
    yield path


def _json(data_dir: Path, *args: str) -> Any:
    done = CliRunner().invoke(
        cli, [*args, "--data-dir", str(data_dir), "--json"], obj={"clock": lambda: NOW}
    )
    assert done.exit_code in (0, 1), done.output
    return json.loads(done.stdout)


PER_RUN = ("runId", "createdAt", "eventId", "asOf")


def _same(document: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in document.items() if k not in PER_RUN}


@pytest.mark.clickhouse
def test_relative_flags_give_the_same_windows_as_absolute_ones(data_dir: Path) -> None:
    absolute = ["--since", "2026-06-01T00:00:00Z", "--until", "2026-06-02T00:00:00Z"]
    relative = ["--since", "24h", "--until", "now"]
    days = ["--since", "1d", "--until", "now"]
    drift = [_json(data_dir, "drift", "--surface", "classify-intent", "--no-save", *window)
             for window in (absolute, relative, days)]  # fmt: skip
    assert drift[0]["since"] == "2026-06-01T00:00:00Z" and drift[0]["eventCount"] > 0
    assert _same(drift[1]) == _same(drift[0]) == _same(drift[2])
    compare = [_json(data_dir, "compare", "--surface", "classify-intent", *window)
               for window in (absolute, relative)]  # fmt: skip
    assert compare[1] == compare[0]
    completeness = [_json(data_dir, "completeness", *window) for window in (absolute, relative)]
    assert completeness[0]["since"] == "2026-06-01T00:00:00Z"
    assert completeness[1] == completeness[0]


@pytest.mark.clickhouse
def test_a_bad_relative_time_is_a_usage_error_naming_the_flag(data_dir: Path) -> None:
    done = CliRunner().invoke(cli, ["completeness", "--since", "24y", "--data-dir", str(data_dir)])
    assert done.exit_code == 2
    assert "--since" in done.output and "24h, 7d" in done.output
