"""Numbered, append-only ClickHouse migrations (`schemas/clickhouse/NNNN_name.sql`).

Each file is applied once, in order, and recorded in `holonograph.schema_migrations`
with a checksum; applying again on restart is a no-op. A recorded migration whose
file changed is an error: merged migrations are never edited, new ones are added.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

from schemas.store import DATABASE, Store
from schemas.tuning import apply_merge_tuning

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


class MigrationError(RuntimeError):
    """The store's recorded migrations disagree with the files shipped."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()

    def statements(self) -> list[str]:
        """Split on `;` at line ends; comment lines are dropped first."""
        body = "\n".join(
            line for line in self.sql.splitlines() if not line.lstrip().startswith("--")
        )
        return [s.strip() for s in re.split(r";\s*(?:\n|$)", body) if s.strip()]


def load_migrations() -> list[Migration]:
    folder = resources.files("schemas").joinpath("clickhouse")
    found = []
    for entry in folder.iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text()))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise MigrationError(f"duplicate migration numbers in {versions}")
    return found


def apply_migrations(store: Store) -> list[Migration]:
    """Apply every migration not yet recorded; return the ones applied now."""
    store.command(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    store.command(
        f"CREATE TABLE IF NOT EXISTS {DATABASE}.schema_migrations"
        " (version UInt32, name String, checksum String,"
        " applied_at DateTime64(3, 'UTC') DEFAULT now64(3))"
        " ENGINE = MergeTree ORDER BY version"
    )
    recorded = {
        int(v): c
        for v, c in store.query(f"SELECT version, checksum FROM {DATABASE}.schema_migrations").rows
    }
    applied = []
    for migration in load_migrations():
        if migration.version in recorded:
            if recorded[migration.version] != migration.checksum:
                raise MigrationError(
                    f"migration {migration.version:04d}_{migration.name} was edited after"
                    " it was applied; add a new migration instead"
                )
            continue
        for statement in migration.statements():
            store.command(statement)
        store.insert(
            f"{DATABASE}.schema_migrations",
            [[migration.version, migration.name, migration.checksum]],
            ["version", "name", "checksum"],
        )
        applied.append(migration)
    apply_merge_tuning(store)
    return applied
