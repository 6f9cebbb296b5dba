"""Per-key rate limit: a fixed one-minute window counted in the shared cache.

Cheaper than DRF's history-list throttles (one atomic increment per request), and the shared
cache makes the limit hold across web processes.
"""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.core.cache import cache
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

WINDOW_SECONDS = 60


class ApiKeyRateThrottle(BaseThrottle):
    def allow_request(self, request: Request, view: Any) -> bool:
        limit = settings.API_RATE_LIMIT_PER_MINUTE
        api_key = request.auth
        if not limit or api_key is None:
            return True
        now = time.time()
        window = int(now // WINDOW_SECONDS)
        key = f"ratelimit:{api_key.pk}:{window}"
        cache.add(key, 0, timeout=WINDOW_SECONDS * 2)
        try:
            used = cache.incr(key)
        except ValueError:  # evicted between add and incr: count this request as the first
            cache.set(key, 1, timeout=WINDOW_SECONDS * 2)
            used = 1
        self._retry_after = (window + 1) * WINDOW_SECONDS - now
        return used <= limit

    def wait(self) -> float | None:
        return getattr(self, "_retry_after", None)
