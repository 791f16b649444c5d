"""JSON documents a command reads from a file or stdin (a contract, an inventory): every
problem listed on stderr and exit 2, nothing stored."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TypeVar

import click
from pydantic import BaseModel

from holonograph.cli.errors import EXIT_USAGE, CommandFailed

M = TypeVar("M", bound=BaseModel)


def read_text(path: str) -> str:
    """The text of `path` (`-`: stdin), or exit 2 naming why it cannot be read."""
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise CommandFailed(f"cannot read {path}: {err.strerror}", EXIT_USAGE) from None
    except UnicodeDecodeError:
        raise CommandFailed(f"{path} is not UTF-8 text", EXIT_USAGE) from None


def invalid(source: str, lines: list[str], what: str, nothing_done: str) -> CommandFailed:
    """Print every problem on stderr; the failure that says how many and what was not done."""
    for line in lines:
        click.echo(f"{source}: {line}", err=True)
    count = f"{len(lines)} problem{'s' if len(lines) != 1 else ''}"
    return CommandFailed(f"{source} is not a valid {what} ({count}); {nothing_done}", EXIT_USAGE)


def load_document(path: str, model: type[M], what: str, nothing_done: str) -> M:
    """`model` validated from the JSON in `path` (`-`: stdin), or exit 2 listing every
    problem in the document's own field names."""
    from pydantic import ValidationError

    from schemas.contracts import problems

    try:
        document = json.loads(read_text(path))
    except json.JSONDecodeError as err:
        raise invalid(path, [f"not JSON: {err}"], what, nothing_done) from None
    try:
        return model.model_validate(document)
    except ValidationError as err:
        raise invalid(path, problems(err), what, nothing_done) from None
