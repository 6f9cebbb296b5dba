"""Workers record a heartbeat in the shared cache so /readyz can say when one last ran a task."""

from __future__ import annotations

import time

from django.core.cache import cache

HEARTBEAT_KEY = "workers:heartbeat"


def heartbeat_record() -> float:
    now = time.time()
    cache.set(HEARTBEAT_KEY, now, timeout=None)
    return now


def heartbeat_age_seconds() -> float | None:
    last = cache.get(HEARTBEAT_KEY)
    return None if last is None else max(0.0, time.time() - float(last))
