"""The warm-poll layer in front of Django (api/fastpath.py): it answers a current ETag with the
304 Django would give, without Django or the database, and hands every other request to Django.

Each `serve()` is one web process: the layer's per-process memory is its own, the cache (Redis) is
shared, as between the processes of a production web server.
"""

from __future__ import annotations

import json
import time

import pytest
from django.core.cache import caches

from api.fastpath import policy_revalidation
from tests.admin.builders import make_policy
from tests.factories import make_key
from tests.policies.builders import make_catalog
from tests.policies.wsgi_client import redis_cache, serve  # noqa: F401 - redis_cache is a fixture
from toolscope.invalidation import invalidate_and_wait
from toolscope.telemetry.services.api_keys import api_key_revoke

pytestmark = pytest.mark.usefixtures("redis_cache")


def warm(served, secret: str, etag: str) -> None:
    """The first poll goes to Django, which caches the key's verification and the document."""
    served.get(secret, etag=etag)


@pytest.fixture
def version(policy, publish):
    return publish(policy)


def test_a_warm_304_is_answered_without_django_or_a_query(agent_key, version, django_assert_num_queries):
    served = serve()
    warm(served, agent_key.secret, version.etag)
    with django_assert_num_queries(0):
        answer = served.get(agent_key.secret, etag=version.etag)
    assert (answer.status, answer.body, answer.by_django) == (304, b"", False)
    assert answer.headers["ETag"] == version.etag


@pytest.mark.parametrize("https", [False, True])
def test_the_304_carries_the_headers_django_gives_it(agent_key, version, settings, https):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SECURE_HSTS_SECONDS = 3600
    meta = {"HTTP_X_FORWARDED_PROTO": "https"} if https else {}
    served = serve()
    warm(served, agent_key.secret, version.etag)
    fast = served.get(agent_key.secret, etag=version.etag, **meta)
    generation = f"policy:generation:{version.project_id}"
    caches["default"].delete(generation)  # the next one must go to Django
    invalidate_and_wait(names=[generation])  # and not be answered from memory either
    slow = served.get(agent_key.secret, etag=version.etag, **meta)
    assert (fast.by_django, slow.by_django) == (False, True)
    assert (fast.status, slow.status) == (304, 304)
    assert fast.headers == slow.headers
    assert ("Strict-Transport-Security" in fast.headers) is https


def test_a_publish_reaches_every_process_at_once(agent_key, policy, tools, publish):
    old = publish(policy)
    processes = [serve(), serve()]
    for served in processes:
        warm(served, agent_key.secret, old.etag)
        assert served.get(agent_key.secret, etag=old.etag).status == 304
    policy.always_on.add(tools["git_diff"])
    new = publish(policy)
    for served in processes:
        answer = served.get(agent_key.secret, etag=old.etag)
        assert (answer.status, answer.headers["ETag"]) == (200, new.etag)
        assert json.loads(answer.body)["selection"]["always_on"] == ["bash", "git_diff", "read_file"]
    for served in processes:
        assert served.get(agent_key.secret, etag=new.etag).status == 304


def test_a_rollback_is_served_on_the_next_poll(agent_key, policy, tools, publish, move):
    first = publish(policy)
    policy.always_on.add(tools["git_diff"])
    second = publish(policy)
    served = serve()
    warm(served, agent_key.secret, second.etag)
    assert served.get(agent_key.secret, etag=second.etag).status == 304
    move(first)
    answer = served.get(agent_key.secret, etag=second.etag)
    assert (answer.status, answer.headers["ETag"]) == (200, first.etag)
    assert served.get(agent_key.secret, etag=first.etag).status == 304


def test_a_revoked_key_gets_djangos_401_on_its_next_poll(agent_key, version, django_capture_on_commit_callbacks):
    served = serve()
    warm(served, agent_key.secret, version.etag)
    assert served.get(agent_key.secret, etag=version.etag).by_django is False
    with django_capture_on_commit_callbacks(execute=True):
        api_key_revoke(api_key=agent_key.api_key)
    answer = served.get(agent_key.secret, etag=version.etag)
    assert (answer.status, answer.by_django) == (401, True)
    assert json.loads(answer.body) == {"detail": "The API key is unknown or revoked.", "code": "authentication_failed"}


def test_a_key_of_another_project_never_gets_a_304_for_this_projects_etag(other_project, version, publish):
    make_catalog(other_project, ["globex_deploy"])
    theirs = publish(make_policy(other_project))
    their_key = make_key(other_project, scopes=["policy:read"])
    served = serve()
    warm(served, their_key.secret, theirs.etag)
    assert served.get(their_key.secret, etag=theirs.etag).status == 304
    answer = served.get(their_key.secret, etag=version.etag)
    assert (answer.status, answer.headers["ETag"]) == (200, theirs.etag)
    assert json.loads(answer.body)["project"] == "globex"


def test_a_key_without_the_scope_keeps_getting_djangos_403(project, version):
    ingest_only = make_key(project, scopes=["ingest"])
    served = serve()
    for _ in range(3):  # the key's verification is cached after the first
        answer = served.get(ingest_only.secret, etag=version.etag)
        assert (answer.status, answer.by_django) == (403, True)
        assert json.loads(answer.body)["detail"] == (
            f"This API key lacks the 'policy:read' scope. A project admin makes a key with it on the dashboard's "
            f"Keys page (/p/{project.slug}/keys/).")


def test_the_rate_limit_counts_each_poll_once_and_django_answers_the_429(agent_key, version, settings):
    settings.API_RATE_LIMIT_PER_MINUTE = 3
    if time.time() % 60 > 55:  # keep the four polls inside one rate-limit window
        time.sleep(60 - time.time() % 60 + 0.1)
    served = serve()
    answers = [served.get(agent_key.secret, etag=version.etag) for _ in range(4)]
    assert [a.status for a in answers] == [304, 304, 304, 429]
    assert [a.by_django for a in answers] == [True, False, False, True]
    assert int(answers[-1].headers["Retry-After"]) >= 1


@pytest.mark.parametrize(
    ("query", "meta", "status"),
    [
        ("label=production", {}, 200),  # no If-None-Match: the document
        ("label=../production", {"HTTP_IF_NONE_MATCH": "x"}, 400),
        ("label=staging", {"HTTP_IF_NONE_MATCH": "x"}, 404),
        ("label=production", {"HTTP_IF_NONE_MATCH": '"stale"'}, 200),
        ("label=production", {"HTTP_IF_NONE_MATCH": "x", "HTTP_HOST": "evil.example"}, 400),
    ],
)
def test_what_the_layer_does_not_answer_goes_to_django(agent_key, version, query, meta, status):
    served = serve()
    warm(served, agent_key.secret, version.etag)
    answer = served.get(agent_key.secret, query=query, **meta)
    assert (answer.status, answer.by_django) == (status, True)


def test_with_redis_down_django_answers_from_the_database(agent_key, version, settings):
    settings.CACHES = {"default": {"BACKEND": "toolscope.cache.PooledRedisCache", "LOCATION": "redis://127.0.0.1:1/0"}}
    served = serve()
    answers = [served.get(agent_key.secret, etag=version.etag) for _ in range(3)]
    assert [(a.status, a.by_django) for a in answers] == [(304, True)] * 3


def test_the_layer_is_off_without_the_redis_cache_or_with_other_middleware(settings):
    app = object()
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    assert policy_revalidation(app) is app
    settings.CACHES = {"default": {"BACKEND": "toolscope.cache.PooledRedisCache", "LOCATION": "redis://127.0.0.1:1/0"}}
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, "django.middleware.gzip.GZipMiddleware"]
    assert policy_revalidation(app) is app
