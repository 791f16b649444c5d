"""`holonograph --config FILE` (or `HOLONOGRAPH_CONFIG`) and `holonograph validate
--config FILE`: the flags' defaults from a YAML file, under the flags' own names.

    store: chdb:///var/lib/holonograph   # a top-level setting: every command with --store
    tenant: acme
    serve:                               # a command's own flags
      grpc-port: 4317
      verbose: true
    variance:
      decompose:                         # a sub-command's
        bucket: day

A flag given on the command line, or its environment variable, wins over the file
(click's order); the file wins over the built-in default. A key that is no command and
no flag of any command, or a value its flag refuses, is an error naming where it is
(exit 2), before anything runs.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import click
import yaml

from holonograph.cli.errors import EXIT_USAGE, CommandFailed

DefaultMap = dict[str, Any]


def load_config(path: str) -> dict[str, Any]:
    """The file's mapping, or exit 2 saying why it is not one."""
    try:
        loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise CommandFailed(f"config {path}: {err.strerror or err}", EXIT_USAGE) from None
    except yaml.YAMLError as err:
        raise CommandFailed(f"config {path}: not YAML: {err}".splitlines()[0], EXIT_USAGE) from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise CommandFailed(f"config {path}: the file must be a mapping of settings", EXIT_USAGE)
    return loaded


def _flags(command: click.Command) -> dict[str, click.Parameter]:
    """A command's options by flag name without dashes (`grpc-port`), arguments by name."""
    out: dict[str, click.Parameter] = {}
    for param in command.params:
        if isinstance(param, click.Option):
            for opt in param.opts:
                if opt.startswith("--"):
                    out[opt[2:]] = param
        elif param.name:
            out[param.name.replace("_", "-")] = param
    return out


def _commands(group: click.Group, ctx: click.Context) -> Iterator[tuple[str, click.Command]]:
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is not None:
            yield name, command


def _check(
    ctx: click.Context, where: str, param: click.Parameter, value: Any, problems: list[str]
) -> None:
    try:
        param.type_cast_value(ctx, value)
    except click.BadParameter as err:
        problems.append(f"{where}: {err.format_message()}")


def _section(
    ctx: click.Context, command: click.Command, settings: Mapping[str, Any], where: str,
    problems: list[str],
) -> DefaultMap:  # fmt: skip
    """`settings` of one command (or group) as click's default map, by parameter name."""
    out: DefaultMap = {}
    flags = _flags(command)
    subcommands = dict(_commands(command, ctx)) if isinstance(command, click.Group) else {}
    for key, value in settings.items():
        here = f"{where}.{key}"
        if key in subcommands and isinstance(value, dict):
            out[key] = _section(ctx, subcommands[key], value, here, problems)
        elif key in flags and flags[key].name:
            _check(ctx, here, flags[key], value, problems)
            out[flags[key].name] = value
        else:
            known = [*flags, *subcommands]
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            problems.append(f"{here}: no flag --{key} on `{where.replace('.', ' ')}`{hint}")
    return out


def _shared(
    ctx: click.Context, name: str, command: click.Command, shared: Mapping[str, Any]
) -> DefaultMap:
    """The top-level settings that `command` (and its sub-commands) has flags for."""
    out: DefaultMap = {}
    flags = _flags(command)
    for key, value in shared.items():
        param = flags.get(key)
        if param is not None and param.name:
            out[param.name] = value
    if isinstance(command, click.Group):
        for sub, subcommand in _commands(command, ctx):
            out[sub] = _shared(ctx, f"{name} {sub}", subcommand, shared)
    return out


def _merge(base: DefaultMap, over: DefaultMap) -> DefaultMap:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def default_map(
    group: click.Group, ctx: click.Context, config: Mapping[str, Any]
) -> tuple[DefaultMap, list[str]]:
    """click's default map for the whole command tree from `config`, and its problems."""
    problems: list[str] = []
    commands = dict(_commands(group, ctx))
    shared = {k: v for k, v in config.items() if not isinstance(v, dict)}
    every_flag = {flag for command in commands.values() for flag in _all_flags(ctx, command)}
    for key in shared:
        if key not in every_flag:
            close = difflib.get_close_matches(str(key), sorted(every_flag), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            problems.append(f"{key}: no command has a flag --{key}{hint}")
    out: DefaultMap = {}
    for name, command in commands.items():
        out[name] = _shared(ctx, name, command, shared)
        for key, value in shared.items():
            param = _flags(command).get(key)
            if param is not None:
                _check(ctx, f"{key} (for {name})", param, value, problems)
    for key, value in config.items():
        if not isinstance(value, dict):
            continue
        if key not in commands:
            close = difflib.get_close_matches(str(key), sorted(commands), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            problems.append(f"{key}: no command `{key}`{hint}")
            continue
        out[key] = _merge(out[key], _section(ctx, commands[key], value, key, problems))
    return out, problems


def _all_flags(ctx: click.Context, command: click.Command) -> set[str]:
    flags = set(_flags(command))
    if isinstance(command, click.Group):
        for _, sub in _commands(command, ctx):
            flags |= _all_flags(ctx, sub)
    return flags


def apply_config(ctx: click.Context, param: click.Parameter, path: str | None) -> str | None:
    """The root's `--config` callback: the file's settings become the flags' defaults,
    or exit 2 listing what is wrong in it."""
    if path is None:
        return None
    group = ctx.command
    assert isinstance(group, click.Group)
    mapping, problems = default_map(group, ctx, load_config(path))
    if problems:
        raise CommandFailed(f"config {path}: " + "; ".join(problems), EXIT_USAGE)
    ctx.default_map = _merge(dict(ctx.default_map or {}), mapping)
    return path


@click.command("validate")
@click.option(
    "--config", "path", required=True, type=click.Path(dir_okay=False), help="The YAML file."
)
@click.pass_context
def validate_command(ctx: click.Context, path: str) -> None:
    """Check a config file: every key a command or a flag of one (the flags' own names),
    every value one its flag accepts. Exit 0: valid; 2: what is wrong, each by its key."""
    root = ctx.find_root()
    group = root.command
    assert isinstance(group, click.Group)
    config = load_config(path)
    _, problems = default_map(group, root, config)
    if problems:
        for problem in problems:
            click.echo(f"{path}: {problem}", err=True)
        ctx.exit(EXIT_USAGE)
    sections = sum(1 for value in config.values() if isinstance(value, dict))
    shared = len(config) - sections
    click.echo(f"{path}: valid ({shared} shared setting(s), {sections} command section(s))")


def register(group: click.Group) -> None:
    group.add_command(validate_command)
