"""The `holonograph` command. Each module in this package adds its sub-commands
through `register(group)`; `COMMANDS` names them, and a module is imported only when
its command runs, so `--help` or `query` never pays for scipy, grpc or aiohttp.
Every command's exceptions go through one error path (`holonograph.cli.errors`)."""

from __future__ import annotations

import importlib
import os
from typing import Any

import click

from holonograph.cli.errors import EXIT_CODES_HELP, EXIT_INTERRUPTED, CommandFailed, translate
from holonograph.cli.leaving import leave
from holonograph.cli.options import quiet_libraries

# name -> (module in this package, one line for `holonograph --help`).
COMMANDS: dict[str, tuple[str, str]] = {
    "activity": ("activity", "Events received and spans rejected per minute, the last hour."),
    "availability": ("changes", "Mark when a light source or surface was unavailable."),
    "change": ("changes", "Record a deploy, prompt, config, lens, model or vendor change."),
    "changes": ("changes", "Change events, governance and recorded, by surface and window."),
    "compare": ("compare", "Vendors head to head: per group and paired on the same calls."),
    "completeness": ("completeness", "Per-stream delivery accounting and biased windows."),
    "contract": ("contract", "Register surface contracts; read back versions and history."),
    "conformance": ("conformance", "Derive, approve and check fixtures; gate CI on suites."),
    "demo": ("demo", "Send days of seeded multiplexed traffic to a running serve."),
    "drift": ("drift", "Change points of a surface's outcomes, labelled by source."),
    "fixtures": ("lessons", "Re-run published fixtures over their surface's events."),
    "events": ("events", "Stored events a page at a time (the Guide's GET /lens/events)."),
    "lessons": ("lessons", "Overrides, clusters, drafts, the gate, published lessons."),
    "quarantine": ("quarantine", "Recently rejected spans, their reasons and counts."),
    "query": ("query", "Run SQL against the store and print a table or JSON."),
    "report": ("report", "One self-contained HTML page with what the dashboards show."),
    "retention": ("retention", "Show, set or clear how long a tenant's rows are kept."),
    "replay": ("replay", "Re-validate quarantined spans or dead letters after a fix."),
    "serve": ("serve", "Receive OTLP traces and store holonograph events."),
    "sink": ("sink", "Consume Kafka records into the store, then commit offsets."),
    "status": ("status", "Tenants, surfaces, dimensions, counts, last arrival, schedule health."),
    "topology": ("topology", "Structural inventories, coverage scans, contract bootstrap."),
    "validate": ("config", "Check a --config file: every key a flag, every value valid."),
    "variance": ("variance", "Variance isolation: decompose, evaluate, govern readings."),
}


class CommandGroup(click.Group):
    """Loads sub-commands on first use and routes every failure through one path."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module = importlib.import_module(f"{__name__}.{COMMANDS[cmd_name][0]}")
            module.register(self)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name][1]) for name in self.list_commands(ctx)])

    def invoke(self, ctx: click.Context) -> Any:
        quiet_libraries()
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.Abort, BrokenPipeError):
            raise  # click's own endings, and a closed pipe, which click handles
        except KeyboardInterrupt:
            raise CommandFailed("interrupted", EXIT_INTERRUPTED) from None
        except Exception as err:
            raise translate(err) from None


@click.group(
    cls=CommandGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EXIT_CODES_HELP,
)
@click.version_option(package_name="holonograph-collector")
@click.option(
    "--config",
    envvar="HOLONOGRAPH_CONFIG",
    type=click.Path(dir_okay=False),
    is_eager=True,
    expose_value=False,
    callback=lambda ctx, param, value: _apply_config(ctx, param, value),
    help="YAML file of flag defaults, under the flags' names (see `validate`).",
)
def cli() -> None:
    """Holonograph collector: OTLP receiver, ClickHouse store and analyses."""


def _apply_config(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:  # no file: nothing to load (nor YAML's parser to import)
        return None
    from holonograph.cli.config import apply_config

    return apply_config(ctx, param, value)


# The analyses solve many small systems (drift's corroboration: ~120 per tested window),
# where BLAS threads only contend for the cores: 0.17 s a solve instead of 1 ms on a busy
# machine. Set before any command imports numpy; an operator's own setting wins.
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


# pydantic looks for plugins in every installed distribution's entry points when it
# builds its first model (20-50 ms of a command's start); holonograph uses none. An
# operator's own setting wins (an empty one lets plugins load).
PYDANTIC_PLUGINS_VARIABLE = "PYDANTIC_DISABLE_PLUGINS"


def main() -> None:
    for variable in BLAS_THREAD_VARIABLES:
        os.environ.setdefault(variable, "1")
    os.environ.setdefault(PYDANTIC_PLUGINS_VARIABLE, "__all__")
    try:
        cli(auto_envvar_prefix="HOLONOGRAPH")
    except SystemExit as done:  # click ends every command so
        leave(done.code)  # a job command whose stores are closed ends here, at once
        raise
