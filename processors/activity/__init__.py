"""Arrivals and rejections per minute (the web UI's live ingest rate)."""
