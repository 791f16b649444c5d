"""The compiled wire reader (`_wire.c`): optional, see `ingest.export.flat`."""

from typing import Any

UNREAD: object  # a value not read, while a span is read (never in what it gives)
SOURCE: str  # the digest of the _wire.c it was built from (setup.py)

class Event:
    name: str
    values: tuple[Any, ...] | None

class Span:
    name: str
    trace_id: bytes
    span_id: bytes
    end_time_unix_nano: int
    values: tuple[Any, ...] | None
    rest: dict[str, Any] | None
    events: list[Event]

# layout: (span keys, span kinds, event keys, event kinds), `flat.Layout.wire`
def spans(
    wire: bytes, layout: tuple[tuple[str, ...], bytes, tuple[str, ...], bytes], /
) -> list[list[list[Span]]] | None: ...
def untrack(rows: list[list[Any]], /) -> None: ...
