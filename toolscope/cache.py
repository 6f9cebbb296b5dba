"""The shared cache on Redis, reusing its client, with a one-round-trip read for policy polls.

Django's RedisCache builds a new redis.Redis for every operation; redis-py's constructor (a
170-entry case-insensitive callback table) costs more CPU than the round trip it prepares. Django
keeps one cache instance per thread, so each instance here keeps its client (one per connection
pool) for good. redis-py's pool notices a fork and opens new connections in the child, so a client
created before a web server forks its workers stays safe.
"""

from __future__ import annotations

import os
import pickle
from typing import Any

from django.core.cache.backends.redis import RedisCache, RedisCacheClient, RedisSerializer
from django.utils.functional import cached_property

PACKED_SIZE = 1024


class PooledRedisCacheClient(RedisCacheClient):
    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        index = self._get_connection_pool_index(write)
        clients = self.__dict__.setdefault("_clients", {})
        client = clients.get(index)
        if client is None:
            client = clients[index] = self._client(connection_pool=self._get_connection_pool(write))
        return client


class PooledRedisCache(RedisCache):
    """RedisCache with a reused client, plus get_many_and_count for the policy poll (api/fastpath.py)."""

    def __init__(self, server: Any, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = PooledRedisCacheClient
        self._connection: tuple[int, Any] | None = None
        # (keys, counter, timeout) -> those commands in RESP: a poll repeats the same few.
        self._packed: dict[tuple, bytes] = {}

    def get_many_and_count(self, keys: list[str], *, counter: str | None, timeout: int) -> tuple[dict[str, Any], int]:
        """get_many(keys) and, in the same round trip, add 1 to the integer `counter` (created
        with `timeout` seconds to live if absent, as api/throttling.py's add + incr do). Returns
        the values found and the counter's new value (0 without a counter)."""
        request = self._packed.get((*keys, counter, timeout))
        if request is None:
            request = self._pack(keys, counter, timeout)
        values, *counted = self._exchange(request, 1 if counter is None else 3)
        loads = self._loads
        found = {key: loads(value) for key, value in zip(keys, values, strict=True) if value is not None}
        return found, int(counted[-1]) if counted else 0

    def _pack(self, keys: list[str], counter: str | None, timeout: int) -> bytes:
        commands = [("MGET", *(self.make_key(key) for key in keys))]  # names built here: nothing to validate
        if counter is not None:
            name = self.make_key(counter)
            commands += [("SET", name, "0", "EX", str(timeout), "NX"), ("INCR", name)]
        if len(self._packed) >= PACKED_SIZE:
            self._packed.clear()
        request = self._packed[(*keys, counter, timeout)] = b"".join(map(_packed, commands))
        return request

    @cached_property
    def _loads(self) -> Any:
        serializer = self._cache._serializer
        if type(serializer) is not RedisSerializer:
            return serializer.loads
        # RedisSerializer stores ints as digits and pickles the rest; its loads() tries int()
        # first, and the exception it catches costs more than the pickle. Pickles of protocol 2+
        # start with the PROTO opcode (0x80), which no integer's digits do.
        return lambda value: pickle.loads(value) if value[:1] == b"\x80" else serializer.loads(value)  # noqa: S301

    def _exchange(self, request: bytes, replies: int) -> list[Any]:
        """Sends `request` (packed commands) in one write and reads their `replies`, on a
        connection of this cache instance's own. Django keeps one cache instance per thread, so it
        needs no lock, and it skips the pool's per-borrow bookkeeping and readiness poll, which
        cost more than the round trip on a small machine. Any error closes it; the next call
        reconnects."""
        connection = self._own_connection()
        try:
            connection.send_packed_command([request], check_health=False)
            return [connection.read_response() for _ in range(replies)]
        except BaseException:
            connection.disconnect()
            raise

    def _own_connection(self) -> Any:
        pid = os.getpid()
        if self._connection is None or self._connection[0] != pid:  # none yet, or inherited by a fork
            pool = self._cache._get_connection_pool(True)
            self._connection = (pid, pool.connection_class(**pool.connection_kwargs))
        return self._connection[1]


def _packed(command: tuple[str, ...]) -> bytes:
    """One command in RESP, the protocol's request form (an array of bulk strings)."""
    parts = [arg.encode() for arg in command]
    return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(part), part) for part in parts)
