"""bench.kafka_stages runs end to end on a tiny input (a smoke test, not a timing test):
every stage is timed and the sink builds rows for every span the receiver packed."""

from __future__ import annotations

from bench.kafka_stages import measure_kafka_stages


def test_kafka_stages_smoke() -> None:
    result = measure_kafka_stages(batch=16, requests=2, rounds=1, collector="default")
    assert result["spans"] == 32
    assert result["records"] >= 2  # one stream per request
    assert set(result["us_per_span"]) == {
        "decode",
        "screen",
        "pack",
        "sink_decode",
        "sink_take",
        "sink_rows",
    }
    assert result["receiver_us_per_span"] > 0 and result["sink_us_per_span"] > 0


def test_kafka_stages_store_smoke() -> None:
    """`--store`: the flush's stages on a chDB store, whose tables hold parts afterwards."""
    result = measure_kafka_stages(
        batch=16, requests=2, rounds=1, collector="default", store=True, per_flush=1
    )
    assert {"sink_own", "sink_insert", "sink_background"} <= set(result["us_per_span"])
    assert result["us_per_span"]["sink_own"] > 0 and result["us_per_span"]["sink_insert"] > 0
    assert result["records_per_flush"] == 1
    for table in ("evaluation_events", "evaluation_dimensions", "emission_receipts"):
        assert result["parts_after"].get(table, 0) >= 1, result["parts_after"]
    assert result["sink_with_store_us_per_span"] > result["sink_us_per_span"]


def test_kafka_stages_reference_path_smoke() -> None:
    result = measure_kafka_stages(
        batch=16, requests=2, rounds=1, collector="default", path="reference"
    )
    assert result["path"] == "reference" and result["spans"] == 32 and result["records"] >= 2


def test_stages_smoke_both_paths() -> None:
    """bench.stages on a tiny input: every stage timed, on the hot and reference paths."""
    from bench.stages import measure_stages

    for path in ("hot", "reference"):
        result = measure_stages(batch=16, requests=2, requests_per_insert=2, path=path)
        assert result["path"] == path and result["spans"] == 32
        stages = {"parse", "decode_validate", "own", "build_rows", "insert", "chdb_background"}
        assert set(result["stages"]) == stages
        timed = [result["stages"][name]["cpu_s"] for name in stages - {"chdb_background"}]
        assert all(cpu > 0 for cpu in timed), result["stages"]
