"""The jobs a schedule file may name (`job:`), keyed by their module under `processors`.

A converted job joins by one line here: its module's `JOB` (processors/jobs.py). The
key is the module's path below `processors` without a trailing `.job`, so the file
says `completeness`, `conformance.check`, `drift`.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from processors.completeness import job as completeness
from processors.conformance import check, derive
from processors.drift import job as drift
from processors.jobs import Job
from processors.report import job as report
from processors.topology import scan
from processors.variance import decompose

SCHEDULABLE: MappingProxyType[str, Job[Any, Any]] = MappingProxyType(
    {
        "completeness": completeness.JOB,
        "conformance.check": check.JOB,
        "conformance.derive": derive.JOB,
        "drift": drift.JOB,
        "report": report.JOB,
        "topology.scan": scan.JOB,
        "variance.decompose": decompose.JOB,
    }
)
