"""The compare job: vendors (or lens versions, or a substrate column's values) head to
head on one surface, per group and, for multiplex calls, paired on the same calls.

sql.py   the aggregates, computed in ClickHouse over evaluation_events/_dimensions FINAL
  -> job.py  intervals and tests on those aggregates -> schemas.compare.CompareReport
"""
