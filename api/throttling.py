"""Per-key rate limit: a sliding one-minute window, estimated from two per-minute counters.

Each request adds 1 to its key's counter for the current minute in the shared cache (one atomic
increment, which also reads the previous minute's counter in the same round trip). The requests
of the last 60 seconds are estimated as this minute's count plus the previous minute's, weighted
by the share of the previous minute still inside those 60 seconds (the "sliding window counter"):

    used = current + previous * (1 - elapsed share of this minute)

A fixed window let a client send the limit at the end of one minute and again at the start of the
next: twice the limit within a second. Here the first minute's requests still weigh in full at the
start of the next, so that burst is refused, and room comes back as the previous minute slides
out. The estimate assumes the previous minute's requests were spread evenly: a client sending
fewer than the limit per minute, evenly, is never refused; requests crowded at the very end of a
minute are underweighted later in the next, so the worst 60 seconds can still see up to twice
the limit in total (never in a burst), as with a token bucket. Refused requests count too, so a
client that ignores Retry-After stays refused.

Cheaper than DRF's history-list throttles, and the shared cache makes the limit hold across web
processes. api/fastpath.py and api/pollmemory.py count the policy polls they answer into the same
counters (in the same round trip, or in batches).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.conf import settings
from django.core.cache import cache
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

WINDOW_SECONDS = 60
# Set in the WSGI environ by api/fastpath.py: (counter key, its value, the previous minute's value)
# of a request already counted.
COUNTED = "toolscope.ratelimit_counted"
logger = logging.getLogger(__name__)


def counted_key(*, pk: int, window: int) -> str:
    """The cache entry counting key `pk`'s requests in minute `window` (shared with api/fastpath.py)."""
    return f"ratelimit:{pk}:{window}"


def window_at(now: float) -> tuple[int, float]:
    """The number of the minute `now` falls in, and the share of that minute elapsed (0 to 1)."""
    position = now / WINDOW_SECONDS
    window = int(position)
    return window, position - window


def sliding_count(current: int, previous: int, elapsed: float) -> float:
    """The requests of the last 60 seconds, estimated from this minute's and the previous one's counts."""
    return current + previous * (1.0 - elapsed)


def retry_after(*, current: int, previous: int, elapsed: float, limit: int) -> float:
    """Seconds until one more request fits again, if none is sent meanwhile."""
    room = limit - 1  # the next request counts itself
    if current <= room and previous:
        # The previous minute's share has to shrink: current + previous * (1 - t) <= room.
        return max(0.0, 1.0 - (room - current) / previous - elapsed) * WINDOW_SECONDS
    # This minute alone is over: wait into the next, where its count is the previous one's.
    share = 1.0 - room / current if current else 0.0
    return (1.0 - elapsed + share) * WINDOW_SECONDS


def _count(key: str, previous_key: str) -> tuple[int, int]:
    """Adds 1 to `key`; returns its new value and the value of `previous_key` (0 if absent)."""
    if hasattr(cache, "get_many_and_count"):  # Redis (toolscope.cache.PooledRedisCache): one round trip
        found, current = cache.get_many_and_count([previous_key], counter=key, timeout=WINDOW_SECONDS * 2)
        return current, int(found.get(previous_key) or 0)
    cache.add(key, 0, timeout=WINDOW_SECONDS * 2)
    try:
        current = cache.incr(key)
    except ValueError:  # evicted between add and incr: count this request as the first
        cache.set(key, 1, timeout=WINDOW_SECONDS * 2)
        current = 1
    return current, int(cache.get(previous_key) or 0)


class ApiKeyRateThrottle(BaseThrottle):
    def allow_request(self, request: Request, view: Any) -> bool:
        limit = settings.API_RATE_LIMIT_PER_MINUTE
        api_key = request.auth
        if not limit or api_key is None:
            return True
        window, elapsed = window_at(time.time())
        key = counted_key(pk=api_key.pk, window=window)
        try:
            # A request the fast path handed over was counted there (api/fastpath.py).
            counted = request.META.get(COUNTED)
            if counted and counted[0] == key:
                current, previous = counted[1], counted[2]
            else:
                current, previous = _count(key, counted_key(pk=api_key.pk, window=window - 1))
        except Exception:
            # The cache shares Redis with the broker. With Redis down, ingest must keep accepting
            # (batches wait in PostgreSQL for the sweeper), so the limit fails open.
            logger.warning("rate limit cache unavailable; allowing the request", exc_info=True)
            return True
        if sliding_count(current, previous, elapsed) <= limit:
            return True
        self._retry_after = retry_after(current=current, previous=previous, elapsed=elapsed, limit=limit)
        return False

    def wait(self) -> float | None:
        return getattr(self, "_retry_after", None)
