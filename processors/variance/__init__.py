"""Variance of a surface's outcome across its layers, and whether a reading is usable.

series.cells
  -> decompose.py  components + intervals -> variance_readings (+ analysis_events)
  -> verdict.py    viable / delivery-biased / confounded, and the lifecycle
                   (lock, pin, supersede) recorded in analysis_events
"""
