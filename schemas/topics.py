"""Kafka topic names and partition defaults of the scale-out path.

`holonograph.records` carries validated batches keyed by emission stream; the
dead-letter topic carries quarantined spans (from receivers) and poison records
(from sinks). Both are configuration; these are the defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

RECORDS_TOPIC = "holonograph.records"
DEAD_LETTER_TOPIC = "holonograph.dead-letter"
# Contract registrations (compacted, one partition: `docs/contracts.md`).
CONTRACTS_TOPIC = "holonograph.contracts"
DEFAULT_PARTITIONS = 6
DEFAULT_REPLICATION_FACTOR = 1
# Kafka's default `message.max.bytes` (1 MiB + 12 bytes of overhead), rounded down.
DEFAULT_MAX_MESSAGE_BYTES = 1_000_000
SINK_GROUP = "holonograph-sink"
# The producer batch compressions a deployment may choose (`--kafka-compression`).
Compression = Literal["zstd", "lz4", "snappy", "gzip", "none"]


@dataclass(frozen=True)
class Topics:
    """The topics one deployment uses and how to create them when absent."""

    records: str = RECORDS_TOPIC
    dead_letter: str = DEAD_LETTER_TOPIC
    partitions: int = DEFAULT_PARTITIONS
    replication_factor: int = DEFAULT_REPLICATION_FACTOR

    def all(self) -> tuple[str, str]:
        return (self.records, self.dead_letter)
