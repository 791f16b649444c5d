"""The drift job: change points in a surface's dimensions and what caused each.

series.cells (cells of one surface)
  -> job.py          run_drift: segment each dimension, bracket delivery loss
  -> evidence.py     layer switches, same-bucket contrasts, cohort mix
  -> attribution.py  the source of each change (lens, light source, substrate)
  -> corroborate.py  the same change on other surfaces of one alias
  -> persist.py      drift_change_points (+ the run via analysis_events)
  -> plot.py         the picture (matplotlib, loaded only for --plot)
"""
