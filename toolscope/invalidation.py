"""Exact invalidation of shared-cache entries that web processes keep in their own memory.

api/pollmemory.py keeps what a warm policy poll needs (a key's verification, a label's ETag) in
each web process, so the poll needs no Redis round trip. A publish, a label move or a revocation
must still be seen by every process on the very next request after the request that made it has
returned. Redis tells each process what changed; leases and a barrier make "before returning"
hold:

- **Subscription** (per web process, a thread): one RESP3 connection with
  `CLIENT TRACKING ON BCAST PREFIX ...` (Redis pushes the name of every tracked key that changes:
  written, deleted, expired, evicted or flushed) and `SUBSCRIBE` to the deployment's channel
  (channel(): CHANNEL under the cache's key prefix and database number, since pub/sub ignores
  the database a connection selected; tracking does too, which costs at most a spurious drop). Pushes and channel
  messages arrive in the order Redis produced them. A connection error drops the lease and all
  memory; the thread reconnects and starts empty.
- **Messages** on CHANNEL read `<seq> [names...]`; seq comes from `HINCRBY <REGISTRY> seq 1` in
  the same script that publishes. A subscriber that has handled message `seq` (dropped the named
  entries, and everything pushed before it) acknowledges it in REGISTRY and, only when `seq` is
  still the latest, takes a **lease**: REGISTRY records Redis's clock + LEASE_MS, the process
  trusts its memory until its own clock, read before asking, + LEASE_MS - MARGIN. Each subscriber
  publishes an empty message every RENEW_SECONDS to keep its lease.
- **Registration**: before subscribing, a subscriber records itself in REGISTRY with no lease
  (its lease "ended" at Redis's current time), so every process the channel reaches has an entry
  there.
- **Barrier** (invalidate_and_wait, called by whoever changed the entries, after the change):
  publishes a message naming what changed, then waits until every subscriber has either
  acknowledged it or provably holds no lease (its entry's lease has ended: it trusts nothing
  until it has handled the message), and the entries so accounted for are at least as many as
  PUBLISH delivered the message to. A subscriber that does not answer (stuck, its connection
  silently gone) is waited out only until its lease ends, once: a later barrier finds its lease
  already over and does not wait for it. So the barrier returns within the longest remaining
  lease (LEASE_MS) at worst, typically within a few milliseconds; LEASE_MS + MARGIN caps it when
  REGISTRY was lost (fewer entries than subscribers).
- **One barrier per transaction** (invalidate_on_commit): the cache changes registered inside a
  transaction are made once it commits, in order, followed by a single barrier for all of them.
  An admin action that revokes 30 keys, or deletes a project and its keys, waits once, not once
  per key; wrap a loop of changes in `transaction.atomic()` to share the barrier.

A lease taken after the barrier's message was published requires that message handled (its seq
is no longer the latest otherwise), and a lease taken before it is either acknowledged or waited
out: when the barrier returns, no process trusts memory that predates the change.

Changes made without the barrier (a raw cache delete, an entry expiring) still reach every
process through tracking, but asynchronously (normally well under a millisecond). Limits: clocks
must run at the same rate to within MARGIN per LEASE_MS; if REGISTRY itself is lost (evicted,
deleted) while a subscriber's connection is silently broken, that subscriber may trust its memory
until its lease ends (≤ LEASE_MS) without the barrier waiting for it. Redis 6+ is required; on an
older or restricted Redis (no CLIENT TRACKING, EVAL or PUBLISH) subscriptions fail and polls use
the round trip.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from django.core.cache import caches
from django.db import transaction

from toolscope.outage_log import OutageLog

logger = logging.getLogger(__name__)

LEASE_MS = 2000
MARGIN = 0.25  # seconds a lease is trusted less than Redis records it
RENEW_SECONDS = 0.5
TICK_SECONDS = 0.1  # how often a subscription runs its owner's periodic work (rate-count flushes)
REGISTRY = "memory:registry"
CHANNEL = "memory:invalidate"
RETRY_SECONDS = (0.1, 0.5, 1, 2, 5)

_NOW_MS = "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) "
# KEYS[1] registry; ARGV channel, payload after the seq. Fields: `seq`, and per subscriber
# "<ack> <lease end>". Also forgets subscribers whose lease ended over a minute ago (stopped
# processes), but never so many that fewer entries than subscribers remain: a process still
# subscribed but hung keeps an entry, or a stopped one's stands in for it (the barrier counts them).
PUBLISH = _NOW_MS + """
local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
local receivers = redis.call('PUBLISH', ARGV[1], seq .. ARGV[2])
local fields = redis.call('HGETALL', KEYS[1])
local spare = (#fields / 2 - 1) - receivers
for i = 1, #fields, 2 do
  if spare <= 0 then break end
  if fields[i] ~= 'seq' then
    local ends = tonumber(string.match(fields[i + 1], ' (%d+)$'))
    if ends < now - 60000 then
      redis.call('HDEL', KEYS[1], fields[i])
      spare = spare - 1
    end
  end
end
return {seq, receivers}
"""
# KEYS[1] registry; ARGV id. A subscriber about to subscribe, holding no lease.
REGISTER = _NOW_MS + """
local old = redis.call('HGET', KEYS[1], ARGV[1])
local acked = old and string.match(old, '^(%d+) ') or '0'
redis.call('HSET', KEYS[1], ARGV[1], acked .. ' ' .. now)
"""
# KEYS[1] registry; ARGV id, seq handled, lease ms. Returns 1 when the lease was granted. An
# entry that is missing (REGISTRY lost since the subscriber registered) may have held a lease:
# it is recreated as if one lasted LEASE_MS more.
ACKNOWLEDGE = _NOW_MS + """
local seq = tonumber(ARGV[2])
local old = redis.call('HGET', KEYS[1], ARGV[1])
local acked, ends = 0, now + tonumber(ARGV[3])
if old then
  acked, ends = string.match(old, '^(%d+) (%d+)$')
  acked, ends = tonumber(acked), tonumber(ends)
end
local granted = 0
if tonumber(redis.call('HGET', KEYS[1], 'seq') or '0') == seq then
  ends, granted = now + tonumber(ARGV[3]), 1
end
redis.call('HSET', KEYS[1], ARGV[1], math.max(acked, seq) .. ' ' .. ends)
return granted
"""
# KEYS[1] registry; ARGV seq. Returns {subscribers that acknowledged seq, those that have not
# and hold no lease, ms until the last unexpired lease of one that has not ends}.
PENDING = _NOW_MS + """
local seq = tonumber(ARGV[1])
local fields = redis.call('HGETALL', KEYS[1])
local acked, lapsed, wait = 0, 0, 0
for i = 1, #fields, 2 do
  if fields[i] ~= 'seq' then
    local a, e = string.match(fields[i + 1], '^(%d+) (%d+)$')
    if tonumber(a) >= seq then acked = acked + 1
    elseif tonumber(e) > now then wait = math.max(wait, tonumber(e) - now)
    else lapsed = lapsed + 1 end
  end
end
return {acked, lapsed, wait}
"""


def redis_cache() -> Any | None:
    """The default cache when it is toolscope's Redis cache (the only one processes share)."""
    from toolscope.cache import PooledRedisCache

    cache = caches["default"]
    return cache if isinstance(cache, PooledRedisCache) else None


def channel(cache: Any) -> str:
    """The cache's invalidation channel: deployments sharing a Redis under different database
    numbers (even with the same KEY_PREFIX) must not hear, nor acknowledge, each other's barriers."""
    db = cache._cache._get_connection_pool(True).connection_kwargs.get("db") or 0
    return f"{cache.make_key(CHANNEL)}:db{db}"


def invalidate_and_wait(*, names: list[str]) -> bool:
    """After changing the cache entries `names` (as given to the cache, unprefixed), make every
    web process drop its memory of them before returning (the barrier above). Returns whether
    every subscriber was heard from (False: one was waited out, or Redis failed).

    Never raises. When the barrier cannot be published or followed (a timeout, possibly after the
    script ran; maxclients; OOM refusing the script's writes; a connection error), other
    processes may still reach Redis and renew their leases, so it does not return at once: it
    waits until LEASE_MS + MARGIN after it started, by when every lease taken before the change
    has ended and any later one was taken after handling the change (tracking pushes it). So the
    guarantee holds whenever the change itself reached Redis, at the cost of that wait (about
    2.25 s, bounded) per failed barrier. Logged once with the traceback, then at most once a
    minute."""
    cache = redis_cache()
    if cache is None:
        return True
    started = time.monotonic()
    try:
        client = cache._cache.get_client(write=True)
        payload = "".join(" " + cache.make_key(name) for name in names)
        seq, receivers = client.eval(PUBLISH, 1, cache.make_key(REGISTRY), channel(cache), payload)
        pause, waited = 0.0005, False
        while True:
            acked, lapsed, wait_ms = client.eval(PENDING, 1, cache.make_key(REGISTRY), seq)
            # Every subscriber has acknowledged or holds no lease (a hung one whose lease ran out
            # cannot answer from memory): nothing to wait for.
            if wait_ms == 0 and acked + lapsed >= receivers:
                if acked < receivers:
                    (logger.warning if waited else logger.debug)(
                        "cache invalidation: %d of %d web processes did not answer; their leases ran out",
                        receivers - acked, receivers)
                return acked >= receivers
            if time.monotonic() - started > LEASE_MS / 1000 + MARGIN:
                logger.warning("cache invalidation: %d of %d web processes did not answer; their leases ran out",
                               receivers - acked, receivers)
                return False
            time.sleep(pause)
            pause, waited = min(pause * 2, 0.02), True
    except Exception:
        _unpublished.failed()
        time.sleep(max(0.0, started + LEASE_MS / 1000 + MARGIN - time.monotonic()))
        return False


_unpublished = OutageLog(
    logger, "cache invalidation could not be published; waited for web processes' leases to run out"
)


class _Batch:
    """The cache changes of one transaction and the names they change (invalidate_on_commit)."""

    def __init__(self) -> None:
        self.changes: list[Callable[[], None]] = []
        self.names: dict[str, None] = {}
        self.done = False

    def run(self) -> None:
        self.done = True
        for change in self.changes:
            try:
                change()
            except Exception:  # as on_commit(robust=True): the other changes and the barrier still run
                logger.warning("cache change after commit failed", exc_info=True)
        invalidate_and_wait(names=list(self.names))


_batches = threading.local()


def invalidate_on_commit(*, change: Callable[[], None], names: list[str]) -> None:
    """Once the current transaction commits (at once outside a transaction): `change()` (the
    cache write that makes `names` current), then the barrier for `names`. The changes registered
    in one transaction all run first, then one barrier covers all their names. A change
    registered in a savepoint that later rolls back still runs if the transaction commits (an
    extra invalidation only costs a cache miss)."""
    connection = transaction.get_connection()
    if not connection.in_atomic_block:
        batch = _Batch()
        batch.changes.append(change)
        batch.names.update(dict.fromkeys(names))
        batch.run()
        return
    batch = getattr(_batches, "current", None)
    # The transaction's batch is the one whose run() is still waiting for this commit (a batch
    # whose transaction rolled back is no longer in the list; a run one is done).
    if batch is None or batch.done or not any(entry[1] == batch.run for entry in connection.run_on_commit):
        batch = _batches.current = _Batch()
        transaction.on_commit(batch.run, robust=True)
    batch.changes.append(change)
    batch.names.update(dict.fromkeys(names))


class Subscription:
    """One process's subscription (see the module docstring): calls `drop(names)` with the
    prefixed names of changed entries, or None for "everything", from its own thread, before it
    acknowledges anything after them; `tick()` every TICK_SECONDS. `trusted_until` (monotonic
    seconds) is when the current lease ends; memory may be used only before it."""

    def __init__(self, cache: Any, *, prefixes: list[str], drop: Callable[[list[str] | None], None],
                 tick: Callable[[], None]) -> None:
        self.cache = cache
        self.prefixes = [cache.make_key(prefix) for prefix in prefixes]
        self.drop = drop
        self.tick = tick
        self.id = uuid.uuid4().hex
        self.trusted_until = 0.0
        self.handling = threading.Lock()  # held while a message is handled (tests hold it to stall one)
        self.leased = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cache-invalidation", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)
        try:
            self.cache._cache.get_client(write=True).hdel(self.cache.make_key(REGISTRY), self.id)
        except Exception:  # the entry is forgotten a minute after its lease ends
            logger.debug("could not remove subscriber %s", self.id, exc_info=True)

    def _run(self) -> None:
        failures = 0  # in a row, counting only those of a subscription that never got a lease
        while not self._stopped.is_set():
            connection = None
            try:
                connection = self._connect()
                self._listen(connection)
            except Exception:
                # A connection that opens but cannot serve (EVAL or PUBLISH refused, messages never
                # coming back) fails within a moment every time: only a lease shows it worked.
                failures = 1 if self.leased.is_set() else failures + 1
                if failures == 1:
                    logger.warning("cache invalidation subscription lost; polls use the round trip", exc_info=True)
                else:  # retrying with backoff; said once above
                    logger.debug("cache invalidation subscription still failing", exc_info=True)
            finally:
                self._distrust()
                if connection is not None:
                    connection.disconnect()
            self._stopped.wait(RETRY_SECONDS[min(failures, len(RETRY_SECONDS)) - 1] if failures else 0)

    def _connect(self) -> Any:
        pool = self.cache._cache._get_connection_pool(True)
        connection = pool.connection_class(**{**pool.connection_kwargs, "protocol": 3})
        try:
            return self._subscribe(connection)
        except BaseException:
            connection.disconnect()  # else its subscription outlives it until the socket is collected
            raise

    def _subscribe(self, connection: Any) -> Any:
        connection.connect()
        connection._parser.pubsub_push_handler_func = _same
        connection._parser.invalidation_push_handler_func = _same
        prefixes = [part for prefix in self.prefixes for part in ("PREFIX", prefix)]
        connection.send_command("CLIENT", "TRACKING", "ON", "BCAST", *prefixes)
        if connection.read_response() not in (b"OK", "OK"):
            raise ConnectionError("CLIENT TRACKING refused")
        self.cache._cache.get_client(write=True).eval(REGISTER, 1, self.cache.make_key(REGISTRY), self.id)
        connection.send_command("SUBSCRIBE", channel(self.cache))
        reply = connection.read_response(push_request=True)
        while reply and reply[0] == b"invalidate":  # a change pushed before the answer: memory is dropped below
            reply = connection.read_response(push_request=True)
        if not reply or reply[0] != b"subscribe":
            raise ConnectionError(f"unexpected reply to SUBSCRIBE: {reply!r}")
        self.drop(None)  # from here on every change is pushed; memory filled before is dropped
        return connection

    def _listen(self, connection: Any) -> None:
        client = self.cache._cache.get_client(write=True)
        registry, renewals = self.cache.make_key(REGISTRY), channel(self.cache)
        now = time.monotonic()
        renew_at, tick_at, heard = now, now, now
        while not self._stopped.is_set():
            now = time.monotonic()
            if now >= renew_at:
                client.eval(PUBLISH, 1, registry, renewals, "")
                renew_at = now + RENEW_SECONDS
            if now >= tick_at:
                self.tick()
                tick_at = now + TICK_SECONDS
            if now - heard > LEASE_MS / 1000:  # not even our own renewals come back: a dead connection
                raise ConnectionError("no message on the invalidation channel")
            if connection.can_read(timeout=max(0.0, min(renew_at, tick_at) - time.monotonic())):
                message = connection.read_response(push_request=True)
                heard = time.monotonic()
                with self.handling:
                    self._handle(message, client, registry)

    def _handle(self, message: Any, client: Any, registry: str) -> None:
        kind = message[0] if isinstance(message, list) and message else None
        if kind == b"invalidate":
            names = message[1]
            self.drop(None if names is None else [name.decode() for name in names])
        elif kind == b"message":
            seq, *names = message[2].decode().split(" ")
            if names:
                self.drop(names)
            asked = time.monotonic()
            if client.eval(ACKNOWLEDGE, 1, registry, self.id, seq, LEASE_MS) == 1:
                self.trusted_until = asked + LEASE_MS / 1000 - MARGIN
                self.leased.set()

    def _distrust(self) -> None:
        self.trusted_until = 0.0
        self.leased.clear()
        self.drop(None)


def _same(response: Any) -> Any:
    return response
