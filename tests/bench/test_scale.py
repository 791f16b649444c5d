"""The scale benchmark's harness (no timing): sizes parse as written, the timed commands
cover one surface over the last 7 days and the whole range, and the tables render
every measurement with its baseline beside it."""

from __future__ import annotations

import datetime as dt

import pytest

from bench.scale import commands, parse_size, render


@pytest.mark.parametrize(
    ("text", "rows"), [("1M", 1_000_000), ("10m", 10_000_000), ("500k", 500_000),
                       ("2,000", 2_000), ("1.5M", 1_500_000)]
)  # fmt: skip
def test_sizes_parse_as_written(text: str, rows: int) -> None:
    assert parse_size(text) == rows


def test_each_command_runs_over_the_last_week_and_the_whole_range() -> None:
    end = dt.datetime(2026, 12, 2, 14, tzinfo=dt.UTC)
    runs = commands(end, 90)
    assert list(runs) == [f"{c} {w}" for c in ("drift", "compare", "completeness")
                          for w in ("7d", "all")]  # fmt: skip
    assert runs["drift 7d"][-4:] == ["--since", "2026-11-25T14:00:00Z", "--until",
                                     "2026-12-02T14:00:00Z"]  # fmt: skip
    assert runs["compare all"][runs["compare all"].index("--since") + 1] == "2026-09-03T14:00:00Z"
    assert all(argv[1:3] == ["--surface", "surface-00"] for argv in runs.values())


def test_the_tables_show_every_measurement_beside_its_baseline() -> None:
    names = list(commands(dt.datetime(2026, 12, 2, tzinfo=dt.UTC), 90))
    run = {"baseline": {"wall_s": 2.0, "cpu_s": 1.5}, "store": {"wall_s": 7.25, "cpu_s": 3.0}}
    result = {
        "machine": {"cpu": "cpu", "cores": 2, "memory_gib": 23.5, "packages": {"chdb": "4.4.0"},
                    "commit": "abc", "date_utc": "2026-12-02T00:00:00Z",
                    "load_average_at_start": [1.0, 1.0, 1.0]},
        "days": 90, "surfaces": 20, "repeats": 1, "baseline_rows": 12_000,
        "command_names": names,
        "measurements": [{
            "rows": 1_000_000, "ids": "random",
            "load": {"rows_per_second": 41_620, "load_seconds": 24.03},
            "disk": {"merge_s": 9.0, "bytes_per_event": 349.6, "mib_per_million_events": 333.4},
            "refresh": {"wall_s": 94.3},
            "commands": {name: [run] for name in names},
        }],
    }  # fmt: skip
    text = render(result)
    assert "| 1,000,000 | random | 41,620 | 24.03 | 9.0 | 349.6 | 333.4 | 94.3 |" in text
    assert text.count("7.2 (2.0) / 3.0 (1.5)") == len(names)
