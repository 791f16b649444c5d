"""Scheduled runs: `serve --schedule FILE` runs jobs on cron expressions through the
one runner (`holonograph.runner`), records each run, and delivers findings to webhooks
and as a metric (docs/schedules.md).

    jobs        the vocabulary of the file's `job:` (one line per job module)
    config      the file, validated at start (a mistake names its line: exit 2)
    records     the lease on a fire time and each run's row in the store
    webhooks    signed JSON POSTs with bounded retries
    scheduler   the clock-driven loop `serve` runs beside the receiver
"""
