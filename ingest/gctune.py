"""Garbage-collector settings for the long-running services (`serve`, `sink`).

Every request allocates tens of thousands of short-lived containers (attribute
dicts, models, rows). With CPython's default threshold (700 allocations) the
collector runs every few spans and its full passes walk everything queued for the
next commit: measured at ~20% of the receiver's CPU. None of those objects form
cycles that outlive a request, so collections can be rare. Start-up objects
(modules, protobuf descriptors, pydantic schemas) are frozen out of every pass.
"""

from __future__ import annotations

import gc

# Young-generation collection every 100k net allocations; older ones rarely.
THRESHOLDS = (100_000, 50, 100)


def tune_for_throughput() -> None:
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
