"""The compiled wire reader (`_wire.c`): optional, see `ingest.export.flat`."""

from typing import Any

UNREAD: object
SOURCE: str  # the digest of the _wire.c it was built from (setup.py)

class Event:
    name: str
    attributes: dict[str, Any] | None
    partial: dict[str, Any] | None

class Span:
    name: str
    trace_id: bytes
    span_id: bytes
    end_time_unix_nano: int
    attributes: dict[str, Any] | None
    partial: dict[str, Any] | None
    events: list[Event]

def spans(wire: bytes, /) -> list[list[list[Span]]] | None: ...
