"""The migrations on a ClickHouse cluster: the single-server SQL rendered for a
cluster of shards and replicas (docs/decisions/0015-clickhouse-cluster.md).

A store URL with `?cluster=NAME` (`http://host:8123/?cluster=holonograph`) makes
`schemas.migrations` run every migration through `render_statement`:

    CREATE TABLE db.t (...) ENGINE = XMergeTree(args) ...
      -> CREATE TABLE db.t_local ON CLUSTER c (...)
             ENGINE = ReplicatedXMergeTree('/clickhouse/tables/{shard}/db/t_local',
                                           '{replica}', args) ...
         CREATE TABLE db.t ON CLUSTER c AS db.t_local
             ENGINE = Distributed(c, db, t_local, <sharding key>)

so every name the code uses (`schemas.tables`) is the Distributed table: reads go
through it (FINAL is applied on each shard, where every version of a row lives), and
so do writes. The sharding key is a hash of the row's identity, the columns its
sorting key collapses on: `(tenant_id, event_id)` for a table keyed by an event (the
Kafka record key, decision 0003), `(tenant_id, emission_stream)` for one keyed by a
stream, else the whole sorting key; every re-send of a row lands on one shard.
Materialized views are created on the local tables (they fire where the rows land);
plain views read the Distributed ones; ALTERs of columns go to both, the others to the
local tables; every DDL statement runs ON CLUSTER. The runner's own steps (REBUILD,
RELAYOUT, BACKFILL) are run through the Distributed tables by `schemas.migrations`
(RELAYOUT shard by shard on each shard's local tables: `schemas.cluster_relayout`).

Rendering is a pure function of the statements so far (which tables are replicated),
tested on every shipped migration against ClickHouse's parser without a cluster.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlparse

LOCAL_SUFFIX = "_local"
# Keeper path of a local table's replicas: one znode tree per shard and table; the
# {shard} and {replica} macros come from each server's config (deploy/clickhouse-cluster).
KEEPER_PATH = "/clickhouse/tables/{{shard}}/{database}/{table}"
REPLICA_NAME = "{replica}"

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_CLUSTER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
_CREATE_DB = re.compile(rf"^(CREATE DATABASE (?:IF NOT EXISTS )?)({_IDENT})(.*)$", re.DOTALL)
_CREATE_TABLE = re.compile(
    rf"^CREATE TABLE (IF NOT EXISTS )?({_IDENT})\.({_IDENT})(\s*\(.*?\))?\s*ENGINE\s*=\s*"
    rf"(\w*)MergeTree\b(.*)$",
    re.DOTALL,
)
_CREATE_MV = re.compile(
    rf"^CREATE MATERIALIZED VIEW (IF NOT EXISTS )?({_IDENT})\.({_IDENT})\s+TO\s+"
    rf"({_IDENT})\.({_IDENT})(.*)$",
    re.DOTALL,
)
_CREATE_VIEW = re.compile(
    rf"^(CREATE (?:OR REPLACE )?VIEW (?:IF NOT EXISTS )?)({_IDENT})\.({_IDENT})(.*)$", re.DOTALL
)
_ALTER = re.compile(rf"^ALTER TABLE ({_IDENT})\.({_IDENT})\s+(.*)$", re.DOTALL)
_DROP = re.compile(rf"^DROP TABLE (IF EXISTS )?({_IDENT})\.({_IDENT})(.*)$", re.DOTALL)
_DROP_VIEW = re.compile(rf"^DROP VIEW (IF EXISTS )?({_IDENT})\.({_IDENT})(.*)$", re.DOTALL)
_COLUMN_ALTER = re.compile(r"^(ADD|MODIFY|DROP|RENAME|COMMENT) COLUMN\b", re.IGNORECASE)
_RUNNER_STEP = re.compile(r"^BACKFILL\b")
_REBUILD = re.compile(
    rf"^REBUILD\s+({_IDENT})\.({_IDENT})\s+FROM\s+({_IDENT})\.({_IDENT})\s+ADDING\s+({_IDENT})$"
)
# The cluster form of the runner's REBUILD step: the key of the new layout's
# Distributed table, which replaces the old one once the local tables are exchanged.
CLUSTER_REBUILD = re.compile(
    rf"^REBUILD ON CLUSTER ({_IDENT}) ({_IDENT})\.({_IDENT}) FROM ({_IDENT})\.({_IDENT})"
    rf" ADDING ({_IDENT}) SHARDED BY (.+)$",
    re.DOTALL,
)


_RELAYOUT = re.compile(
    rf"^RELAYOUT\s+({_IDENT})\.({_IDENT})\s+FROM\s+({_IDENT})\.({_IDENT})"
    rf"\s+PLACED\s+BY\s+({_IDENT})\.({_IDENT})$"
)
# The cluster form of RELAYOUT (`schemas.migrations.relayout_on_cluster`).
CLUSTER_RELAYOUT = re.compile(
    rf"^RELAYOUT ON CLUSTER ({_IDENT}) ({_IDENT})\.({_IDENT}) FROM ({_IDENT})\.({_IDENT})"
    rf" PLACED BY ({_IDENT})\.({_IDENT}) SHARDED BY (.+)$",
    re.DOTALL,
)


class ClusterRenderError(ValueError):
    """A statement the renderer does not know how to run on a cluster."""


def cluster_of(url: str) -> str | None:
    """The `cluster` parameter of a store URL (None: a single server)."""
    values = parse_qs(urlparse(url).query).get("cluster")
    if not values:
        return None
    name = values[-1]
    if not _CLUSTER_NAME.match(name):
        raise ClusterRenderError(f"cluster name {name!r}: letters, digits, _ and - only")
    return name


def local_name(table: str) -> str:
    return table + LOCAL_SUFFIX


def _balanced(text: str, start: int) -> int:
    """The index just past the parenthesis group opening at `text[start]`."""
    depth = 0
    quoted = False
    for i in range(start, len(text)):
        char = text[i]
        if char == "'" and (i == 0 or text[i - 1] != "\\"):
            quoted = not quoted
        elif not quoted and char == "(":
            depth += 1
        elif not quoted and char == ")":
            depth -= 1
            if depth == 0:
                return i + 1
    raise ClusterRenderError("unbalanced parentheses")


def _split_top(text: str) -> list[str]:
    """`a, f(b, c), d` -> ['a', 'f(b, c)', 'd']."""
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
            continue
        depth += char == "("
        depth -= char == ")"
        current += char
    if current.strip():
        parts.append(current.strip())
    return parts


def sorting_key(rest: str) -> list[str]:
    """The ORDER BY elements of a table definition's tail."""
    match = re.search(r"\bORDER BY\s+", rest)
    if match is None:
        return []
    at = match.end()
    if rest[at] == "(":
        return _split_top(rest[at + 1 : _balanced(rest, at) - 1])
    word = re.match(r"[^\s;]+", rest[at:])
    return [word[0]] if word else []


def sharding_key(order_by: list[str]) -> str:
    """A hash of the identity the sorting key collapses on (see the module's doc)."""
    names = set(order_by)
    tenant = ["tenant_id"] if "tenant_id" in names else []
    for identity in ("event_id", "emission_stream"):
        if identity in names:
            return f"cityHash64({', '.join([*tenant, identity])})"
    elements = [e for e in order_by if e != "tuple()"]
    return f"cityHash64({', '.join(elements)})" if elements else "0"


@dataclass
class ClusterSchema:
    """What the statements rendered so far created: the replicated tables (by
    `db.name`, each with its Distributed twin under that name) and their keys."""

    cluster: str
    replicated: dict[str, str] = field(default_factory=dict)  # db.t -> sharding key

    def render(self, statement: str) -> list[str]:
        """`statement` (single-server) as the statements to run on the cluster."""
        text = statement.strip()
        if _RUNNER_STEP.match(text):
            return [text]  # the runner's own step: run through the Distributed tables
        relayout = _RELAYOUT.match(text)
        if relayout is not None:
            db, name, staging_db, staging, owners_db, owners = relayout.groups()
            key = self.replicated.pop(f"{staging_db}.{staging}", None)
            if key is None:
                raise ClusterRenderError(f"RELAYOUT from {staging_db}.{staging}: not created")
            self.replicated[f"{db}.{name}"] = key
            return [
                f"RELAYOUT ON CLUSTER {self.cluster} {db}.{name} FROM {staging_db}.{staging}"
                f" PLACED BY {owners_db}.{owners} SHARDED BY {key}"
            ]
        rebuild = _REBUILD.match(text)
        if rebuild is not None:
            db, name, staging_db, staging, marker = rebuild.groups()
            key = self.replicated.pop(f"{staging_db}.{staging}", None)
            if key is None:
                raise ClusterRenderError(f"REBUILD from {staging_db}.{staging}: not created")
            self.replicated[f"{db}.{name}"] = key
            return [
                f"REBUILD ON CLUSTER {self.cluster} {db}.{name} FROM {staging_db}.{staging}"
                f" ADDING {marker} SHARDED BY {key}"
            ]
        for handler in (
            self._database,
            self._table,
            self._materialized_view,
            self._view,
            self._alter,
            self._drop,
            self._drop_view,
        ):
            rendered = handler(text)
            if rendered is not None:
                return rendered
        if re.match(r"^(INSERT|OPTIMIZE|TRUNCATE)\b", text):
            return self._through_distributed(text)
        raise ClusterRenderError(f"no cluster rendering for: {text[:80]}")

    def _on(self) -> str:
        return f" ON CLUSTER {self.cluster}"

    def _database(self, text: str) -> list[str] | None:
        match = _CREATE_DB.match(text)
        if match is None:
            return None
        return [f"{match[1]}{match[2]}{self._on()}{match[3]}"]

    def _table(self, text: str) -> list[str] | None:
        match = _CREATE_TABLE.match(text)
        if match is None:
            return None
        if_not, db, name, columns, family, tail = match.groups()
        tail = tail or ""
        args = ""
        if tail.lstrip().startswith("("):
            offset = len(tail) - len(tail.lstrip())
            end = _balanced(tail, offset)
            args = tail[offset + 1 : end - 1].strip()
            tail = tail[end:]
        local = local_name(name)
        path = KEEPER_PATH.format(database=db, table=local)
        replicated_args = ", ".join(p for p in (f"'{path}'", f"'{REPLICA_NAME}'", args) if p)
        key = sharding_key(sorting_key(tail))
        self.replicated[f"{db}.{name}"] = key
        exists = if_not or ""
        return [
            f"CREATE TABLE {exists}{db}.{local}{self._on()}{columns or ''}\n"
            f"ENGINE = Replicated{family}MergeTree({replicated_args}){tail}",
            f"CREATE TABLE {exists}{db}.{name}{self._on()} AS {db}.{local}\n"
            f"ENGINE = Distributed({self.cluster}, {db}, {local}, {key})",
        ]

    def _locals(self, text: str) -> str:
        """`text` with every replicated table named by its local table."""

        def swap(match: re.Match[str]) -> str:
            name = match[0]
            if name in self.replicated:
                db, table = name.split(".")
                return f"{db}.{local_name(table)}"
            return name

        return re.sub(rf"\b{_IDENT}\.{_IDENT}\b", swap, text)

    def _materialized_view(self, text: str) -> list[str] | None:
        match = _CREATE_MV.match(text)
        if match is None:
            return None
        if_not, db, name, target_db, target, rest = match.groups()
        target_name = f"{target_db}.{target}"
        if target_name in self.replicated:
            target = local_name(target)
        return [
            f"CREATE MATERIALIZED VIEW {if_not or ''}{db}.{name}{self._on()}"
            f" TO {target_db}.{target}{self._locals(rest)}"
        ]

    def _view(self, text: str) -> list[str] | None:
        match = _CREATE_VIEW.match(text)
        if match is None:
            return None
        return [f"{match[1]}{match[2]}.{match[3]}{self._on()}{match[4]}"]

    def _alter(self, text: str) -> list[str] | None:
        match = _ALTER.match(text)
        if match is None:
            return None
        db, name, operation = match.groups()
        if f"{db}.{name}" not in self.replicated:
            return [f"ALTER TABLE {db}.{name}{self._on()} {operation}"]
        local = f"ALTER TABLE {db}.{local_name(name)}{self._on()} {operation}"
        if _COLUMN_ALTER.match(operation):  # the Distributed table has the columns too
            return [local, f"ALTER TABLE {db}.{name}{self._on()} {operation}"]
        return [local]

    def _drop_view(self, text: str) -> list[str] | None:
        match = _DROP_VIEW.match(text)
        if match is None:
            return None
        if_exists, db, name, rest = match.groups()
        return [f"DROP VIEW {if_exists or ''}{db}.{name}{self._on()}{rest}"]

    def _drop(self, text: str) -> list[str] | None:
        match = _DROP.match(text)
        if match is None:
            return None
        if_exists, db, name, rest = match.groups()
        head = f"DROP TABLE {if_exists or ''}"
        out = [f"{head}{db}.{name}{self._on()}{rest}"]
        if f"{db}.{name}" in self.replicated:
            out.append(f"{head}{db}.{local_name(name)}{self._on()}{rest}")
            del self.replicated[f"{db}.{name}"]
        return out

    def _through_distributed(self, text: str) -> list[str]:
        """A data statement runs once, from the migrating node, on the Distributed
        tables (an OPTIMIZE or TRUNCATE on each shard's local tables)."""
        match = re.match(rf"^(OPTIMIZE|TRUNCATE) TABLE (IF EXISTS )?({_IDENT}\.{_IDENT})(.*)$",
                         text, re.DOTALL)  # fmt: skip
        if match is None:
            return [text]
        verb, if_exists, name, rest = match.groups()
        target = self._locals(name)
        return [f"{verb} TABLE {if_exists or ''}{target}{self._on()}{rest}"]


def render_all(statements: Iterable[Iterable[str]], cluster: str) -> list[list[str]]:
    """Each migration's statements (in order) rendered for `cluster`."""
    schema = ClusterSchema(cluster)
    return [[out for statement in each for out in schema.render(statement)] for each in statements]
