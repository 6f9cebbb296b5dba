"""HTTP delivery shared by the background exporter and the synchronous calls: one request, retried
with exponential backoff and full jitter on network errors, 5xx and 429 (honouring Retry-After),
never on other 4xx.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any, Literal

import httpx

USER_AGENT = "toolscope-agent"

#: Retry-After is honoured up to this many seconds unless configured otherwise.
DEFAULT_MAX_RETRY_AFTER = 60.0


@dataclass(frozen=True)
class RetryPolicy:
    """`max_attempts` counts every attempt, the first included; the n-th retry waits a random time
    in [0, min(backoff_max, backoff_base * 2**(n-1))] ("full jitter"), or what Retry-After says."""

    max_attempts: int = 5
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    max_retry_after: float = DEFAULT_MAX_RETRY_AFTER

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.backoff_base < 0 or self.backoff_max < 0 or self.max_retry_after < 0:
            raise ValueError("backoff_base, backoff_max and max_retry_after must be ≥ 0")

    def backoff(self, retry: int) -> float:
        return random.uniform(0.0, min(self.backoff_max, self.backoff_base * (2 ** (retry - 1))))


def is_retryable_status(status: int) -> bool:
    return status == 429 or status >= 500


def parse_retry_after(value: str | None, cap: float) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date), capped."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)  # noqa: UP017 -- the SDK supports Python 3.10
        seconds = (when - datetime.now(timezone.utc)).total_seconds()  # noqa: UP017
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), cap)


@dataclass
class Outcome:
    """How a delivery ended.

    kind: "ok" (a 2xx answer), "rejected" (an answer that must not be retried, e.g. 400/401/413),
    or "gave_up" (retryable failures until attempts ran out, or the wait was interrupted).
    """

    kind: Literal["ok", "rejected", "gave_up"]
    response: httpx.Response | None
    error: str
    attempts: int

    @property
    def retries(self) -> int:
        return self.attempts - 1


def deliver(
    http: httpx.Client,
    method: str,
    url: str,
    *,
    content: bytes | None,
    headers: dict[str, str],
    policy: RetryPolicy,
    wait: Callable[[float], bool],
) -> Outcome:
    """Send one request until it succeeds, is refused for good, or attempts run out.

    `wait(seconds)` sleeps between attempts and returns True to stop retrying (shutdown).
    Never raises for network errors or HTTP statuses.
    """
    response: httpx.Response | None = None
    error = ""
    attempt = 0
    while True:
        attempt += 1
        retry_after: float | None = None
        try:
            response = http.request(method, url, content=content, headers=headers)
        except httpx.TransportError as exc:
            response = None
            error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        else:
            status = response.status_code
            if 200 <= status < 300:
                return Outcome("ok", response, "", attempt)
            error = f"HTTP {status}: {server_message(response)}"
            if not is_retryable_status(status):
                return Outcome("rejected", response, error, attempt)
            retry_after = parse_retry_after(response.headers.get("Retry-After"), policy.max_retry_after)
        if attempt >= policy.max_attempts:
            return Outcome("gave_up", response, error, attempt)
        delay = retry_after if retry_after is not None else policy.backoff(attempt)
        if wait(delay):
            return Outcome("gave_up", response, error, attempt)


def sleep(seconds: float) -> bool:
    time.sleep(seconds)
    return False


def response_json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def server_message(response: httpx.Response, limit: int = 500) -> str:
    """The server's explanation in an error answer: DRF's `detail`, an `error`/`message` field,
    or the body itself, shortened."""
    body = response_json(response)
    if isinstance(body, dict):
        for key in ("detail", "error", "message"):
            value = body.get(key)
            if isinstance(value, str) and value:
                return value[:limit]
        text = json.dumps(body, ensure_ascii=False, default=str)
    else:
        text = response.text if body is None else json.dumps(body, ensure_ascii=False, default=str)
    text = text.strip() or response.reason_phrase or "no explanation"
    return text[:limit]
