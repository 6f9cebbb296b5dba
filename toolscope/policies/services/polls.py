"""Who polls each label: the last fetch or revalidation of a label by each API key, and the ETag
it held (issue 28, item 2: an admin about to move a label sees which agents it reaches).

Polls are the hottest path of the API (api/fastpath.py answers most of them from process
memory), so recording one never touches the database and costs a poll a dictionary lookup: each
web process writes a key's poll of a label to the shared cache at most once per RECORD_SECONDS,
and the entry lives KEEP_SECONDS. Reading looks up the project's keys (one query) and their
entries (one cache round trip). What is shown is therefore at most RECORD_SECONDS old, and a
key that stopped polling drops out after KEEP_SECONDS. Recording never fails a poll: a cache
error is counted and skipped.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.core.cache import cache

from toolscope.telemetry.models import ApiKey

RECORD_SECONDS = 30.0
KEEP_SECONDS = 7 * 24 * 3600
KEEP_DAYS = KEEP_SECONDS // 86400
THROTTLE_SIZE = 10_000  # (key, label) pairs a process remembers; past it, it starts over
_VERSION = re.compile(r'^(?:W/)?"v(\d+)-')


def _entry(project_id: int, label: str, key_id: int) -> str:
    return f"policy:poll:{project_id}:{label}:{key_id}"


class PollLog:
    """A web process's throttle in front of the shared cache."""

    def __init__(self) -> None:
        self._due: dict[tuple[int, str], float] = {}
        self._lock = threading.Lock()
        self.failures = 0

    def seen(self, *, key_id: int, project_id: int, label: str, etag: str, now: float | None = None,
             store: Any = None) -> None:
        now = time.time() if now is None else now
        pair = (key_id, label)
        if now < self._due.get(pair, 0.0):
            return
        with self._lock:
            if now < self._due.get(pair, 0.0):
                return
            if len(self._due) >= THROTTLE_SIZE:
                self._due.clear()
            self._due[pair] = now + RECORD_SECONDS
        try:
            (store or cache).set(_entry(project_id, label, key_id), (etag, now), KEEP_SECONDS)
        except Exception:  # the cache is down: the poll itself is answered all the same
            self.failures += 1

    def forget(self) -> None:
        with self._lock:
            self._due.clear()


polls = PollLog()


@dataclass(frozen=True)
class Poller:
    key_name: str
    key_prefix: str
    last_at: datetime
    etag: str

    @property
    def version(self) -> int | None:
        """The version the key held (its ETag names it), None for an ETag of another form."""
        found = _VERSION.match(self.etag)
        return int(found.group(1)) if found else None


def policy_pollers(*, project_id: int, labels: list[str]) -> dict[str, list[Poller]]:
    """For each label, the keys that fetched it in the last KEEP_DAYS days, the latest first: one
    query and one cache round trip for all of them."""
    keys = list(ApiKey.objects.filter(project_id=project_id).values_list("pk", "name", "prefix"))
    entries = cache.get_many([_entry(project_id, label, pk) for label in labels for pk, _, _ in keys])
    found: dict[str, list[Poller]] = {}
    for label in labels:
        pollers = []
        for pk, name, prefix in keys:
            entry = entries.get(_entry(project_id, label, pk))
            if entry is not None:
                etag, at = entry
                pollers.append(Poller(name, prefix, datetime.fromtimestamp(at, tz=UTC), etag))
        found[label] = sorted(pollers, key=lambda poller: poller.last_at, reverse=True)
    return found
