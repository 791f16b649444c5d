"""What the jobs share: series read from the store and the statistics over them.

request.py          the request fields of a series reading (role, light source, ...)

evaluation_dimensions FINAL
  -> cells.py        one cell per (bucket, layer values), grouped in ClickHouse
  -> changepoint.py  the change-point core (binary segmentation + permutation test)
completeness_windows FINAL
  -> delivery.py     the delivery-loss windows a reading must bracket or weigh
completeness_refreshes
  -> refreshes.py    when those windows were last rewritten
  -> freshness.py    whether they have seen every event a reading reads (stale, by how much)
"""
