"""API-key verification through the shared cache, for endpoints agents poll (GET /api/v1/policy).

A poll that finds nothing new must not touch the database, and verification is a query. A valid
key is remembered under `apikey:<prefix>:<sha256 of the secret>`: the same SHA-256 the key's row
stores as `secret_hash`, so the revoking side can compute the entry's name from the row alone
(api_key_cache_forget) without ever knowing the secret, and a wrong secret can never hit another
key's entry. Entries expire after KEY_SECONDS, which bounds how long a revocation that skipped
api_key_cache_forget (a raw UPDATE, a lost cache call) keeps a key working, and refreshes
`last_used_at` (written by api_key_verify on a miss) at that resolution.

Web processes also keep a verified key in memory for the policy poll (api/pollmemory.py). Any
saved change to a key (its revocation, its name) and its deletion (a project's deletion deletes
its keys) drop its entry once the transaction commits and, before the request that made the
change returns, every process's memory of it (key_changed, connected in api/apps.py).

A request that read the key's row before the change committed must not store what it read after
the entry was dropped (the revoked key would verify from the cache for KEY_SECONDS). Each entry
has a **token** (`apikey-token:<entry>`, a random value): a fill reads it before reading the row
and stores the entry only if the token is still the same (one script on Redis; elsewhere it
checks again after storing and takes the entry back). A change replaces the token before it
drops the entry. A token that expires or is evicted is replaced by a new random one, which no
fill in flight holds.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Callable
from typing import Any

from django.core.cache import cache

from toolscope.invalidation import invalidate_on_commit, redis_cache
from toolscope.telemetry.models import ApiKey, Project
from toolscope.telemetry.services.api_keys import (  # noqa: F401 - the cache key helpers are re-exported
    api_key_cache_forget,
    api_key_cache_key,
    api_key_split,
    api_key_verify,
)

logger = logging.getLogger(__name__)

KEY_SECONDS = 60
TOKEN_SECONDS = 86400  # longer than any fill takes; an expired token only makes one fill miss
# KEYS entry, token; ARGV the token the fill read (serialized), the entry, seconds.
SET_IF_CURRENT = """
if redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3]) end
"""
MEMO_SIZE = 1024
# Per process: the instance built from each cached entry (see _rebuilt).
_instances: dict[str, tuple[tuple, ApiKey]] = {}


def api_key_verify_cached(*, raw: str) -> ApiKey | None:
    """Like api_key_verify; a hit returns a partial ApiKey (pk, name, prefix, scopes, project with
    pk and slug) built without a query, fit for authorising a request and nothing else."""
    return api_key_verify_cached_with(raw=raw, also=None)[0]


def api_key_verify_cached_with(
    *, raw: str, also: Callable[[int], list[str]] | None
) -> tuple[ApiKey | None, dict[str, Any] | None]:
    """api_key_verify_cached, reading in the same cache round trip the keys `also(project_id)`
    names: the entries the request will need next. Returns the key and those keys' values (absent
    keys left out), or None instead of the values when they could not be read along (the first
    request of this process with this key, before its project is known here)."""
    parts = api_key_split(raw.strip())
    if parts is None:
        return None, None
    prefix, secret = parts
    key = api_key_cache_key(prefix=prefix, secret_hash=hashlib.sha256(secret.encode()).hexdigest())
    memo = _instances.get(key)
    extra = also(memo[1].project_id) if also is not None and memo is not None else []
    token_key = _token_key(key)
    found = _cache_call(cache.get_many, [key, token_key, *extra]) or {}
    entry, token = found.pop(key, None), found.pop(token_key, None)
    if entry is not None:
        return _rebuilt(key, prefix, entry), found if extra else None
    if token is None:
        _cache_call(cache.add, token_key, uuid.uuid4().hex, TOKEN_SECONDS)
        token = _cache_call(cache.get, token_key)
    api_key = api_key_verify(raw=raw)  # read after the token: see the module docstring
    if api_key is not None and token is not None:
        entry = (api_key.pk, api_key.name, tuple(api_key.scopes), api_key.project_id, api_key.project.slug)
        _cache_call(_store_if_current, key, entry, token)
    return api_key, None


def _store_if_current(key: str, entry: tuple, token: str) -> None:
    """Store `entry` unless the key changed since the fill read `token`."""
    shared = redis_cache()
    if shared is not None:
        dumps = shared._cache._serializer.dumps
        shared._cache.get_client(write=True).eval(
            SET_IF_CURRENT, 2, shared.make_key(key), shared.make_key(_token_key(key)), dumps(token), dumps(entry),
            KEY_SECONDS,
        )
        return
    cache.set(key, entry, KEY_SECONDS)
    if cache.get(_token_key(key)) != token:  # changed meanwhile: its change may have dropped the entry already
        cache.delete(key)


def _token_key(key: str) -> str:
    return "apikey-token:" + key  # outside "apikey:", which web processes track (api/pollmemory.py)


def _rebuilt(key: str, prefix: str, entry: tuple) -> ApiKey:
    # Building two model instances costs about as much as the rest of a 304; the instance built
    # from an entry is kept per process and reused while the shared cache returns that same entry.
    # Read-only by contract, so sharing it between threads is safe.
    memo = _instances.get(key)
    if memo is not None and memo[0] == entry:
        return memo[1]
    pk, name, scopes, project_id, project_slug = entry
    project = Project(pk=project_id, slug=project_slug)
    api_key = ApiKey(pk=pk, name=name, prefix=prefix, scopes=list(scopes), project=project)
    if len(_instances) >= MEMO_SIZE:
        _instances.clear()
    _instances[key] = (entry, api_key)
    return api_key


def _cache_call(method, *args):
    # With the cache down the key is checked against the database, as every other endpoint does.
    try:
        return method(*args)
    except Exception:
        logger.warning("API key cache unavailable; verifying against the database", exc_info=True)
        return None


def key_changed(sender: type, instance: ApiKey, created: bool = False, **kwargs: Any) -> None:
    """post_save and post_delete of ApiKey (a new key has nothing cached)."""
    if created:
        return
    name = api_key_cache_key(prefix=instance.prefix, secret_hash=instance.secret_hash)

    def change() -> None:
        _cache_call(cache.set, _token_key(name), uuid.uuid4().hex, TOKEN_SECONDS)  # first: fills in flight fail
        _cache_call(cache.delete, name)

    # One barrier for all the keys a transaction changes (a project's deletion, an admin action).
    invalidate_on_commit(change=change, names=[name])
