"""What a warm policy poll needs, kept in the web process's memory (used by api/fastpath.py).

- `keys`: a key's cache entry name -> (key pk, project id, until) for a key whose cached
  verification holds a scope that reads policies;
- `labels`: project id -> label -> (ETag, until), read under the project's current generation token;
- the rate-limit counts of the polls answered from here (RateCounts).

Entries are filled from a Redis round trip that found them current, and trusted only while the
process's invalidation subscription holds a lease (toolscope/invalidation.py): a publish, a label
move, a key's revocation or change drop them in every process before the request that made them
returns. A fill that raced with an invalidation is discarded (`epoch`). Entries also age out after
MEMORY_SECONDS, so a process goes back to Redis once in a while even if a push were missed.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from api.throttling import WINDOW_SECONDS, counted_key, sliding_count, window_at
from toolscope.invalidation import Subscription

logger = logging.getLogger(__name__)

MEMORY_SECONDS = 60
MEMORY_SIZE = 4096
# The Redis entries the memory mirrors: a key's verification, a project's generation token.
KEY_ENTRIES = "apikey:"
GENERATION_ENTRIES = "policy:generation:"
# Polls counted here and not yet added to the shared counter, per key: at most this many (then the
# poll adds them itself); a background flush every TICK_SECONDS adds them otherwise.
COUNT_BATCH = 100


class RateCounts:
    """Per-key rate-limit counts of polls answered from memory, added to the shared per-minute
    counter (api/throttling.py) in batches. A poll is admitted here only while the sliding estimate
    (api/throttling.py) of the count last read from Redis (plus what this process has sent since)
    plus this process's unsent count, with the previous minute's count last read, stays within the
    limit, and a process never has more than COUNT_BATCH - 1 admitted polls of a key that Redis
    has not counted yet (unsent or on their way): so all processes together admit at most
    (web processes) x (COUNT_BATCH - 1) polls of a key per minute beyond the limit."""

    def __init__(self, cache: Any) -> None:
        self.cache = cache
        self.lock = threading.Lock()
        self.window = 0
        self.unsent: dict[int, int] = {}
        self.sending: dict[int, int] = {}
        self.known: dict[int, int] = {}
        # The previous minute's shared counts, as last read (they change little once it is over).
        self.previous: dict[int, int] = {}

    def admit(self, pk: int, limit: int, now: float) -> tuple[str, int, int] | None:
        """None when the poll is admitted; else (counter, its value with this poll counted, the
        previous minute's) for Django's throttle, which answers 429 (or admits, if the shared
        counts allow it after all)."""
        window, elapsed = window_at(now)
        with self.lock:
            self._roll(window)
            unsent = self.unsent.get(pk, 0) + 1
            previous = self.previous.get(pk, 0)
            if (unsent + self.sending.get(pk, 0) < COUNT_BATCH
                    and sliding_count(self.known.get(pk, 0) + unsent, previous, elapsed) <= limit):
                self.unsent[pk] = unsent
                return None
            self.unsent[pk] = 0
            self._send({pk: unsent})
        used, shared_previous = self._add({pk: unsent}, window)[pk]
        previous = max(previous, shared_previous)  # with the polls this process never sent
        if sliding_count(used, previous, elapsed) <= limit:
            return None
        return counted_key(pk=pk, window=window), used, previous

    def observe(self, pk: int, used: int, previous: int, now: float) -> None:
        """The shared counts a round trip read (api/fastpath.py counts those polls itself)."""
        with self.lock:
            self._roll(window_at(now)[0])
            self.known[pk] = max(self.known.get(pk, 0), used)
            self.previous[pk] = max(self.previous.get(pk, 0), previous)

    def flush(self) -> None:
        with self.lock:
            unsent, window = self.unsent, self.window
            self.unsent = {}
            self._send(unsent)
        if unsent:
            try:
                self._add(unsent, window)
            except Exception:  # as api/throttling.py: with the cache down the limit fails open
                logger.warning("could not add rate-limit counts", exc_info=True)

    def _roll(self, window: int) -> None:
        if window != self.window:  # polls left unsent belong to a minute that is over
            # The minute that just ended, as far as this process knows: the shared count it read
            # plus the polls it admitted and never sent. They weigh in the new minute's estimate.
            previous: dict[int, int] = {}
            if window == self.window + 1:
                for pk in self.known.keys() | self.unsent.keys():
                    previous[pk] = self.known.get(pk, 0) + self.unsent.get(pk, 0)
            self.previous = previous
            self.window, self.unsent, self.sending, self.known = window, {}, {}, {}

    def _send(self, counts: dict[int, int]) -> None:
        # Counted as known at once: until Redis answers, this process must not admit them again.
        for pk, n in counts.items():
            self.sending[pk] = self.sending.get(pk, 0) + n
            self.known[pk] = self.known.get(pk, 0) + n

    def _add(self, counts: dict[int, int], window: int) -> dict[int, tuple[int, int]]:
        """Adds `counts` to the shared counters of `window`; per key, the counter's new value and
        the previous minute's, read in the same round trip."""
        try:
            client = self.cache._cache.get_client(write=True)
            pipe = client.pipeline(transaction=False)
            for pk, n in counts.items():
                name = self.cache.make_key(counted_key(pk=pk, window=window))
                pipe.set(name, 0, ex=WINDOW_SECONDS * 2, nx=True)
                pipe.incrby(name, n)
                pipe.get(self.cache.make_key(counted_key(pk=pk, window=window - 1)))
            replies = pipe.execute()
        finally:
            with self.lock:
                if window == self.window:
                    for pk, n in counts.items():
                        self.sending[pk] -= n
        used = {pk: (int(replies[3 * i + 1]), int(replies[3 * i + 2] or 0)) for i, pk in enumerate(counts)}
        with self.lock:
            if window == self.window:
                for pk, (n, previous) in used.items():
                    self.known[pk] = max(self.known.get(pk, 0), n)
                    self.previous[pk] = max(self.previous.get(pk, 0), previous)
        return used


class PollMemory:
    def __init__(self, cache: Any) -> None:
        self.keys: dict[str, tuple[int, int, float]] = {}
        self.labels: dict[int, dict[str, tuple[str, float]]] = {}
        self.lock = threading.Lock()
        self.epoch = 0
        self.hits = 0  # polls answered from memory (for tests and curiosity)
        self.counts = RateCounts(cache)
        self.key_prefix = cache.make_key(KEY_ENTRIES)
        self.generation_prefix = cache.make_key(GENERATION_ENTRIES)
        self.subscription = Subscription(
            cache, prefixes=[KEY_ENTRIES, GENERATION_ENTRIES], drop=self.drop, tick=self.counts.flush
        )
        self.subscription.start()

    def etag(self, entry_key: str, label: str, now: float) -> tuple[int, str] | None:
        """(key pk, current ETag) when memory knows them and may be trusted, else None."""
        if time.monotonic() >= self.subscription.trusted_until:
            return None
        key = self.keys.get(entry_key)
        if key is None or key[2] < now:
            return None
        served = self.labels.get(key[1], {}).get(label)
        if served is None or served[1] < now:
            return None
        return key[0], served[0]

    def remember(self, epoch: int, entry_key: str, *, pk: int, project_id: int, label: str, etag: str,
                 now: float) -> None:
        """Keep what a round trip found current, unless an invalidation arrived since `epoch` (read
        before the round trip started): what it read may be what that invalidation replaced."""
        until = now + MEMORY_SECONDS
        with self.lock:
            if epoch != self.epoch:
                return
            if len(self.keys) >= MEMORY_SIZE:
                self.keys.clear()
            if len(self.labels) >= MEMORY_SIZE:
                self.labels.clear()
            self.keys[entry_key] = (pk, project_id, until)
            self.labels.setdefault(project_id, {})[label] = (etag, until)

    def drop(self, names: list[str] | None) -> None:
        with self.lock:
            self.epoch += 1
            if names is None:
                self.keys.clear()
                self.labels.clear()
                return
            for name in names:
                if name.startswith(self.key_prefix):
                    self.keys.pop(KEY_ENTRIES + name[len(self.key_prefix):], None)
                elif name.startswith(self.generation_prefix):
                    project = name[len(self.generation_prefix):]
                    self.labels.pop(int(project) if project.isdigit() else project, None)

    def close(self) -> None:
        self.subscription.close()
