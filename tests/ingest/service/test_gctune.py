"""The services' GC settings: start-up objects frozen, young collections rare."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from ingest.service.gctune import THRESHOLDS, tune_for_throughput


@pytest.fixture
def restored_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_tuning_freezes_start_up_objects_and_raises_thresholds(restored_gc: None) -> None:
    gc.unfreeze()
    tune_for_throughput()
    assert gc.get_threshold() == THRESHOLDS
    assert gc.get_freeze_count() > 1000  # modules, descriptors, schemas of this process
