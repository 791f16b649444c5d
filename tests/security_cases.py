"""What a read-only query must not be able to do, and how to tell it did nothing.

`ATTACKS` are statements of each class a read-only path refuses; `Host` is the
outside world they aim at (a secret file, a file to create, a file to overwrite,
a listener counting connections) and the store's own state (tables, probe rows,
merges); `Host.trace()` is a snapshot that must not change.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schemas.store import Store

PROBE = "holonograph.security_probe"


@dataclass(frozen=True)
class Attack:
    name: str
    sql: str  # {secret} {target} {victim} {url} {hostport} filled by Host.sql


ATTACKS = [
    Attack("file-table-function", "SELECT * FROM file('{secret}', 'LineAsString')"),
    Attack("file-scalar", "SELECT file('{secret}') AS content"),
    Attack("file-in-subquery", "SELECT * FROM (SELECT * FROM file('{secret}', 'LineAsString'))"),
    Attack("describe-file", "DESCRIBE TABLE file('{secret}', 'LineAsString')"),
    Attack(
        "insert-into-function-file",
        "INSERT INTO FUNCTION file('{target}', 'LineAsString') SELECT 'written'",
    ),
    Attack(
        "overwrite-file",
        "INSERT INTO FUNCTION file('{victim}', 'LineAsString') SELECT 'overwritten'"
        " SETTINGS engine_file_truncate_on_insert = 1",
    ),
    Attack("into-outfile", "SELECT 'written' INTO OUTFILE '{target}'"),
    Attack("url", "SELECT * FROM url('{url}', 'LineAsString')"),
    Attack("s3", "SELECT * FROM s3('{url}/bucket/key.csv', 'CSV')"),
    Attack("remote", "SELECT * FROM remote('{hostport}', system.one)"),
    Attack("mysql", "SELECT * FROM mysql('{hostport}', 'db', 't', 'user', 'pass')"),
    Attack("postgresql", "SELECT * FROM postgresql('{hostport}', 'db', 't', 'user', 'pass')"),
    Attack("hdfs", "SELECT * FROM hdfs('hdfs://{hostport}/data.csv', 'CSV')"),
    Attack("executable", "SELECT * FROM executable('touch {target}', 'TSV', 'x String')"),
    Attack("system-stop-merges", "SYSTEM STOP MERGES"),
    Attack("kill-query", "KILL QUERY WHERE 1"),
    Attack("drop-table", f"DROP TABLE {PROBE}"),
    Attack(
        "create-file-engine",
        "CREATE TABLE holonograph.leak (x String) ENGINE = File(LineAsString, '{target}')",
    ),
    Attack("insert", f"INSERT INTO {PROBE} VALUES ('acme', 99)"),
    Attack("alter-delete", f"ALTER TABLE {PROBE} DELETE WHERE 1"),
    Attack("truncate", f"TRUNCATE TABLE {PROBE}"),
    Attack("settings-readonly-0", f"INSERT INTO {PROBE} SETTINGS readonly = 0 VALUES ('acme', 98)"),
    Attack(
        "settings-readonly-0-file",
        "SELECT * FROM file('{secret}', 'LineAsString') SETTINGS readonly = 0",
    ),
    Attack("multi-statement-insert", f"SELECT 1; INSERT INTO {PROBE} VALUES ('acme', 97)"),
    Attack("multi-statement-system", "SELECT 1; SYSTEM STOP MERGES"),
    Attack("set-readonly", "SET readonly = 0"),
]

PROBE_ROWS = [("acme", 1), ("acme", 2), ("globex", 3)]


class Listener:
    """A TCP port that counts every connection made to it (and answers nothing)."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self._socket.settimeout(0.2)
        self.port = self._socket.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._socket.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._socket.close()


class Host:
    """The files and the port an attack aims at, and the store it must leave alone."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.secret = root / "secret.txt"
        self.secret_text = "host-secret-7f3a9c"
        self.secret.write_text(self.secret_text + "\n")
        self.target = root / "created-by-query.txt"
        self.victim = root / "victim.txt"
        self.victim_text = "original victim content\n"
        self.victim.write_text(self.victim_text)
        self.listener = Listener()

    def sql(self, attack: Attack) -> str:
        hostport = f"127.0.0.1:{self.listener.port}"
        return attack.sql.format(
            secret=self.secret,
            target=self.target,
            victim=self.victim,
            url=f"http://{hostport}",
            hostport=hostport,
        )

    def trace(self, store: Store) -> dict[str, Any]:
        """Everything a refused statement must leave as it was."""
        tables = store.query(
            "SELECT name FROM system.tables WHERE database = 'holonograph'"
            " AND name != 'security_merges' ORDER BY name"
        ).rows
        probe = store.query(f"SELECT tenant_id, v FROM {PROBE} ORDER BY v").rows
        return {
            "target exists": self.target.exists(),
            "victim": self.victim.read_text(),
            "connections": self.listener.connections,
            "tables": tables,
            "probe rows": probe,
        }

    def close(self) -> None:
        self.listener.close()


def create_probe(store: Store) -> None:
    """A tenant-bearing table and a view over it, created by the test (not a migration)."""
    store.command(
        f"CREATE TABLE IF NOT EXISTS {PROBE} (tenant_id LowCardinality(String), v UInt32)"
        " ENGINE = MergeTree ORDER BY v"
    )
    store.command(
        "CREATE VIEW IF NOT EXISTS holonograph.security_probe_view AS"
        f" SELECT tenant_id, v * 10 AS v10 FROM {PROBE}"
    )
    store.insert(PROBE, [list(r) for r in PROBE_ROWS], ["tenant_id", "v"])


MERGES = "holonograph.security_merges"


def merges_run(store: Store) -> bool:
    """True when the store still merges: two new parts of a table become one
    (`OPTIMIZE` is cancelled while merges are stopped)."""
    store.command(f"CREATE TABLE IF NOT EXISTS {MERGES} (v UInt32) ENGINE = MergeTree ORDER BY v")
    store.insert(MERGES, [[1]], ["v"])
    store.insert(MERGES, [[2]], ["v"])
    try:
        store.command(f"OPTIMIZE TABLE {MERGES} FINAL")
    except Exception:
        return False
    parts = store.query(
        "SELECT count() FROM system.parts WHERE database = 'holonograph'"
        " AND table = 'security_merges' AND active"
    ).scalar()
    return bool(parts == 1)


def outputs_free_of(secret: str, *outputs: str) -> Iterator[str]:
    """The outputs that contain `secret` (none, when all is well)."""
    return (out for out in outputs if secret in out)
