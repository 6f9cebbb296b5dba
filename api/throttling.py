"""Per-key rate limit: a fixed one-minute window counted in the shared cache.

Cheaper than DRF's history-list throttles (one atomic increment per request), and the shared
cache makes the limit hold across web processes.
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
# Set in the WSGI environ by api/fastpath.py: (counter key, value) of a request already counted.
COUNTED = "toolscope.ratelimit_counted"
logger = logging.getLogger(__name__)


def counted_key(*, pk: int, window: int) -> str:
    """The cache entry counting key `pk`'s requests in minute `window` (shared with api/fastpath.py)."""
    return f"ratelimit:{pk}:{window}"


def _count(key: str) -> int:
    cache.add(key, 0, timeout=WINDOW_SECONDS * 2)
    try:
        return cache.incr(key)
    except ValueError:  # evicted between add and incr: count this request as the first
        cache.set(key, 1, timeout=WINDOW_SECONDS * 2)
        return 1


class ApiKeyRateThrottle(BaseThrottle):
    def allow_request(self, request: Request, view: Any) -> bool:
        limit = settings.API_RATE_LIMIT_PER_MINUTE
        api_key = request.auth
        if not limit or api_key is None:
            return True
        now = time.time()
        window = int(now // WINDOW_SECONDS)
        key = counted_key(pk=api_key.pk, window=window)
        try:
            # A request the fast path handed over was counted there (api/fastpath.py).
            counted = request.META.get(COUNTED)
            used = counted[1] if counted and counted[0] == key else _count(key)
        except Exception:
            # The cache shares Redis with the broker. With Redis down, ingest must keep accepting
            # (batches wait in PostgreSQL for the sweeper), so the limit fails open.
            logger.warning("rate limit cache unavailable; allowing the request", exc_info=True)
            return True
        self._retry_after = (window + 1) * WINDOW_SECONDS - now
        return used <= limit

    def wait(self) -> float | None:
        return getattr(self, "_retry_after", None)
