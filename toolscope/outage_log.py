"""Warnings for a failure that repeats on every request while it lasts (Redis down): the first
with its traceback, then at most one per interval, counting the failures it stands for."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable


class OutageLog:
    def __init__(self, logger: logging.Logger, message: str, *, every: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger, self.message, self.every, self.clock = logger, message, every, clock
        self.lock = threading.Lock()
        self.logged_at: float | None = None
        self.unlogged = 0  # failures since the last warning

    def failed(self) -> None:
        """Call from the `except` block that handled the failure."""
        now = self.clock()
        with self.lock:
            first = self.logged_at is None
            if not first and now - self.logged_at < self.every:
                self.unlogged += 1
                return
            count, self.unlogged, self.logged_at = self.unlogged + 1, 0, now
        if first:
            self.logger.warning(self.message, exc_info=True)
        else:
            self.logger.warning("%s (%d times in the last %d s; last: %s)", self.message, count,
                                round(self.every), _last_error())


def _last_error() -> str:
    error = sys.exc_info()[1]
    return f"{type(error).__name__}: {error}" if error is not None else "unknown"
