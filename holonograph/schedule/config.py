"""The schedule file (`serve --schedule FILE`, docs/schedules.md), validated whole at
start: a mistake is a `ScheduleFileError` naming the file, the line and what is wrong
(serve exits 2 with it), never a schedule that fails at 3 a.m.

Each schedule's `request` is validated into its job's `Request` by the same rules as the
HTTP body (the Guide's camelCase names, unknown fields refused); its `tenant` is the
schedule's (the runner's `scope` picks the store's only tenant when it is left out).
"""

from __future__ import annotations

import datetime as dt
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from croniter import croniter
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from holonograph.schedule.jobs import SCHEDULABLE
from ingest.filecheck import UnsafeFile, read_trusted
from ingest.service.receiver import is_loopback
from processors.jobs import Job, JobRequest

NAME = r"^[a-z0-9][a-z0-9_.-]{0,62}$"
# Prometheus label names; those the scheduler sets itself are reserved.
LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,62}$")
RESERVED_LABELS = frozenset({"schedule", "job", "tenant", "webhook", "status"})
MAX_FILE_BYTES = 1024 * 1024

Path_ = tuple[str | int, ...]


class ScheduleFileError(ValueError):
    """`FILE:LINE: message`: what serve prints before exiting 2."""

    def __init__(self, source: str, line: int | None, message: str) -> None:
        where = f"{source}:{line}" if line else source
        super().__init__(f"{where}: {message}")
        self.line = line


class Secret:
    """A webhook's signing key: never printed, logged or compared in variable time."""

    __slots__ = ("_value",)

    def __init__(self, value: bytes) -> None:
        self._value = value

    def reveal(self) -> bytes:
        return self._value

    def __repr__(self) -> str:
        return "Secret('****')"


@dataclass(frozen=True)
class Webhook:
    name: str
    url: str
    secret: Secret = field(repr=False)
    max_attempts: int = 5
    timeout_seconds: float = 10.0
    backoff_seconds: float = 1.0
    max_backoff_seconds: float = 60.0


@dataclass(frozen=True)
class Schedule:
    """One entry: run `job` for `request` at every fire time of `cron` (UTC)."""

    name: str
    cron: str
    job: Job[Any, Any]
    request: JobRequest
    labels: Mapping[str, str]
    webhooks: tuple[Webhook, ...]
    line: int

    @property
    def tenant(self) -> str | None:
        return self.request.tenant

    def latest_fire(self, now: dt.datetime) -> dt.datetime:
        """The latest fire time at or before `now`."""
        after = now.replace(microsecond=0) + dt.timedelta(seconds=1)
        fire: dt.datetime = croniter(self.cron, after).get_prev(dt.datetime)
        return fire.astimezone(dt.UTC)

    def next_fire(self, after: dt.datetime) -> dt.datetime:
        """The first fire time after `after`."""
        fire: dt.datetime = croniter(self.cron, after).get_next(dt.datetime)
        return fire.astimezone(dt.UTC)


@dataclass(frozen=True)
class ScheduleSet:
    source: str
    schedules: tuple[Schedule, ...]
    webhooks: tuple[Webhook, ...]

    def label_names(self) -> tuple[str, ...]:
        """Every label any schedule sets: the finding gauge's label names."""
        return tuple(sorted({name for s in self.schedules for name in s.labels}))


class _Strict(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, extra="forbid", frozen=True)


class _WebhookSpec(_Strict):
    name: str = Field(pattern=NAME)
    url: str = Field(pattern=r"^https?://[^\s/]+", max_length=2048)

    @field_validator("url")
    @classmethod
    def _https_off_this_host(cls, url: str) -> str:
        """A finding carries a tenant's report: plain HTTP only to this machine."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme == "http" and not is_loopback(parts.hostname or ""):
            raise ValueError("use https:// (plain http:// only to a loopback address)")
        return url

    secret_file: Path
    max_attempts: int = Field(5, ge=1, le=20)
    timeout_seconds: float = Field(10.0, gt=0, le=300)
    backoff_seconds: float = Field(1.0, gt=0, le=600)
    max_backoff_seconds: float = Field(60.0, gt=0, le=3600)


class _ScheduleSpec(_Strict):
    name: str = Field(pattern=NAME)
    cron: str = Field(min_length=1)
    job: str = Field(min_length=1)
    tenant: str | None = Field(None, min_length=1, max_length=128)
    request: dict[str, Any] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)
    webhooks: list[str] = Field(default_factory=list)


class _File(_Strict):
    webhooks: list[_WebhookSpec] = Field(default_factory=list)
    schedules: list[_ScheduleSpec] = Field(min_length=1)


def load_schedule(path: Path) -> ScheduleSet:
    """The schedules in `path`, every part checked (`ScheduleFileError` otherwise)."""
    source = str(path)
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as err:
        raise ScheduleFileError(source, None, f"cannot read it: {err.strerror or err}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ScheduleFileError(source, None, f"larger than {MAX_FILE_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ScheduleFileError(source, None, "not UTF-8 text") from None
    return parse_schedule(text, source, base=path.parent)


def parse_schedule(text: str, source: str, base: Path = Path(".")) -> ScheduleSet:
    """`text` as a schedule file; relative secret files are relative to `base`."""
    data, lines = _compose(text, source)
    if not isinstance(data, dict):
        raise ScheduleFileError(source, 1, "expected a mapping with `schedules:` (and `webhooks:`)")
    try:
        spec = _File.model_validate(data)
    except ValidationError as err:
        raise _first_problem(err, source, lines, ()) from None
    webhooks = _webhooks(spec.webhooks, source, lines, base)
    by_name = {w.name: w for w in webhooks}
    seen: dict[str, int] = {}
    schedules = []
    for i, entry in enumerate(spec.schedules):
        at = ("schedules", i)
        line = _line(lines, at)
        if entry.name in seen:
            raise ScheduleFileError(
                source, _line(lines, (*at, "name")), f"schedule {entry.name!r} is defined twice"
            )
        seen[entry.name] = line
        schedules.append(_schedule(entry, at, source, lines, by_name))
    return ScheduleSet(source, tuple(schedules), webhooks)


def _webhooks(
    specs: Sequence[_WebhookSpec], source: str, lines: dict[Path_, int], base: Path
) -> tuple[Webhook, ...]:
    out: dict[str, Webhook] = {}
    for i, spec in enumerate(specs):
        at: Path_ = ("webhooks", i)
        if spec.name in out:
            raise ScheduleFileError(
                source, _line(lines, (*at, "name")), f"webhook {spec.name!r} is defined twice"
            )
        secret_path = (
            spec.secret_file if spec.secret_file.is_absolute() else base / spec.secret_file
        )
        where = _line(lines, (*at, "secretFile"))
        try:
            secret = read_trusted(secret_path, "webhook secret file", secret=True).strip()
        except UnsafeFile as err:
            raise ScheduleFileError(source, where, err.strerror or str(err)) from None
        except OSError as err:
            raise ScheduleFileError(
                source, where, f"cannot read {secret_path}: {err.strerror or err}"
            ) from None
        if len(secret) < 16:
            raise ScheduleFileError(
                source, where, f"{secret_path} holds fewer than 16 bytes: not a signing secret"
            )
        out[spec.name] = Webhook(
            spec.name,
            spec.url,
            Secret(secret),
            spec.max_attempts,
            spec.timeout_seconds,
            spec.backoff_seconds,
            spec.max_backoff_seconds,
        )
    return tuple(out.values())


def _schedule(
    entry: _ScheduleSpec,
    at: Path_,
    source: str,
    lines: dict[Path_, int],
    webhooks: Mapping[str, Webhook],
) -> Schedule:
    if not croniter.is_valid(entry.cron) or len(entry.cron.split()) != 5:
        raise ScheduleFileError(
            source,
            _line(lines, (*at, "cron")),
            f"cron {entry.cron!r} is not a 5-field cron expression (minute hour day month"
            " weekday, UTC), e.g. '0 2 * * *'",
        )
    job = SCHEDULABLE.get(entry.job)
    if job is None:
        raise ScheduleFileError(
            source,
            _line(lines, (*at, "job")),
            f"unknown job {entry.job!r}; schedulable jobs: {', '.join(sorted(SCHEDULABLE))}",
        )
    for name in entry.labels:
        if not LABEL.match(name) or name in RESERVED_LABELS or name.startswith("__"):
            raise ScheduleFileError(
                source,
                _line(lines, (*at, "labels", name)),
                f"label {name!r} is not a Prometheus label name of this file's own"
                f" ([a-zA-Z_][a-zA-Z0-9_]*, none of {', '.join(sorted(RESERVED_LABELS))})",
            )
    for i, hook in enumerate(entry.webhooks):
        if hook not in webhooks:
            known = ", ".join(sorted(webhooks)) or "none defined"
            raise ScheduleFileError(
                source,
                _line(lines, (*at, "webhooks", i)),
                f"unknown webhook {hook!r} (webhooks: {known})",
            )
    if "tenant" in entry.request:
        raise ScheduleFileError(
            source,
            _line(lines, (*at, "request", "tenant")),
            "a request names no tenant: set the schedule's `tenant:`",
        )
    try:
        request = job.request.model_validate(entry.request, by_alias=True, by_name=False)
    except ValidationError as err:
        raise _first_problem(err, source, lines, (*at, "request"), job.name) from None
    return Schedule(
        entry.name,
        entry.cron,
        job,
        request.for_tenant(entry.tenant),
        dict(entry.labels),
        tuple(webhooks[name] for name in dict.fromkeys(entry.webhooks)),
        _line(lines, at),
    )


def _first_problem(
    err: ValidationError, source: str, lines: dict[Path_, int], prefix: Path_, job: str = ""
) -> ScheduleFileError:
    # A misspelt name is the mistake to show, not the field it then leaves missing.
    problems = sorted(err.errors(include_url=False), key=lambda e: e["type"] != "extra_forbidden")
    problem = problems[0]
    loc: Path_ = (*prefix, *problem["loc"])
    what = ".".join(str(part) for part in problem["loc"])
    message = problem["msg"].removeprefix("Value error, ")
    if problem["type"] == "extra_forbidden":
        message = f"unknown field {str(problem['loc'][-1])!r}"
        if job:
            message += f" in a {job} request"
        known = _fields_at(job, problem["loc"])
        if known:
            message += f" (known: {', '.join(known)})"
    elif problem["type"] == "missing":
        message = f"{what}: required"
    else:
        message = f"{what}: {message}" if what else message
        if job:
            message = f"{job} request{' ' if what else ': '}{message}"
    return ScheduleFileError(source, _line(lines, loc), message)


def _fields_at(job: str, loc: Sequence[str | int]) -> list[str]:
    target = SCHEDULABLE.get(job) if job else None
    if target is None or len(loc) != 1:
        return []
    return sorted(
        info.alias or name for name, info in target.request.model_fields.items() if name != "tenant"
    )


def _line(lines: dict[Path_, int], at: Path_) -> int:
    """The line of `at`, else of its nearest enclosing part the file has."""
    for end in range(len(at), -1, -1):
        if at[:end] in lines:
            return lines[at[:end]]
    return 1


def _compose(text: str, source: str) -> tuple[Any, dict[Path_, int]]:
    """The YAML document as plain data, and the line of every key and item in it."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
        problem = getattr(err, "problem", None) or str(err)
        raise ScheduleFileError(
            source, mark.line + 1 if mark is not None else None, f"not valid YAML: {problem}"
        ) from None
    if node is None:
        raise ScheduleFileError(source, None, "empty: expected `schedules:`")
    lines: dict[Path_, int] = {}
    constructor = yaml.SafeLoader("")

    def walk(node: yaml.Node, at: Path_) -> Any:
        lines.setdefault(at, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                key = constructor.construct_object(key_node, deep=True)
                if not isinstance(key, str):
                    raise ScheduleFileError(
                        source, key_node.start_mark.line + 1, f"key {key!r} is not a name"
                    )
                if key in out:
                    raise ScheduleFileError(
                        source, key_node.start_mark.line + 1, f"{key!r} is given twice"
                    )
                lines[(*at, key)] = key_node.start_mark.line + 1
                out[key] = walk(value_node, (*at, key))
            return out
        if isinstance(node, yaml.SequenceNode):
            return [walk(item, (*at, i)) for i, item in enumerate(node.value)]
        return constructor.construct_object(node, deep=True)

    return walk(node, ()), lines
