"""Poison records: dead-lettered with their reason, under a brake.

Dead-lettering everything is how a pipeline silently loses a day of data after a
bad deploy. The brake stops the sink loudly instead once invalid records exceed a
run (`max_run` in a row) or a ratio (`max_ratio` of all records seen, checked once
`ratio_min_records` were seen). The record that trips it is neither dead-lettered
nor committed, so a fixed sink restarts from it. Records the store refused for good
count as invalid like undecodable ones: a store whose schema does not match stops
the sink rather than dead-letter everything.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol

from aiokafka import AIOKafkaProducer

from schemas.records import PoisonLetter, encode, headers


class SinkHalted(RuntimeError):
    """The brake tripped: too many invalid records. The sink stops; nothing past the
    last good batch is committed."""


@dataclass
class PoisonBrake:
    max_ratio: float = 0.1
    ratio_min_records: int = 100
    max_run: int = 100
    seen: int = 0
    invalid: int = 0
    run: int = 0

    def passed(self) -> None:
        self.seen += 1
        self.run = 0

    def failed(self, reason: str) -> None:
        """Count an invalid record; raises `SinkHalted` when a limit is crossed."""
        self.seen += 1
        self._invalid(reason)

    def rejected(self, reason: str) -> None:
        """A record that decoded (and was counted as passed) but that the store refused
        for good; raises `SinkHalted` when a limit is crossed."""
        self._invalid(reason)

    def _invalid(self, reason: str) -> None:
        self.invalid += 1
        self.run += 1
        if self.run > self.max_run:
            raise SinkHalted(
                f"{self.run} invalid records in a row (limit {self.max_run}); last: {reason}"
            )
        ratio = self.invalid / max(self.seen, 1)
        if self.seen >= self.ratio_min_records and ratio > self.max_ratio:
            raise SinkHalted(
                f"{self.invalid} of {self.seen} records invalid ({ratio:.0%}, limit"
                f" {self.max_ratio:.0%}); last: {reason}"
            )


class DeadLetterSink(Protocol):
    async def send(self, letters: list[PoisonLetter]) -> None: ...


class KafkaDeadLetters:
    """Dead letters to a topic, keyed like their source, acknowledged before commit."""

    def __init__(self, producer: AIOKafkaProducer, topic: str) -> None:
        self._producer = producer
        self._topic = topic

    async def send(self, letters: list[PoisonLetter]) -> None:
        acks = [
            await self._producer.send(
                self._topic, encode(letter), key=letter.key, headers=headers(letter)
            )
            for letter in letters
        ]
        await asyncio.gather(*acks)
