"""Typed configuration of the receiver, defaults in code, validated before any socket
opens. Every field can be set by a `HOLONOGRAPH_*` environment variable; CLI flags
override the environment."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

MIB = 1024 * 1024
_RETENTION = re.compile(r"^(\d+)\s*([hdw])$")
_RETENTION_UNITS = {"h": "HOUR", "d": "DAY", "w": "WEEK"}


def parse_retention(text: str | None) -> tuple[int, str] | None:
    """'30d' -> (30, 'DAY'); None or 'keep' -> None (keep forever)."""
    if text is None or text.strip().lower() in ("", "keep", "forever"):
        return None
    match = _RETENTION.match(text.strip().lower())
    if not match or int(match[1]) <= 0:
        raise ValueError(f"retention {text!r}: use a number with h, d or w (e.g. 30d) or 'keep'")
    return int(match[1]), _RETENTION_UNITS[match[2]]


class ServeConfig(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="HOLONOGRAPH_", extra="forbid")

    host: str = "127.0.0.1"
    grpc_port: int = Field(4317, ge=0, le=65535)
    http_port: int = Field(4318, ge=0, le=65535)
    admin_port: int = Field(0, ge=0, le=65535)
    store: str | None = None
    data_dir: Path = Path("./holonograph-data")
    max_request_bytes: int = Field(64 * MIB, gt=0)
    max_inflight_bytes: int = Field(256 * MIB, gt=0)
    max_batch_rows: int = Field(50_000, gt=0)
    linger_ms: float = Field(0.0, ge=0)
    retention: str | None = None
    status_refresh_seconds: float = Field(60.0, gt=0)

    @field_validator("retention")
    @classmethod
    def _check_retention(cls, value: str | None) -> str | None:
        parse_retention(value)
        return value

    @model_validator(mode="after")
    def _check_limits(self) -> ServeConfig:
        if self.max_inflight_bytes < self.max_request_bytes:
            raise ValueError("max_inflight_bytes must be at least max_request_bytes")
        return self

    def store_url(self) -> str:
        from ingest.store import chdb_url, normalize_store_url

        return normalize_store_url(self.store) if self.store else chdb_url(self.data_dir)
