"""Admission on arrival: requests waiting to be decoded count against the in-flight
budget, so overload is refused at once with a retryable status, before decoding."""

from __future__ import annotations

import pytest

from ingest.admission import Admission
from ingest.errors import Backpressure


def test_admits_until_the_budget_then_refuses_with_a_retry_delay() -> None:
    admission = Admission(max_bytes=100, retry_after_seconds=2.0)
    with admission.admit(60):
        with admission.admit(40):
            assert admission.inflight_bytes == 100
            with (
                pytest.raises(Backpressure, match="100 bytes of requests in flight") as refused,
                admission.admit(1),
            ):
                pass
            assert refused.value.retry_after == 2.0
        assert admission.inflight_bytes == 60
    assert admission.inflight_bytes == 0
    assert admission.refused == 1


def test_a_request_larger_than_the_budget_passes_alone() -> None:
    admission = Admission(max_bytes=10)
    with admission.admit(50):
        assert admission.inflight_bytes == 50


def test_budget_is_released_when_the_request_fails() -> None:
    admission = Admission(max_bytes=10)
    with pytest.raises(ValueError), admission.admit(8):
        raise ValueError("decode failed")
    assert admission.inflight_bytes == 0
