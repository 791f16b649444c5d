"""`holonograph serve`: the receiver on the embedded default (or a ClickHouse server),
or, with `--kafka`, publishing to Kafka for `holonograph sink` to store."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError

from holonograph.cli.errors import CommandFailed
from holonograph.cli.options import (
    EXIT_USAGE,
    choice_of,
    configure_logging,
    invalid_configuration,
    read_options,
    refuse_if_held,
    store_unavailable,
)
from holonograph.cli.stopping import Stopping
from holonograph.jobs import periodic_jobs
from holonograph.schedule.config import ScheduleFileError, ScheduleSet, load_schedule
from holonograph.schedule.scheduler import Scheduler
from ingest.service.config import ServeConfig, TLSVersion
from ingest.service.gctune import tune_for_throughput
from ingest.service.logged import LoggedSessions
from ingest.service.memory import tune_allocator
from ingest.service.receiver import ReceiverService
from ingest.store.clickhouse import open_store
from ingest.store.reader import StoreSessions
from ingest.store.url import StoreURLError, is_embedded
from schemas.topics import Compression


def build_config(overrides: dict[str, Any]) -> ServeConfig:
    """Environment (HOLONOGRAPH_*) first, then the flags that were given."""
    given = {key: value for key, value in overrides.items() if value is not None}
    return ServeConfig(**given)


def ui_url(service: ReceiverService) -> str:
    """Where the web UI answers: the API's listener (its own port or OTLP/HTTP's), on
    loopback when the listeners are on every interface."""
    config, listeners = service.config, service.listeners
    scheme = "https" if config.tls_cert_file else "http"
    host = "127.0.0.1" if config.host in ("0.0.0.0", "") else config.host
    host = "[::1]" if host == "::" else f"[{host}]" if ":" in host else host
    port = listeners.api_port if listeners.api_port is not None else listeners.http_port
    from holonograph.ui import UI_PATH

    return f"{scheme}://{host}:{port}{UI_PATH}"


def announce(
    service: ReceiverService, as_json: bool, ui: bool = False, open_ui: bool = False
) -> None:
    """One line per listener and the store or Kafka (or one JSON object with --json);
    the web UI's address last (`--open`: also in the default browser, where there is
    one)."""
    config, listeners = service.config, service.listeners
    host = config.host
    scheme = "https" if config.tls_cert_file else "http"
    info: dict[str, str] = {
        "grpc": f"{host}:{listeners.grpc_port}",
        "http": f"{scheme}://{host}:{listeners.http_port}/v1/traces",
        "admin": f"http://127.0.0.1:{listeners.admin_port}",
    }
    if listeners.api_port is not None:
        info["api"] = f"{scheme}://{host}:{listeners.api_port}/openapi.json"
    if config.metrics_port is not None:
        info["metrics"] = f"http://{host}:{listeners.metrics_port}/metrics"
    if service.store is not None:
        info["store"] = service.store.display_url
        info["storeKind"] = (
            "embedded chDB" if is_embedded(service.store.url) else "ClickHouse server"
        )
    if config.kafka:
        info["kafka"] = config.kafka
        info["kafkaRecordsTopic"] = config.kafka_records_topic
    if config.tls_cert_file:
        info["tls"] = "mTLS" if config.tls_client_ca_file else "TLS"
    if config.auth_tokens_file:
        info["auth"] = f"bearer tokens ({config.auth_tokens_file})"
    if ui:
        info["ui"] = ui_url(service)
    if as_json:
        click.echo(json.dumps(info))
        if open_ui and ui:
            _open_browser(info["ui"])
        return
    click.echo(f"OTLP/gRPC  listening on {info['grpc']}")
    click.echo(f"OTLP/HTTP  listening on {info['http']}")
    if listeners.api_port is not None:
        click.echo(f"HTTP API   listening on {info['api']}")
    click.echo(f"admin      listening on {info['admin']} (loopback only)")
    if "metrics" in info:
        click.echo(f"metrics    listening on {info['metrics']}")
    if "store" in info:
        click.echo(f"store      {info['store']} ({info['storeKind']})")
    if "kafka" in info:
        click.echo(f"kafka      {info['kafka']} (records to {info['kafkaRecordsTopic']})")
    if "tls" in info:
        click.echo(
            f"tls        {info['tls']} on both OTLP listeners, minimum {config.tls_min_version}"
        )
    if "auth" in info:
        click.echo(f"auth       {info['auth']}")
    if "ui" in info:
        token = " (give it a read token)" if config.auth_tokens_file else ""
        click.echo(f"web UI     {info['ui']}{token}")
    if open_ui and ui:
        click.echo(f"open {info['ui']}")
        _open_browser(info["ui"])


def _open_browser(url: str) -> None:
    """The default browser at `url`, where there is one to show it (a desktop session);
    on a server the printed URL is what to open."""
    if (
        sys.platform in ("darwin", "win32")
        or os.environ.get("DISPLAY")
        or os.environ.get("WAYLAND_DISPLAY")
    ):
        import webbrowser

        webbrowser.open(url)


async def run_service(
    service: ReceiverService, as_json: bool = False, ui: bool = False, open_ui: bool = False
) -> None:
    stopping = Stopping(
        service.config.stop_timeout_seconds,
        "requests not yet answered get no answer (nothing was acknowledged: clients retry)",
    )
    stopping.install()
    try:
        await service.start()
    except BaseException:
        await service.stop()  # what did start (admin endpoint, published file) goes away
        raise
    announce(service, as_json, ui, open_ui)
    await stopping.requested.wait()
    click.echo("stopping: finishing in-flight requests and flushing", err=True)
    margin = stopping.margin()
    try:
        await asyncio.wait_for(service.stop(grace_seconds=margin / 2), margin)
    except TimeoutError:
        stopping.expire()
    click.echo("stopped", err=True)


@click.command("serve")
@click.option("--host", help="Interface for the OTLP listeners [127.0.0.1].")
@click.option("--grpc-port", type=int, help="OTLP/gRPC port [4317].")
@click.option("--http-port", type=int, help="OTLP/HTTP port [4318].")
@click.option(
    "--api-port",
    type=int,
    help="The HTTP API (analyses, contracts, changes) on its own port, same TLS and tokens"
    " [off: on the OTLP/HTTP port].",
)
@click.option("--admin-port", type=int, help="Loopback admin port [0: any free port].")
@click.option("--metrics-port", type=int, help="/metrics, /healthz, /readyz on --host [off].")
@click.option("--store", "store", help="chdb:///path or http(s)://host:8123.")
@click.option(
    "--data-dir", type=click.Path(file_okay=False), help="Shorthand for a chDB store in DIR."
)
@click.option("--max-request-bytes", type=int, help="Largest request after decompression [64 MiB].")
@click.option("--max-inflight-bytes", type=int, help="Request bytes in flight before 429 [64 MiB].")
@click.option("--max-request-spans", type=int, help="Spans in one request; more: 413 [50000].")
@click.option("--retention", help="TTL on the event tables, e.g. 30d, 12h, 4w [keep].")
@click.option(
    "--rejection-log-seconds",
    type=float,
    help="At most one log line per this many seconds summarising rejected spans [60].",
)
@click.option(
    "--kafka",
    metavar="BOOTSTRAP",
    help="Publish to Kafka at host:port[,host:port] instead of writing a store.",
)
@click.option("--kafka-records-topic", help="Topic for validated records [holonograph.records].")
@click.option(
    "--kafka-dead-letter-topic", help="Topic for quarantined spans [holonograph.dead-letter]."
)
@click.option("--kafka-contracts-topic", help="Contract registrations [holonograph.contracts].")
@click.option("--kafka-partitions", type=int, help="Partitions of topics this creates [6].")
@click.option(
    "--kafka-idempotence/--no-kafka-idempotence",
    default=None,
    help="Idempotent producer (brokers without it, e.g. Tansu: off) [on].",
)
@click.option("--kafka-max-message-bytes", type=int, help="Broker's message limit [1000000].")
@click.option("--kafka-timeout-ms", type=int, help="Wait for acks before 503 [5000].")
@click.option(
    "--kafka-compression",
    type=choice_of(Compression),
    help="Producer batch compression [zstd; gzip without the cramjam codec].",
)
@click.option(
    "--kafka-record-version",
    type=int,
    help="Records of requests the hot path took: 8 (rows as columns), 7 (sinks older than"
    " 8), 4 (sinks older than 7) [8].",
)
@click.option(
    "--tls-cert-file", type=click.Path(dir_okay=False), help="TLS certificate chain (PEM)."
)
@click.option("--tls-key-file", type=click.Path(dir_okay=False), help="TLS private key (PEM).")
@click.option(
    "--tls-client-ca-file",
    type=click.Path(dir_okay=False),
    help="mTLS: clients need a certificate this CA signed.",
)
@click.option("--tls-min-version", type=choice_of(TLSVersion), help="Lowest TLS version [1.2].")
@click.option(
    "--auth-tokens-file",
    type=click.Path(dir_okay=False),
    help="YAML bearer tokens with tenants [off: single tenant 'default'].",
)
@click.option("--max-queue-seconds", type=float, help="Expected queue time before 429 [3].")
@click.option("--max-concurrent-reads", type=int, help="Request bodies received at once [4].")
@click.option(
    "--max-concurrent-reads-per-client",
    type=int,
    help="Of those, bodies of one token (or client address without tokens) [2].",
)
@click.option(
    "--min-body-rate",
    type=float,
    help="Slowest average body rate in bytes/s before 408, HTTP; 0: none [16384].",
)
@click.option(
    "--body-rate-grace",
    "body_rate_grace_seconds",
    type=float,
    help="Seconds a body may arrive slower than --min-body-rate at first [5].",
)
@click.option("--http-max-connections", type=int, help="Open HTTP connections [256].")
@click.option(
    "--http-max-connections-per-client",
    type=int,
    help="Open HTTP connections from one client address [64].",
)
@click.option(
    "--http-header-timeout",
    "http_header_timeout_seconds",
    type=float,
    help="Seconds for a request header (and idle keep-alive) [10].",
)
@click.option(
    "--body-timeout",
    "body_timeout_seconds",
    type=float,
    help="Seconds for a request body to arrive whole [30].",
)
@click.option("--grpc-max-concurrent-rpcs", type=int, help="Open gRPC calls [512].")
@click.option(
    "--grpc-max-streams-per-connection", type=int, help="Open gRPC calls on one connection [16]."
)
@click.option(
    "--stop-timeout",
    "stop_timeout_seconds",
    type=float,
    help="On SIGTERM/Ctrl-C, exit within this many seconds whatever the store or Kafka"
    " is doing; a second signal exits at once [10].",
)
@click.option(
    "--schedule",
    "schedule_file",
    type=click.Path(dir_okay=False),
    help="YAML file of jobs to run on cron expressions (docs/schedules.md) [none].",
)
@click.option(
    "--ui/--no-ui",
    default=True,
    help="The web UI at /ui/ on the HTTP API's port (docs/ui.md) [on].",
)
@click.option(
    "--open",
    "open_ui",
    is_flag=True,
    help="Print the web UI's URL (and open it in the default browser on a desktop).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the listeners as one JSON object.")
@read_options
@click.option("-v", "--verbose", is_flag=True, help="Log at INFO level.")
def serve_command(
    verbose: bool,
    as_json: bool,
    schedule_file: str | None,
    ui: bool,
    open_ui: bool,
    **flags: Any,
) -> None:
    """Receive OTLP traces and store holonograph events (embedded chDB by default)."""
    configure_logging(verbose)
    schedules = load_schedule_or_exit(schedule_file) if schedule_file else None
    try:
        config = build_config(flags)
        url = None if config.kafka else config.store_url()
    except (ValidationError, StoreURLError) as err:
        raise invalid_configuration(err) from None
    if config.kafka and (flags.get("store") or flags.get("data_dir")):
        click.echo("error: with --kafka the receiver keeps no store; the sink writes it", err=True)
        sys.exit(EXIT_USAGE)
    if config.kafka and schedules is not None:
        click.echo(
            "error: --schedule runs jobs on the store, and with --kafka this receiver keeps"
            " none: give the schedule to a serve without --kafka",
            err=True,
        )
        sys.exit(EXIT_USAGE)
    if url:
        refuse_if_held(url)
    try:
        store = open_store(url) if url else None
    except Exception as err:
        raise store_unavailable(url, err) from None
    periodic = periodic_jobs(config.status_refresh_seconds) if store is not None else []
    from holonograph.api import mount_api  # the Guide's HTTP API (docs/api.md)
    from holonograph.ui import mount_ui  # its web UI (docs/ui.md)

    sessions = StoreSessions(store.url, limits=config.read_limits()) if store else None
    # Scheduled jobs read what `serve` acknowledged: its log drained first.
    scheduled = LoggedSessions(sessions, lambda: service.small_log) if sessions else None
    background = [Scheduler(schedules, scheduled)] if schedules and scheduled else []
    routes = [mount_api, mount_ui] if ui else [mount_api]
    service = ReceiverService(
        config, store, periodic=periodic, routes=routes, background=background
    )
    tune_for_throughput()
    tune_allocator()
    try:
        asyncio.run(run_service(service, as_json, ui, open_ui))
    finally:
        if sessions is not None:
            sessions.close()
        if store is not None:
            store.close()


def load_schedule_or_exit(path: str) -> ScheduleSet:
    """The schedule file, or exit 2 with `FILE:LINE: what is wrong`."""
    try:
        return load_schedule(Path(path))
    except ScheduleFileError as err:
        raise CommandFailed(f"schedule file {err}", EXIT_USAGE) from None


def register(group: click.Group) -> None:
    group.add_command(serve_command)
