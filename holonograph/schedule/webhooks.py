"""A finding to a webhook: one JSON POST, signed, retried with bounded backoff.

    X-Holonograph-Delivery   the run's id: the same on every attempt (deduplicate on it)
    X-Holonograph-Timestamp  Unix seconds when this attempt was signed
    X-Holonograph-Signature  sha256=<hex HMAC-SHA256(secret, timestamp + "." + body)>

A receiver verifies by recomputing the HMAC over the exact bytes it received and
comparing in constant time (`verify`), and refuses a timestamp too far from its clock
(a replayed delivery). Errors are classified once: a connection failure, a timeout, a
429 or a 5xx is retried (after `backoff_seconds`, doubled each time up to
`max_backoff_seconds`, at most `max_attempts` attempts in all); any other 4xx is
permanent and not retried.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

from holonograph.schedule.config import Webhook
from schemas.jsoncodec import plain

SIGNATURE_HEADER = "X-Holonograph-Signature"
TIMESTAMP_HEADER = "X-Holonograph-Timestamp"
DELIVERY_HEADER = "X-Holonograph-Delivery"
_MAX_REASON = 200

Sleep = Callable[[float], Awaitable[None]]


def sign(secret: bytes, timestamp: int, body: bytes) -> str:
    """The signature header's value for `body` sent at `timestamp`."""
    mac = hmac.new(secret, str(timestamp).encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def verify(
    secret: bytes,
    body: bytes,
    timestamp: str,
    signature: str,
    now: float | None = None,
    tolerance_seconds: float = 300,
) -> bool:
    """What a webhook receiver does: the signature matches and the timestamp is recent."""
    try:
        sent = int(timestamp)
    except ValueError:
        return False
    if abs((time.time() if now is None else now) - sent) > tolerance_seconds:
        return False
    return hmac.compare_digest(sign(secret, sent, body), signature)


@dataclass(frozen=True)
class Delivery:
    """How delivering one finding to one webhook went."""

    webhook: str
    delivered: bool
    attempts: int
    error: str = ""


def body_of(payload: dict[str, Any]) -> bytes:
    return json.dumps(plain(payload), separators=(",", ":"), sort_keys=True).encode()


async def deliver(
    session: aiohttp.ClientSession,
    webhook: Webhook,
    delivery_id: str,
    body: bytes,
    *,
    sleep: Sleep = asyncio.sleep,
    wall: Callable[[], float] = time.time,
) -> Delivery:
    """POST `body` to `webhook` until it answers 2xx, a permanent refusal, or the
    attempts run out. Never raises for the webhook's failure; never logs the secret."""
    delay = webhook.backoff_seconds
    reason = ""
    for attempt in range(1, webhook.max_attempts + 1):
        timestamp = int(wall())
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "holonograph-scheduler",
            DELIVERY_HEADER: delivery_id,
            TIMESTAMP_HEADER: str(timestamp),
            SIGNATURE_HEADER: sign(webhook.secret.reveal(), timestamp, body),
        }
        retry = True
        try:
            async with session.post(
                webhook.url,
                data=body,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=webhook.timeout_seconds),
                allow_redirects=False,
            ) as answer:
                if 200 <= answer.status < 300:
                    return Delivery(webhook.name, True, attempt)
                reason = f"HTTP {answer.status}"
                retry = answer.status == 429 or answer.status >= 500
        except TimeoutError:
            reason = f"no answer within {webhook.timeout_seconds:g} s"
        except aiohttp.ClientError as err:
            reason = f"{type(err).__name__}: {err}"[:_MAX_REASON]
        if not retry:
            return Delivery(webhook.name, False, attempt, f"{reason} (permanent, not retried)")
        if attempt < webhook.max_attempts:
            await sleep(delay)
            delay = min(delay * 2, webhook.max_backoff_seconds)
    return Delivery(webhook.name, False, webhook.max_attempts, reason)
