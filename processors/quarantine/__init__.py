"""What fail-closed validation rejected (`processors.quarantine.job`)."""

from processors.quarantine.job import QuarantineReport, QuarantineSelection, read_quarantine

__all__ = ["QuarantineReport", "QuarantineSelection", "read_quarantine"]
