"""What a client is answered, for both transports: an export outcome becomes the OTLP
response (`partial_success` when spans were rejected), and any error from the export
path goes through the one mapping to a gRPC status code and an HTTP status, and to
the reason it is counted and logged under (`refusal_reason`: a fixed vocabulary,
never request data)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import grpc
from google.protobuf import duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceResponse as PB2ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess as PB2ExportTracePartialSuccess,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse as PB2ExportTraceServiceResponse,
)

from ingest.errors import (
    Backpressure,
    BodyTooSlow,
    DecodeError,
    Forbidden,
    IngestError,
    MalformedHttp,
    PayloadTooLarge,
    RateLimited,
    ReadTimeout,
    RetryableError,
    Unauthenticated,
    Unavailable,
    UnsupportedMediaType,
)
from ingest.export.handler import ExportOutcome


def response_for(outcome: ExportOutcome) -> PB2ExportTraceServiceResponse:
    """A traces request's answer: `partial_success.rejected_spans` when some were."""
    response = PB2ExportTraceServiceResponse()
    if outcome.rejected_spans:
        response.partial_success.CopyFrom(
            PB2ExportTracePartialSuccess(
                rejected_spans=outcome.rejected_spans, error_message=outcome.error_message
            )
        )
    return response


def logs_response_for(outcome: ExportOutcome) -> PB2ExportLogsServiceResponse:
    """A logs request's answer: `partial_success.rejected_log_records` when some were."""
    response = PB2ExportLogsServiceResponse()
    if outcome.rejected_spans:
        partial = response.partial_success
        partial.rejected_log_records = outcome.rejected_spans
        partial.error_message = outcome.error_message
    return response


@dataclass(frozen=True)
class Failure:
    grpc_code: grpc.StatusCode
    http_status: int
    message: str
    retry_after: float | None

    def rpc_status(self) -> status_pb2.Status:
        """google.rpc.Status with RetryInfo for retryable failures, as OTLP specifies."""
        status = status_pb2.Status(code=self.grpc_code.value[0], message=self.message)
        if self.retry_after is not None:
            seconds = int(self.retry_after)
            nanos = int((self.retry_after - seconds) * 1e9)
            info = error_details_pb2.RetryInfo(
                retry_delay=duration_pb2.Duration(seconds=seconds, nanos=nanos)
            )
            status.details.add().Pack(info)
        return status

    def retry_after_header(self) -> dict[str, str]:
        if self.retry_after is None:
            return {}
        return {"Retry-After": str(max(1, math.ceil(self.retry_after)))}


def classify(error: Exception) -> Failure:
    """Classify any exception from the export path; unknown ones are retryable."""
    message = str(error) or type(error).__name__
    if isinstance(error, PayloadTooLarge):
        return Failure(grpc.StatusCode.RESOURCE_EXHAUSTED, 413, message, None)
    if isinstance(error, UnsupportedMediaType):
        return Failure(grpc.StatusCode.INVALID_ARGUMENT, 415, message, None)
    if isinstance(error, Unauthenticated):
        return Failure(grpc.StatusCode.UNAUTHENTICATED, 401, message, None)
    if isinstance(error, Forbidden):
        return Failure(grpc.StatusCode.PERMISSION_DENIED, 403, message, None)
    if isinstance(error, DecodeError):
        return Failure(grpc.StatusCode.INVALID_ARGUMENT, 400, message, None)
    if isinstance(error, Backpressure):
        return Failure(grpc.StatusCode.RESOURCE_EXHAUSTED, 429, message, error.retry_after)
    if isinstance(error, ReadTimeout):
        return Failure(grpc.StatusCode.DEADLINE_EXCEEDED, 408, message, error.retry_after)
    if isinstance(error, Unavailable):
        return Failure(grpc.StatusCode.UNAVAILABLE, 503, message, error.retry_after)
    if isinstance(error, RetryableError):
        return Failure(grpc.StatusCode.UNAVAILABLE, 503, message, error.retry_after)
    if isinstance(error, IngestError):
        return Failure(grpc.StatusCode.INVALID_ARGUMENT, 400, message, None)
    return Failure(grpc.StatusCode.UNAVAILABLE, 503, f"internal error: {message}", 1.0)


# Why a request was refused, as metrics label it and the refusal log counts it.
MALFORMED_HTTP = "malformed HTTP request"
INTERNAL_ERROR = "internal error"
CLIENT_GONE = "client went away"
# The client sent what can never pass (or too slowly): its own doing, summarised on
# the log. The other reasons are the receiver's state (overload, a broker down).
CLIENT_REASONS = frozenset(
    {
        MALFORMED_HTTP,
        "malformed body",
        "too large",
        "unsupported media type",
        "unauthenticated",
        "forbidden",
        "body timeout",
        "body too slow",
        "invalid",
        CLIENT_GONE,
    }
)
REFUSAL_REASONS = CLIENT_REASONS | {"busy", "rate limited", "unavailable", INTERNAL_ERROR}


def refusal_reason(error: BaseException) -> str:
    """The reason of `REFUSAL_REASONS` an error from the edge or the export path is
    counted under; anything unforeseen is an internal error."""
    for kind, reason in _REASONS:
        if isinstance(error, kind):
            return reason
    return INTERNAL_ERROR


_REASONS: tuple[tuple[type[BaseException], str], ...] = (
    (PayloadTooLarge, "too large"),
    (UnsupportedMediaType, "unsupported media type"),
    (Unauthenticated, "unauthenticated"),
    (Forbidden, "forbidden"),
    (MalformedHttp, MALFORMED_HTTP),
    (DecodeError, "malformed body"),
    (RateLimited, "rate limited"),
    (Backpressure, "busy"),
    (BodyTooSlow, "body too slow"),
    (ReadTimeout, "body timeout"),
    (RetryableError, "unavailable"),
    (IngestError, "invalid"),
    (ConnectionError, CLIENT_GONE),  # mid-body: nothing to answer, nothing of ours broke
)

assert grpc.StatusCode.UNAVAILABLE.value[0] == code_pb2.UNAVAILABLE
