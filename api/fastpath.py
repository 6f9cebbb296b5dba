"""The warm revalidation of GET /api/v1/policy, answered in front of Django (a WSGI layer).

Agents poll their policy every few seconds, and nearly every poll carries the current ETag and
gets a 304. Through Django that answer costs the request and response objects, eight middleware,
DRF's request wrapping, authentication, throttling and the view: several times what the answer
needs. This layer answers that one case and hands every other request, and every doubt, to Django
untouched:

- from process memory (api/pollmemory.py) when this process has seen the key and the label and
  its invalidation subscription holds a lease (toolscope/invalidation.py): no Redis round trip;
  the poll is counted against the key's rate limit locally and added to Redis in batches;
- otherwise with one pipelined round trip (toolscope.cache.PooledRedisCache.get_many_and_count)
  that reads the key's cached verification (api/keycache.py), the project's generation token and
  the label's entry (policies/services/serving.py), and counts the request against the key's
  rate limit; what it finds current is remembered for the next poll.

It answers 304 only when the key's entry holds a scope that reads policies, names the project
the entries were read for, the label's entry was stored under the current token, and
If-None-Match matches its ETag. Anything else (no entry yet, a revoked key whose entry was
dropped, a publish or label move that replaced the token, the rate limit reached, a document to
send) goes to Django, which renders the answers and errors it always has and fills the cache.

Freshness is decided by Redis: a publish, label move or key change replaces or deletes the entries
there and returns only after every process subscribed has dropped its memory of them (or its lease
has run out), so the next poll anywhere sees it. The headers Django's middleware would add are
computed by that middleware itself (replayed_headers); with any other MIDDLEWARE list the layer
stays off.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qsl

from django.conf import settings
from django.core.cache import caches
from django.core.exceptions import DisallowedHost
from django.core.handlers.wsgi import WSGIRequest

from api.pollmemory import PollMemory
from api.replay import REPLAYED_MIDDLEWARE, replayed_headers
from api.throttling import COUNTED, WINDOW_SECONDS, counted_key, sliding_count, window_at
from api.views.policy import etag_matches
from toolscope.cache import PooledRedisCache
from toolscope.outage_log import OutageLog
from toolscope.policies.services.documents import PRODUCTION_LABEL
from toolscope.policies.services.polls import polls
from toolscope.policies.services.serving import LABEL_PATTERN, policy_served_keys
from toolscope.telemetry.models import Scope
from toolscope.telemetry.services.api_keys import api_key_cache_key, api_key_split

logger = logging.getLogger(__name__)

PATH = "/api/v1/policy"
READ_SCOPES = frozenset({Scope.POLICY_READ.value, Scope.ADMIN.value})
MEMO_SIZE = 4096
# The environ entries Django's get_host() and is_secure() read (with SECURE_PROXY_SSL_HEADER's).
HOST_AND_SCHEME = (
    "HTTP_HOST", "HTTP_X_FORWARDED_HOST", "HTTP_X_FORWARDED_PORT", "SERVER_NAME", "SERVER_PORT", "wsgi.url_scheme",
)
HOSTS_SIZE = 256
# An empty query or a single label=<slug>: LABEL_PATTERN's characters need no decoding.
SIMPLE_QUERY = re.compile(r"(?:label=([-a-zA-Z0-9_]{1,64}))?")

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def policy_revalidation(app: WSGIApp) -> WSGIApp:
    """`app` behind the warm-304 layer, or `app` itself where the layer cannot be exact."""
    if not isinstance(caches["default"], PooledRedisCache):
        return app  # the embedded default and tests' locmem cache: Django answers everything
    if tuple(settings.MIDDLEWARE) != REPLAYED_MIDDLEWARE:
        logger.warning("MIDDLEWARE differs from what api/fastpath.py replays; policy polls go through Django")
        return app
    return PolicyRevalidation(app)


class PolicyRevalidation:
    def __init__(self, app: WSGIApp) -> None:
        self.app = app
        # raw key's cache entry name -> (key pk, project id) from its last cached verification:
        # names the project's entries before this request's own read confirms them.
        self.memo: dict[str, tuple[int, int]] = {}
        self.local = threading.local()
        proxy_header = settings.SECURE_PROXY_SSL_HEADER
        self.host_fields = HOST_AND_SCHEME + ((proxy_header[0],) if proxy_header else ())
        # Those entries' values -> what Django decided (_ask_django); settings are fixed while serving.
        self.hosts: dict[tuple, bool | None] = {}
        self.headers = {secure: replayed_headers(secure) for secure in (False, True)}
        self.unavailable = OutageLog(logger, "policy fast path: cache unavailable")
        # Started by the first poll of each process (a server may fork after loading the app, and
        # the subscription's thread does not survive a fork).
        self.memory: PollMemory | None = None
        self._memory_lock = threading.Lock()
        os.register_at_fork(after_in_child=_forgetting(self))

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == PATH and environ.get("REQUEST_METHOD") == "GET":
            headers = self._not_modified(environ)
            if headers is not None:
                start_response("304 Not Modified", headers)
                return []
        return self.app(environ, start_response)

    def _not_modified(self, environ: dict[str, Any]) -> list[tuple[str, str]] | None:
        """The 304's headers, or None to let Django answer."""
        if_none_match = environ.get("HTTP_IF_NONE_MATCH")
        label = _label(environ.get("QUERY_STRING", ""))
        entry_key = _entry_key(environ.get("HTTP_AUTHORIZATION", ""))
        if not if_none_match or label is None or entry_key is None:
            return None
        secure = self._secure_and_allowed(environ)
        if secure is None:
            return None
        try:
            etag = self._remembered_etag(environ, entry_key, label, if_none_match)
            if etag is False:
                etag = self._current_etag(environ, entry_key, label)
        except Exception:  # Redis trouble: Django has its own fallbacks (the database)
            self.unavailable.failed()  # every poll fails while Redis is down: logged once a minute
            return None
        if etag is None or (if_none_match != etag and not etag_matches(if_none_match, etag)):
            return None
        memo = self.memo.get(entry_key)
        if memo is not None:  # who polls the label (policies/services/polls.py): a dict lookup, mostly
            polls.seen(key_id=memo[0], project_id=memo[1], label=label, etag=etag,
                       store=getattr(self.local, "store", None))
        return [("ETag", etag), *self.headers[secure]]

    def _remembered_etag(self, environ: dict[str, Any], entry_key: str, label: str,
                         if_none_match: str) -> str | bool | None:
        """From process memory: the ETag, None to let Django answer (the rate limit is reached),
        or False when memory cannot tell (Redis can)."""
        memory = self.memory or self._start_memory()
        if memory is None:
            return False
        now = time.time()
        found = memory.etag(entry_key, label, now)
        if found is None:
            return False
        pk, etag = found
        if if_none_match != etag and not etag_matches(if_none_match, etag):
            return None  # Django sends the document and counts the request
        limit = settings.API_RATE_LIMIT_PER_MINUTE
        if limit:
            over = memory.counts.admit(pk, limit, now)
            if over is not None:
                environ[COUNTED] = over
                return None
        memory.hits += 1
        return etag

    def _start_memory(self) -> PollMemory | None:
        if not settings.POLICY_POLL_MEMORY:
            return None
        with self._memory_lock:
            if self.memory is None:
                self.memory = PollMemory(caches["default"])
        return self.memory

    def _forget_memory(self) -> None:
        self.memory = None
        self._memory_lock = threading.Lock()

    def close(self) -> None:
        """Stops this process's subscription (tests; a server just exits)."""
        if self.memory is not None:
            self.memory.close()
            self.memory = None

    def _current_etag(self, environ: dict[str, Any], entry_key: str, label: str) -> str | None:
        memory = self.memory
        epoch = memory.epoch if memory is not None else 0  # read before anything is: see remember()
        store = getattr(self.local, "store", None)
        if store is None:  # Django keeps a cache instance per thread; reading its registry costs µs
            store = self.local.store = caches["default"]
        memo = self.memo.get(entry_key)
        if memo is None:  # the key's first poll in this process: one more round trip, once
            found, _ = store.get_many_and_count([entry_key], counter=None, timeout=0)
            memo = self._remember(entry_key, found.get(entry_key))
            if memo is None:
                return None  # not verified yet: Django verifies it and caches the verification
        pk, project_id = memo
        generation_key, label_key = policy_served_keys(project_id=project_id, label=label)
        now = time.time()
        counter, previous_counter, elapsed = _rate_counters(pk, now)
        keys = [entry_key, generation_key, label_key]
        if counter is not None:  # the previous minute's count comes in the same round trip
            keys.append(previous_counter)
        found, used = store.get_many_and_count(keys, counter=counter, timeout=WINDOW_SECONDS * 2)
        previous = 0
        if counter is not None:
            previous = int(found.get(previous_counter) or 0)
            environ[COUNTED] = (counter, used, previous)
        key_entry = found.get(entry_key)
        if key_entry is None or (key_entry[0], key_entry[3]) != memo:
            self._remember(entry_key, key_entry)
            return None
        over = counter is not None and sliding_count(used, previous, elapsed) > settings.API_RATE_LIMIT_PER_MINUTE
        if READ_SCOPES.isdisjoint(key_entry[2]) or over:
            return None
        token, served = found.get(generation_key), found.get(label_key)
        if token is None or served is None or served[0] != token or served[3]:
            return None
        if memory is not None:
            memory.remember(epoch, entry_key, pk=pk, project_id=project_id, label=label, etag=served[1], now=now)
            if counter is not None:
                memory.counts.observe(pk, used, previous, now)
        return served[1]

    def _secure_and_allowed(self, environ: dict[str, Any]) -> bool | None:
        """Whether the request is https as Django sees it; None when Django would not answer a 304
        (a Host outside ALLOWED_HOSTS is a 400, plain http under SECURE_SSL_REDIRECT a redirect).
        Decided by Django's own request code once per combination of the entries it reads."""
        facts = tuple(environ.get(name) for name in self.host_fields)
        if facts not in self.hosts:
            if len(self.hosts) >= HOSTS_SIZE:  # a client sending random Host headers
                self.hosts.clear()
            self.hosts[facts] = _ask_django(environ)
        return self.hosts[facts]

    def _remember(self, entry_key: str, key_entry: tuple | None) -> tuple[int, int] | None:
        if key_entry is None:
            self.memo.pop(entry_key, None)
            return None
        if len(self.memo) >= MEMO_SIZE:
            self.memo.clear()
        memo = self.memo[entry_key] = (key_entry[0], key_entry[3])
        return memo


def _forgetting(layer: PolicyRevalidation) -> Callable[[], None]:
    ref = weakref.ref(layer)

    def forget() -> None:
        alive = ref()
        if alive is not None:
            alive._forget_memory()

    return forget


def _label(query: str) -> str | None:
    """The label Django would read (the last `label`, production by default), if well formed."""
    simple = SIMPLE_QUERY.fullmatch(query)  # what agents send; nothing to decode
    if simple is not None:
        return simple[1] or PRODUCTION_LABEL
    label = PRODUCTION_LABEL
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name == "label":
            label = value
    return label if LABEL_PATTERN.fullmatch(label) else None


def _entry_key(authorization: str) -> str | None:
    """The key-cache entry name for `Authorization: Bearer <key>` (api/auth.py's parsing)."""
    parts = authorization.split()
    if len(parts) != 2 or parts[0].lower() != "bearer":
        return None
    split = api_key_split(parts[1].strip())
    if split is None:
        return None
    prefix, secret = split
    return api_key_cache_key(prefix=prefix, secret_hash=hashlib.sha256(secret.encode()).hexdigest())


def _rate_counters(pk: int, now: float) -> tuple[str | None, str | None, float]:
    """The key's counters for this minute and the previous one, and the share of this minute
    elapsed (api/throttling.py); no counters when the limit is off."""
    if not settings.API_RATE_LIMIT_PER_MINUTE:
        return None, None, 0.0
    window, elapsed = window_at(now)
    return counted_key(pk=pk, window=window), counted_key(pk=pk, window=window - 1), elapsed


def _ask_django(environ: dict[str, Any]) -> bool | None:
    request = WSGIRequest(environ)
    try:
        request.get_host()
    except DisallowedHost:
        return None
    secure = request.is_secure()
    if settings.SECURE_SSL_REDIRECT and not secure:
        return None
    return secure
