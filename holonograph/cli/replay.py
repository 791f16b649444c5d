"""`holonograph replay`: quarantined spans (table) or dead letters (topic) through
validation again, after a fix. Idempotent: replaying twice changes nothing."""

from __future__ import annotations

import asyncio
import datetime as dt
import sys
from typing import Any

import click
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from pydantic import ValidationError

from holonograph.cli.options import (
    EXIT_FINDING,
    EXIT_UNAVAILABLE,
    RFC3339,
    emit_json,
    invalid_configuration,
    open_store_or_exit,
    store_options,
)
from ingest.errors import RetryableError
from ingest.export.contracts import ContractBook
from ingest.handoff.embedded import EmbeddedHandoff
from ingest.handoff.kafka import KafkaHandoff
from ingest.handoff.kafka_producer import start_producer
from ingest.handoff.protocol import Handoff
from ingest.replay import ReplayReport, replay_dead_letters, replay_quarantine
from ingest.service.config import MIB, KafkaSettings
from schemas.contracts import ContractRecord
from schemas.registry import active_versions
from schemas.store import Store


def _kafka_handoff(settings: KafkaSettings) -> KafkaHandoff:
    assert settings.kafka
    return KafkaHandoff(
        settings.kafka,
        settings.topics(),
        max_inflight_bytes=256 * MIB,
        max_message_bytes=settings.kafka_max_message_bytes,
        timeout_seconds=settings.kafka_timeout_ms / 1000,
        idempotence=settings.kafka_idempotence,
        client_id=f"{settings.kafka_client_id}-replay",
        record_version=settings.kafka_record_version,
    )


async def _contracts(settings: KafkaSettings, store: Store | None) -> ContractBook:
    """The contracts in force: the store's registry, else the contracts topic's."""
    from ingest.service.contracts import ContractFeed, ensure_contracts_topic

    book = ContractBook()
    if store is not None:
        book.replace(await asyncio.to_thread(active_versions, store))
        return book
    assert settings.kafka

    async def take(record: ContractRecord) -> None:
        book.put(record.version)

    await ensure_contracts_topic(
        settings.kafka, settings.kafka_contracts_topic, settings.kafka_timeout_ms,
        settings.kafka_client_id,
    )  # fmt: skip
    feed = ContractFeed(
        settings.kafka, settings.kafka_contracts_topic, take, settings.kafka_timeout_ms,
        f"{settings.kafka_client_id}-replay",
    )  # fmt: skip
    await feed.start()
    await feed.stop()
    return book


async def _run(
    source: str, settings: KafkaSettings, store: Store | None, filters: dict[str, Any]
) -> ReplayReport:
    contracts = await _contracts(settings, store)
    handoff: Handoff[Any]
    if settings.kafka:
        handoff = _kafka_handoff(settings)
    else:
        assert store is not None
        handoff = EmbeddedHandoff(store, max_inflight_bytes=256 * MIB)
    try:
        if source == "quarantine":
            assert store is not None
            return await replay_quarantine(store, handoff, contracts=contracts, **filters)
        assert settings.kafka
        producer = AIOKafkaProducer(
            bootstrap_servers=settings.kafka,
            acks="all",
            enable_idempotence=settings.kafka_idempotence,
            compression_type="gzip",
            max_request_size=settings.kafka_max_message_bytes,
        )
        await start_producer(producer, settings.kafka, settings.kafka_idempotence)
        try:
            return await replay_dead_letters(
                settings.kafka, settings.kafka_dead_letter_topic, handoff, producer, contracts
            )
        finally:
            await producer.stop()
    finally:
        await handoff.close()


@click.command("replay")
@click.option(
    "--from",
    "source",
    type=click.Choice(["quarantine", "dead-letter"]),
    required=True,
    help="The quarantine table or the dead-letter topic.",
)
@click.option("--kafka", metavar="BOOTSTRAP", help="Hand replayed spans to Kafka (and read DLQ).")
@click.option("--kafka-records-topic", help="Records topic [holonograph.records].")
@click.option("--kafka-dead-letter-topic", help="Dead-letter topic [holonograph.dead-letter].")
@click.option("--kafka-contracts-topic", help="Contract registrations [holonograph.contracts].")
@click.option(
    "--kafka-idempotence/--no-kafka-idempotence", default=None, help="Idempotent producer [on]."
)
@click.option("--reason", help="Only quarantined spans whose reason contains TEXT.")
@click.option("--since", type=RFC3339(), help="Only spans quarantined at or after this time.")
@click.option("--limit", type=int, help="At most N quarantined spans.")
@store_options
def replay_command(
    source: str,
    reason: str | None,
    since: dt.datetime | None,
    limit: int | None,
    store_url: str | None,
    data_dir: str | None,
    as_json: bool,
    **kafka_flags: Any,
) -> None:
    """Re-validate quarantined spans or dead-lettered records and hand off what passes."""
    try:
        settings = KafkaSettings(**{k: v for k, v in kafka_flags.items() if v is not None})
    except ValidationError as err:
        raise invalid_configuration(err) from None
    if source == "dead-letter" and not settings.kafka:
        raise click.UsageError("--from dead-letter reads the topic: give --kafka BOOTSTRAP")
    store = None
    if source == "quarantine" or not settings.kafka:
        store = open_store_or_exit(store_url, data_dir, write=True)
    filters = {"reason": reason, "since": since, "limit": limit}
    try:
        report = asyncio.run(_run(source, settings, store, filters))
    except (KafkaError, OSError, RetryableError) as err:
        click.echo(f"error: unavailable: {err}", err=True)
        sys.exit(EXIT_UNAVAILABLE)
    finally:
        if store is not None:
            store.close()
    if as_json:
        emit_json({"source": source, **report.as_json()})
    else:
        click.echo(
            f"{source}: {report.seen} seen, {report.replayed} replayed,"
            f" {report.still_rejected} still rejected, {report.skipped} skipped"
        )
        for text, n in report.reasons.most_common():
            click.echo(f"  {n:6d}  {text}")
    if report.still_rejected:
        sys.exit(EXIT_FINDING)


def register(group: click.Group) -> None:
    group.add_command(replay_command)
