"""Store errors classified once: the data's fault (permanent) or the store's (retryable).

A permanent error will fail again however often the same rows are sent: a bad value,
a type or schema mismatch, a block the store can never take. Such rows are isolated
(`isolate`) and quarantined or dead-lettered with the store's message; they are never
retried in a loop and never fail the rows they happened to share an insert with. A
retryable error (connection, timeout, too many parts, memory, too many queries) says
nothing about the rows: back off and send them again.

The decision comes from the ClickHouse error code (clickhouse-connect and chDB carry
it as `code` and as `Code: N` in the message) and, for errors raised before anything
reached the store, from the Python exception a value raised while being serialized.
An error this module does not recognise is retryable: retrying valid rows is safe,
quarantining them is not.
"""

from __future__ import annotations

import re
import struct
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from ingest.errors import PermanentError

# The rows can never be stored as sent: values, types, schema, block shape.
PERMANENT_CODES: frozenset[int] = frozenset(
    {
        6,  # CANNOT_PARSE_TEXT
        7,  # INCORRECT_NUMBER_OF_COLUMNS
        8,  # THERE_IS_NO_COLUMN
        9,  # SIZES_OF_COLUMNS_DOESNT_MATCH
        10,  # NOT_FOUND_COLUMN_IN_BLOCK
        15,  # DUPLICATE_COLUMN
        16,  # NO_SUCH_COLUMN_IN_TABLE
        19,  # SIZE_OF_FIXED_STRING_DOESNT_MATCH
        20,  # NUMBER_OF_COLUMNS_DOESNT_MATCH
        26,  # CANNOT_PARSE_QUOTED_STRING
        27,  # CANNOT_PARSE_INPUT_ASSERTION_FAILED
        36,  # BAD_ARGUMENTS
        38,  # CANNOT_PARSE_DATE
        41,  # CANNOT_PARSE_DATETIME
        43,  # ILLEGAL_TYPE_OF_ARGUMENT
        44,  # ILLEGAL_COLUMN
        47,  # UNKNOWN_IDENTIFIER
        50,  # UNKNOWN_TYPE
        53,  # TYPE_MISMATCH
        60,  # UNKNOWN_TABLE
        62,  # SYNTAX_ERROR
        69,  # ARGUMENT_OUT_OF_BOUND
        70,  # CANNOT_CONVERT_TYPE
        72,  # CANNOT_PARSE_NUMBER
        81,  # UNKNOWN_DATABASE
        117,  # INCORRECT_DATA
        128,  # TOO_LARGE_ARRAY_SIZE
        130,  # CANNOT_READ_ARRAY_FROM_TEXT
        131,  # TOO_LARGE_STRING_SIZE
        190,  # SIZES_OF_ARRAYS_DOESNT_MATCH
        248,  # INVALID_PARTITION_VALUE
        321,  # VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE
        349,  # CANNOT_INSERT_NULL_IN_ORDINARY_COLUMN
        376,  # CANNOT_PARSE_UUID
        407,  # DECIMAL_OVERFLOW
    }
)

# The store cannot take anything right now; the same rows will go in later.
RETRYABLE_CODES: frozenset[int] = frozenset(
    {
        3,  # UNEXPECTED_END_OF_FILE
        159,  # TIMEOUT_EXCEEDED
        160,  # TOO_SLOW
        164,  # READONLY
        173,  # CANNOT_ALLOCATE_MEMORY
        202,  # TOO_MANY_SIMULTANEOUS_QUERIES
        203,  # NO_FREE_CONNECTION
        209,  # SOCKET_TIMEOUT
        210,  # NETWORK_ERROR
        225,  # NO_ZOOKEEPER
        236,  # ABORTED
        241,  # MEMORY_LIMIT_EXCEEDED
        242,  # TABLE_IS_READ_ONLY
        243,  # NOT_ENOUGH_SPACE
        252,  # TOO_MANY_PARTS (except the per-block partition limit, below)
        279,  # ALL_CONNECTION_TRIES_FAILED
        319,  # UNKNOWN_STATUS_OF_INSERT
        394,  # QUERY_WAS_CANCELLED
        425,  # SYSTEM_ERROR
        999,  # KEEPER_EXCEPTION
    }
)

# TOO_MANY_PARTS also reports a block spanning more partitions than one insert may
# create: that block can never be inserted as it is, however long one waits.
_BLOCK_PARTITIONS = "too many partitions for single insert block"
_CODE = re.compile(r"\bCode:\s*(\d+)")

# Raised by the standard library under the driver while serializing a value the
# column's type cannot represent; nothing was sent.
_VALUE_ERRORS = (OverflowError, ValueError, struct.error)


class StoreRejected(PermanentError):
    """The store refused every span of a request for good (answered 400)."""


def error_code(error: BaseException) -> int | None:
    """The ClickHouse error code of `error`, from the driver's field or the message."""
    code = getattr(error, "code", None)
    if isinstance(code, int):
        return code
    match = _CODE.search(str(error))
    return int(match[1]) if match else None


def is_permanent(error: BaseException) -> bool:
    """True when the rows that raised `error` can never be stored as they are."""
    # Imported here: only a failed write asks, and the driver is loaded by then (it
    # raised the error); importing it costs every command's start-up otherwise.
    embedded = sys.modules.get("ingest.store.embedded")
    if embedded is not None and isinstance(error, embedded.EmbeddedError):
        return _permanent_code(error)  # a command's own chDB connection refused it
    from clickhouse_connect.driver.exceptions import (
        DatabaseError,
        DataError,
        OperationalError,
        ProgrammingError,
    )

    if isinstance(error, OperationalError):
        return False  # connection lost, timed out: the driver's availability errors
    if isinstance(error, (DataError, ProgrammingError, *_VALUE_ERRORS)):
        return True  # the driver could not serialize a value, or the call can never work
    if isinstance(error, DatabaseError):
        return _permanent_code(error)
    return False


def _permanent_code(error: BaseException) -> bool:
    code = error_code(error)
    if code == 252:
        return _BLOCK_PARTITIONS in str(error).lower()
    return code in PERMANENT_CODES


def describe(error: BaseException) -> str:
    """One line naming the error, for logs and answers."""
    text = str(error).strip()
    line = text.splitlines()[0] if text else type(error).__name__
    return line[:500]


def refusal(error: BaseException) -> str:
    """The reason a quarantine row or dead letter gives for rows the store refused."""
    return f"store refused: {describe(error)}"


T = TypeVar("T")
Write = Callable[[Sequence[T]], Awaitable[None]]


@dataclass
class Isolation(Generic[T]):
    """What `isolate` found: units now written, units refused alone (with the error
    each raised), and the retryable error that stopped the search, if one did (units
    in neither list were not written)."""

    written: list[T] = field(default_factory=list)
    refused: list[tuple[T, BaseException]] = field(default_factory=list)
    unavailable: BaseException | None = None


async def isolate(
    units: Sequence[T],
    write: Write[T],
    error: BaseException,
    on_refused: Callable[[T, BaseException], None] | None = None,
) -> Isolation[T]:
    """Find the units that make a write fail permanently, by bisection.

    `error` is the permanent error writing all of `units` raised. Halves are written
    in order until every failing part is a single unit: one bad unit among n costs
    about 2·log2(n) writes, and every part that goes in stays written. `write` must
    be idempotent (the store's keys collapse rows written twice). `on_refused` sees
    each refused unit as it is found and may raise to stop the search."""
    found: Isolation[T] = Isolation()
    pending: list[tuple[Sequence[T], BaseException]] = [(units, error)]
    while pending:
        part, part_error = pending.pop()
        if len(part) == 1:
            found.refused.append((part[0], part_error))
            if on_refused is not None:
                on_refused(part[0], part_error)
            continue
        middle = len(part) // 2
        halves = [part[:middle], part[middle:]]
        failed: list[tuple[Sequence[T], BaseException]] = []
        for half in halves:
            try:
                await write(half)
            except Exception as err:
                if not is_permanent(err):
                    found.unavailable = err
                    return found
                failed.append((half, err))
            else:
                found.written.extend(half)
        pending.extend(reversed(failed))  # first half searched first
    return found
