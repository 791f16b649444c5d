"""Secrets are masked in printed URLs, messages and every formatted log record."""

from __future__ import annotations

import io
import logging

import pytest

from ingest.redact import RedactingFormatter, redact, redact_url
from ingest.store.url import StoreURLError, normalize_store_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://u:secret@host:8123", "http://u:***@host:8123"),
        ("https://reader:p%40ss@ch.example:8443/?x=1", "https://reader:***@ch.example:8443/?x=1"),
        ("http://host:8123", "http://host:8123"),
        ("http://user@host:8123", "http://user@host:8123"),
        ("chdb:///var/lib/holonograph", "chdb:///var/lib/holonograph"),
    ],
)
def test_redact_url_masks_only_the_password(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_redact_masks_urls_tokens_and_bearer_headers_inside_text() -> None:
    text = (
        "cannot reach http://u:hunter2@ch:8123 (Authorization: Bearer abc.DEF-123); "
        '{"read_token": "tok-read", "write_token": "tok-write"} token=plain password: pw1'
    )
    masked = redact(text)
    for secret in ("hunter2", "abc.DEF-123", "tok-read", "tok-write", "plain", "pw1"):
        assert secret not in masked
    assert "http://u:***@ch:8123" in masked
    assert redact("SELECT count() FROM holonograph.evaluation_events") == (
        "SELECT count() FROM holonograph.evaluation_events"
    )


def test_log_records_are_redacted_with_their_traceback() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(RedactingFormatter("%(levelname)s %(message)s"))
    log = logging.getLogger("tests.redact")
    log.addHandler(handler)
    log.propagate = False
    try:
        try:
            raise ConnectionError("store http://w:topsecret@ch:8123 refused")
        except ConnectionError:
            log.exception("job failed against %s", "http://w:topsecret@ch:8123")
    finally:
        log.removeHandler(handler)
    output = stream.getvalue()
    assert "topsecret" not in output
    assert output.count("w:***@ch:8123") >= 2  # the message and the exception
    assert "Traceback" in output


def test_store_url_errors_do_not_quote_the_password() -> None:
    for bad in ("http://u:secret@", "ftp://u:secret@host"):
        with pytest.raises(StoreURLError) as raised:
            normalize_store_url(bad)
        assert "secret" not in str(raised.value)
