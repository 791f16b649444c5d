"""Delivery completeness (wire contract section 3), computed in ClickHouse.

emission_records
  -> sql.py  the gap and window SQL (one window-function pass)
  -> job.py  live reads, the materialized refresh (stream_status,
             completeness_windows, completeness_refreshes) and stored reads
"""
