"""Batch jobs over the ClickHouse store: one sub-package per job, beside what jobs share.

    store tables (written by ingest)
      -> tenants.py          which tenant a job reads when none is named
      -> series/             shared reading: bucketed cells, the change-point core,
                             delivery-loss windows (completeness_windows)
      -> completeness/       delivery completeness -> stream_status, completeness_windows
      -> drift/              change points + attribution -> drift_change_points
      -> variance/           decomposition, verdicts, lifecycle -> variance_readings
      -> conformance/        fixtures: derive, approve, check, suites -> conformance_*
      -> compare/            vendors head to head, per group and paired on the same calls
      -> report/             the dashboards' content as one self-contained HTML page
      -> topology/           inventories, scan (contract vs events vs inventory),
                             bootstrap -> structural_inventories, analysis_events
      -> quarantine.py       what validation rejected (read only)
      -> analysis_events.py  the one writer of analysis_events (drift, variance, topology scans)

`processors` never imports `ingest` (nor `ingest` it): both meet only at `schemas`.
"""
