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

# Young-generation collection every 100k net allocations. The older generations keep
# close to CPython's ratios: cycles that outlive a collection (asyncio tasks and futures
# of requests in flight) must not wait long for a full pass, or they pile up as RSS
# (measured under overload: bench/RESULTS.md).
THRESHOLDS = (100_000, 10, 10)


def tune_for_throughput() -> None:
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
