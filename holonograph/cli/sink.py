"""`holonograph sink`: consume the receivers' Kafka records into the store."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import click
from pydantic import ValidationError

from holonograph.cli.options import (
    EXIT_FINDING,
    configure_logging,
    invalid_configuration,
    read_options,
    refuse_if_held,
    store_unavailable,
)
from holonograph.cli.stopping import Stopping
from holonograph.jobs import periodic_jobs
from ingest.service.config import SinkConfig
from ingest.service.gctune import tune_for_throughput
from ingest.service.memory import tune_allocator
from ingest.service.sink import SinkService
from ingest.sink.dlq import SinkHalted
from ingest.store.clickhouse import open_store
from ingest.store.url import StoreURLError, is_embedded


def build_config(overrides: dict[str, Any]) -> SinkConfig:
    """Environment (HOLONOGRAPH_*) first, then the flags that were given."""
    return SinkConfig(**{key: value for key, value in overrides.items() if value is not None})


async def run_sink(service: SinkService) -> None:
    config = service.config
    stopping = Stopping(
        config.stop_timeout_seconds, "records not yet committed stay in Kafka for the next sink"
    )
    stopping.install()
    port = await service.start()
    kind = "embedded chDB" if is_embedded(service.store.url) else "ClickHouse server"
    member = f" as {config.sink_group_instance_id}" if config.sink_group_instance_id else ""
    click.echo(f"kafka      {config.kafka} group {config.sink_group}{member}")
    click.echo(f"topics     {config.kafka_records_topic}, {config.kafka_dead_letter_topic}")
    click.echo(f"store      {service.store.display_url} ({kind})")
    click.echo(f"admin      listening on http://127.0.0.1:{port} (loopback only)")
    if config.metrics_port is not None:
        click.echo(f"metrics    listening on http://{config.host}:{service.metrics_port}/metrics")
    waiting = asyncio.ensure_future(service.wait())
    stop_wait = asyncio.ensure_future(stopping.requested.wait())
    await asyncio.wait({waiting, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
    if waiting.done():
        stop_wait.cancel()
        await service.stop(stopping.margin())
        waiting.result()  # raises SinkHalted when the brake tripped
        return
    click.echo("stopping: writing the batch held and committing", err=True)
    graceful = await service.stop(stopping.margin())
    waiting.cancel()
    if not graceful:
        stopping.expire()
    click.echo("stopped", err=True)


@click.command("sink")
@click.option("--kafka", metavar="BOOTSTRAP", help="Kafka bootstrap host:port[,host:port].")
@click.option("--store", "store", help="chdb:///path or http(s)://host:8123.")
@click.option(
    "--data-dir", type=click.Path(file_okay=False), help="Shorthand for a chDB store in DIR."
)
@click.option("--admin-port", type=int, help="Loopback admin port [0: any free port].")
@click.option("--host", help="Interface for --metrics-port [127.0.0.1].")
@click.option("--metrics-port", type=int, help="/metrics, /healthz, /readyz on --host [off].")
@click.option("--group", "sink_group", help="Consumer group [holonograph-sink].")
@click.option("--kafka-records-topic", help="Records topic [holonograph.records].")
@click.option("--kafka-dead-letter-topic", help="Dead-letter topic [holonograph.dead-letter].")
@click.option("--kafka-contracts-topic", help="Contract registrations [holonograph.contracts].")
@click.option("--kafka-partitions", type=int, help="Partitions of topics this creates [6].")
@click.option(
    "--kafka-idempotence/--no-kafka-idempotence",
    default=None,
    help="Idempotent producer for dead letters [on].",
)
@click.option("--batch-rows", "sink_batch_rows", type=int, help="Rows per insert [50000].")
@click.option(
    "--batch-seconds", "sink_batch_seconds", type=float, help="Longest a batch waits [1.0]."
)
@click.option(
    "--max-invalid-ratio",
    "sink_max_invalid_ratio",
    type=float,
    help="Brake: stop past this share of invalid records [0.1].",
)
@click.option(
    "--max-invalid-run",
    "sink_max_invalid_run",
    type=int,
    help="Brake: stop past this many invalid records in a row [100].",
)
@click.option(
    "--rejection-log-seconds",
    type=float,
    help="At most one log line per this many seconds summarising dead letters [60].",
)
@read_options
@click.option(
    "--group-instance-id",
    "sink_group_instance_id",
    metavar="ID",
    help="Static group membership: a restart with the same ID takes its partitions back"
    " at once; unique per member [off: dynamic].",
)
@click.option(
    "--stall-seconds",
    "sink_stall_seconds",
    type=float,
    help="Degraded on /readyz after this long with lag and no progress [15].",
)
@click.option(
    "--stop-timeout",
    "stop_timeout_seconds",
    type=float,
    help="On SIGTERM/Ctrl-C, exit within this many seconds whatever Kafka or the store"
    " is doing; a second signal exits at once [10].",
)
@click.option("-v", "--verbose", is_flag=True, help="Log at INFO level.")
def sink_command(verbose: bool, **flags: Any) -> None:
    """Consume records from Kafka, write them to the store, commit offsets after."""
    configure_logging(verbose)
    try:
        config = build_config(flags)
        url = config.store_url()
    except (ValidationError, StoreURLError) as err:
        raise invalid_configuration(err) from None
    refuse_if_held(url)
    try:
        store = open_store(url)
    except Exception as err:
        raise store_unavailable(url, err) from None
    # The sink owns the store on the scale-out path, so it runs the jobs `serve` runs on
    # the embedded one.
    service = SinkService(config, store, periodic=periodic_jobs(config.status_refresh_seconds))
    tune_for_throughput()
    tune_allocator()
    try:
        asyncio.run(run_sink(service))
    except SinkHalted as err:
        click.echo(
            f"error: sink halted, nothing past the last good batch committed: {err}", err=True
        )
        sys.exit(EXIT_FINDING)
    finally:
        store.close()


def register(group: click.Group) -> None:
    group.add_command(sink_command)
