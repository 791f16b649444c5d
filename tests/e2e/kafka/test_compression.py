"""The producer's compression is a setting: zstd by default when its codec is
installed (an eighth of gzip's CPU at nearly its ratio), gzip otherwise; 'none'
turns it off; anything else is refused before connecting."""

from __future__ import annotations

import pytest
from aiokafka.codec import has_zstd

from ingest.handoff.kafka import KafkaHandoff, default_compression
from schemas.topics import Topics


def _handoff(compression: str | None) -> KafkaHandoff:
    topics = Topics(records="r", dead_letter="d", partitions=1, replication_factor=1)
    return KafkaHandoff(
        "127.0.0.1:9",
        topics,
        max_inflight_bytes=1 << 20,
        max_message_bytes=1 << 20,
        compression_type=compression,
    )


def test_default_is_zstd_when_its_codec_is_there() -> None:
    assert default_compression() == ("zstd" if has_zstd() else "gzip")
    assert _handoff(None).compression == default_compression()


@pytest.mark.parametrize("name", ["gzip", "none", "zstd", "lz4", "snappy"])
def test_each_codec_can_be_chosen(name: str) -> None:
    assert _handoff(name).compression == name


def test_an_unknown_codec_is_refused() -> None:
    with pytest.raises(ValueError, match="compression 'brotli'"):
        _handoff("brotli")
