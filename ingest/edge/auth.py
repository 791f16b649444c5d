"""Bearer-token authentication of OTLP requests: who sent it, as a `Principal`.

The tokens file (YAML, mode 0600) lists entries of a tenant, the agent ids its
token may write (or "*"), an optional rate limit and optional `scopes` (`write`: OTLP;
`read`: analyses and events; `govern`: approvals, lifecycle, contracts, change
records; an entry without `scopes` keeps what tokens could do before scopes existed,
`write` and `govern`: `ingest.export.principal.UNSCOPED`); each entry holds the token's
hex SHA-256 (`token_sha256`, so the file need hold no secret) or the token itself
(`token`). Only digests are kept in memory; a presented token is hashed and
compared with every digest in constant time. The file is reloaded when it changes
(content, owner or mode); a new file that does not parse, or that another user owns
or could write (`ingest.filecheck`), keeps the old tokens and logs why. No message
about the file quotes it: YAML and validation errors say where, never what.

Without a tokens file every request is `ANONYMOUS` (tenant `default`).
"""

from __future__ import annotations

import difflib
import hashlib
import hmac
import logging
import os
import re
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NoReturn

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ingest.errors import Unauthenticated
from ingest.export.principal import ANONYMOUS, UNSCOPED, Principal, Scope
from ingest.filecheck import UnsafeFile, read_trusted

log = logging.getLogger(__name__)

Monotonic = Callable[[], float]
FailureObserver = Callable[[str], None]


class TokensFileError(ValueError):
    """The tokens file cannot be read or does not follow the format."""


class TokenEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = ""
    tenant: str = Field(min_length=1)
    token_sha256: str | None = Field(None, pattern=r"^[0-9a-fA-F]{64}$")
    token: str | None = Field(None, min_length=1)
    agents: list[str] | Literal["*"]
    spans_per_second: float | None = Field(None, gt=0)
    scopes: list[Scope] | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def _one_secret(self) -> TokenEntry:
        if (self.token is None) == (self.token_sha256 is None):
            raise ValueError("give exactly one of token and token_sha256")
        return self

    def digest(self) -> bytes:
        if self.token_sha256 is not None:
            return bytes.fromhex(self.token_sha256)
        assert self.token is not None
        return hashlib.sha256(self.token.encode()).digest()

    def principal(self) -> Principal:
        agents = None if self.agents == "*" else frozenset(self.agents)
        return Principal(
            tenant_id=self.tenant,
            agents=agents,
            name=self.name,
            spans_per_second=self.spans_per_second,
            scopes=UNSCOPED if self.scopes is None else frozenset(self.scopes),
        )


class TokensFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tokens: list[TokenEntry] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> TokensFile:
        limits: dict[str, float | None] = {}
        digests: set[bytes] = set()
        for entry in self.tokens:
            if limits.setdefault(entry.tenant, entry.spans_per_second) != entry.spans_per_second:
                raise ValueError(f"entries of tenant {entry.tenant!r} disagree on spans_per_second")
            digest = entry.digest()
            if digest in digests:
                raise ValueError(f"a token appears twice (entry {entry.name or entry.tenant!r})")
            digests.add(digest)
        return self


Signature = tuple[int, ...]


def _file_signature(path: Path) -> Signature:
    """What changes when the file's content, owner or mode does (a chmod changes ctime)."""
    info = os.stat(path)
    return info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_ino, info.st_mode, info.st_uid


_FIELDS = frozenset(TokensFile.model_fields) | frozenset(TokenEntry.model_fields)
_QUOTED = re.compile(r"'([^']*)'|\"([^\"]*)\"")
# What PyYAML quotes that cannot be part of a token: punctuation it expected or found,
# its own names of YAML tokens (<block end>).
_SYNTAX = re.compile(r"[^A-Za-z0-9]{1,3}|\\[tnr]|<[a-z ]+>")


def _mask(match: re.Match[str]) -> str:
    quoted = match[1] if match[1] is not None else match[2]
    return match[0] if _SYNTAX.fullmatch(quoted) else "'…'"


def _yaml_problem(err: yaml.YAMLError) -> str:
    """Where the YAML is broken and what kind of break, quoting none of it (PyYAML's own
    message shows the line, which may hold a plaintext token)."""
    problem = getattr(err, "problem", None) or "not valid YAML"
    text = _QUOTED.sub(_mask, str(problem))
    mark = getattr(err, "problem_mark", None)
    if mark is not None:
        text += f" at line {mark.line + 1}, column {mark.column + 1}"
    return text


def _validation_problem(err: ValidationError) -> str:
    """The first problem, its place named only by the format's own fields and list
    indexes (an unknown key may be a token pasted in the wrong place)."""
    first = err.errors()[0]
    parts = [p if isinstance(p, int) or p in _FIELDS else "…" for p in first["loc"]]
    where = ".".join(map(str, parts)) or "file"
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        key = str(first["loc"][-1]) if first["loc"] else ""
        close = difflib.get_close_matches(key, TokenEntry.model_fields, n=1)
        known = ", ".join(sorted(TokenEntry.model_fields))
        message = (
            f"unknown field (did you mean {close[0]}?)"
            if close
            else (f"unknown field (the fields are {known})")
        )
    return f"{where}: {message}"


def load_tokens(path: Path) -> list[tuple[bytes, Principal]]:
    """(SHA-256 digest, principal) of every entry; `TokensFileError` says what is wrong."""
    try:
        raw = read_trusted(path, "tokens file")
        document = yaml.safe_load(raw.decode("utf-8"))
        entries = TokensFile.model_validate(document).tokens
    except UnsafeFile as err:
        raise TokensFileError(err.strerror) from None
    except OSError as err:
        raise TokensFileError(f"tokens file {path}: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise TokensFileError(f"tokens file {path} is not UTF-8 (byte {err.start})") from None
    except yaml.YAMLError as err:
        raise TokensFileError(f"tokens file {path} is not YAML: {_yaml_problem(err)}") from None
    except ValidationError as err:
        raise TokensFileError(f"tokens file {path}: {_validation_problem(err)}") from None
    mode = stat.S_IMODE(os.stat(path).st_mode)
    if mode & 0o077 and any(e.token is not None for e in entries):
        log.warning("tokens file %s holds plaintext tokens and is mode %o: chmod 600", path, mode)
    return [(entry.digest(), entry.principal()) for entry in entries]


class RateLimitedLog:
    """At most one line per `interval` seconds; the next one says how many were held back."""

    def __init__(self, interval: float = 10.0, monotonic: Monotonic = time.monotonic) -> None:
        self._interval = interval
        self._monotonic = monotonic
        self._next = 0.0
        self._held = 0

    def warning(self, message: str, *args: object) -> None:
        now = self._monotonic()
        if now < self._next:
            self._held += 1
            return
        held, self._held = self._held, 0
        self._next = now + self._interval
        suffix = f" ({held} more since the last such line)" if held else ""
        log.warning(message + suffix, *args)


@dataclass
class _Tokens:
    signature: Signature
    entries: list[tuple[bytes, Principal]]


class Authenticator:
    """`authenticate(header)` -> the token's Principal, or `Unauthenticated`."""

    def __init__(
        self,
        tokens_file: Path | None,
        on_failure: FailureObserver | None = None,
        monotonic: Monotonic = time.monotonic,
    ) -> None:
        self.tokens_file = tokens_file
        self._on_failure = on_failure
        self._log = RateLimitedLog(monotonic=monotonic)
        self._tokens: _Tokens | None = None
        self._refused_signature: Signature | None = None
        if tokens_file is not None:
            self._tokens = _Tokens(_file_signature(tokens_file), load_tokens(tokens_file))

    @property
    def enabled(self) -> bool:
        return self._tokens is not None

    def reload_if_changed(self) -> bool:
        if self.tokens_file is None or self._tokens is None:
            return False
        try:
            signature = _file_signature(self.tokens_file)
            if signature in (self._tokens.signature, self._refused_signature):
                return False
            entries = load_tokens(self.tokens_file)
        except (OSError, TokensFileError) as err:
            self._refused_signature = signature if isinstance(err, TokensFileError) else None
            log.warning("tokens file changed but cannot be used, keeping the old tokens: %s", err)
            return False
        self._tokens = _Tokens(signature, entries)
        log.info("tokens file %s reloaded: %d token(s)", self.tokens_file, len(entries))
        return True

    def authenticate(self, authorization: str | None) -> Principal:
        if self._tokens is None:
            return ANONYMOUS
        scheme, _, token = (authorization or "").strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            self._refuse("missing", "no bearer token")
        digest = hashlib.sha256(token.strip().encode()).digest()
        found: Principal | None = None
        for known, principal in self._tokens.entries:
            # Every digest is compared, matched or not: the time taken says nothing.
            if hmac.compare_digest(digest, known):
                found = principal
        if found is None:
            self._refuse("unknown", "unknown bearer token")
        return found

    def _refuse(self, reason: str, message: str) -> NoReturn:
        if self._on_failure is not None:
            self._on_failure(reason)
        self._log.warning("refused an OTLP request: %s", message)
        raise Unauthenticated(f"{message}: send Authorization: Bearer <token> of the tokens file")
