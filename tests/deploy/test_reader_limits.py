"""The ClickHouse reader profile stops reads where `serve` stops its own read-only
queries (one set of defaults: `ingest.store.limits`), and when the client goes away."""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree

from ingest.store.limits import DEFAULT_READ_LIMITS, READ_OS_THREAD_PRIORITY

USERS = Path(__file__).resolve().parents[2] / "deploy/clickhouse/users.d/holonograph.xml"


def test_the_reader_profile_has_the_default_read_limits() -> None:
    profile = ElementTree.parse(USERS).getroot().find("profiles/holonograph_reader")
    assert profile is not None
    for name, value in DEFAULT_READ_LIMITS.settings().items():
        assert float(profile.findtext(name) or "nan") == value, name
    assert profile.findtext("cancel_http_readonly_queries_on_client_close") == "1"
    assert profile.findtext("os_thread_priority") == str(READ_OS_THREAD_PRIORITY)
