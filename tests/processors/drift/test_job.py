"""The drift job's request (`processors.drift.job.AttributeRequest`): the Guide's names,
and the window a request without times reads (a scheduled nightly run)."""

from __future__ import annotations

import datetime as dt

import pytest
from pydantic import ValidationError

from processors.drift.job import AttributeRequest
from processors.jobs import JobError

NOW = dt.datetime(2026, 7, 5, 3, 30, tzinfo=dt.UTC)


def test_the_guides_body_is_the_request() -> None:
    request = AttributeRequest.model_validate(
        {"surfaceId": "classify-intent", "since": "2026-06-01", "until": "2026-07-05",
         "bucket": "day", "changePointDeltaThreshold": 0.15}
    )  # fmt: skip
    analysis = request.for_tenant("acme").analysis(NOW)
    assert (analysis.delta_threshold, analysis.bucket, analysis.tenant_id) == (0.15, "day", "acme")
    assert analysis.since == dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
    with pytest.raises(ValidationError):
        AttributeRequest.model_validate({"surfaceId": "s", "delta_threshold": 0.1, "x": 1})


def test_without_times_the_window_ends_at_the_runs_midnight() -> None:
    hours = AttributeRequest.model_validate({"surfaceId": "s"})
    assert hours.window(NOW) == (dt.datetime(2026, 6, 28, tzinfo=dt.UTC),
                                 dt.datetime(2026, 7, 5, tzinfo=dt.UTC))  # fmt: skip
    days = AttributeRequest.model_validate({"surfaceId": "s", "bucket": "day"})
    assert days.window(NOW)[0] == dt.datetime(2026, 6, 7, tzinfo=dt.UTC)
    late = AttributeRequest.model_validate({"surfaceId": "s", "since": "2026-07-06"})
    with pytest.raises(JobError, match="until must be after since"):
        late.window(NOW)
    with pytest.raises(ValidationError, match="until must be after since"):
        AttributeRequest.model_validate({"surfaceId": "s", "since": "2026-07-06",
                                         "until": "2026-07-05"})  # fmt: skip


def test_any_provenance_reads_every_one() -> None:
    request = AttributeRequest.model_validate({"surfaceId": "s", "provenances": ["any"]})
    assert request.analysis(NOW).provenances == ()
