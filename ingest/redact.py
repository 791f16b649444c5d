"""Secrets never printed: passwords in store URLs and bearer/admin tokens.

`redact_url` is exact, for URLs we print ourselves (start-up lines, --json, errors);
`redact` is the net under everything else (an exception message quoting a URL, a
log line): `RedactingFormatter` applies it to every formatted log record, traceback
included.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import urlsplit, urlunsplit

MASK = "***"

_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/@:]*:)[^\s/@]*@")
_BEARER = re.compile(r"(?P<head>\bBearer\s+)[^\s'\",;]+", re.IGNORECASE)
_TOKEN_FIELD = re.compile(
    r"(?P<head>[\"']?\b(?:[a-z_]+_)?(?:token|password)[\"']?\s*[:=]\s*[\"']?)[^\s'\",;&}]+",
    re.IGNORECASE,
)


def redact_url(url: str) -> str:
    """`http://user:secret@host:8123` -> `http://user:***@host:8123`; other URLs as given."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{user}:{MASK}@{host}"))


def redact(text: str) -> str:
    """`text` with URL passwords, bearer tokens and `token=`/`"password": ...` values masked."""
    text = _URL_PASSWORD.sub(rf"\g<head>{MASK}@", text)
    text = _BEARER.sub(rf"\g<head>{MASK}", text)
    return _TOKEN_FIELD.sub(rf"\g<head>{MASK}", text)


class RedactingFormatter(logging.Formatter):
    """A formatter whose output, exception text included, has passed `redact`."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))
