"""The ingest exception tree, classified once:

    IngestError
    ├── PermanentError            the same request will fail again; do not retry
    │   ├── DecodeError           body is not an OTLP export request
    │   │   └── MalformedHttp     not even HTTP/1.1 we can read (a bad header, chunk)
    │   ├── PayloadTooLarge       over --max-request-bytes after decompression
    │   ├── UnsupportedMediaType  content type or encoding we do not speak
    │   ├── Unauthenticated       no bearer token, or one the tokens file does not know
    │   └── Forbidden             a known token without the scope this needs (`write`)
    └── RetryableError            try again after `retry_after` seconds
        ├── Backpressure          too much memory or queue time in flight
        │   └── RateLimited       the tenant's spans per second are spent
        ├── ReadTimeout           the request did not arrive within the read timeout
        │   └── BodyTooSlow       its body arrived slower than the minimum data rate
        └── Unavailable           store or broker down or too slow

`ingest.edge.answers` is the one place that maps these to gRPC codes and HTTP statuses.

Besides the tree: `ListenError` (a listener cannot bind its port) is a configuration
problem every service reports as such; per-span and per-record problems
(`SpanRejected`, `schemas.records.RecordError`) never leave their step: they become
quarantine rows and dead letters, not errors a client is answered with.
"""

from __future__ import annotations


class IngestError(Exception):
    """Base of every error the export path reports to a client."""


class PermanentError(IngestError):
    pass


class DecodeError(PermanentError):
    pass


class MalformedHttp(DecodeError):
    pass


class PayloadTooLarge(PermanentError):
    pass


class UnsupportedMediaType(PermanentError):
    pass


class Unauthenticated(PermanentError):
    pass


class Forbidden(PermanentError):
    pass


class RetryableError(IngestError):
    def __init__(self, message: str, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Backpressure(RetryableError):
    pass


class RateLimited(Backpressure):
    pass


class ReadTimeout(RetryableError):
    pass


class BodyTooSlow(ReadTimeout):
    pass


class Unavailable(RetryableError):
    pass


class ListenError(OSError):
    """A listener cannot bind host:port (in use, or not an address of this host): a
    configuration problem, reported as such instead of a library traceback."""
