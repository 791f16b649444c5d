"""The `holonograph` command. Each module in this package adds its sub-commands
through `register(group)`, so a new job is one new file here."""

from __future__ import annotations

import importlib
import pkgutil

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="holonograph-collector")
def cli() -> None:
    """Holonograph collector: OTLP receiver, ClickHouse store and analyses."""


def _register_commands() -> None:
    for module_info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if module_info.name.startswith("_") or module_info.name == "options":
            continue
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(cli)


_register_commands()


def main() -> None:
    cli(auto_envvar_prefix="HOLONOGRAPH")
