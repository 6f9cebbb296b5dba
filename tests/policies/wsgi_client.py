"""Drives toolscope's WSGI stack as a web server would: the warm-poll layer (api/fastpath.py) in
front of Django's own WSGI handler, with the shared cache on the real Redis.

Django's test client calls the handler below the WSGI layer, so it never meets api/fastpath.py;
these helpers call the WSGI callable itself and record whether Django was reached.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pytest
import redis
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import RequestFactory

from api.fastpath import PolicyRevalidation, policy_revalidation

URL = "/api/v1/policy"


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    by_django: bool


@dataclass
class Served:
    """One web process: the layer over Django, counting the requests that reached Django."""

    layer: PolicyRevalidation
    django_calls: list[str] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)  # of every answer, in order

    def get(self, secret: str | None, *, etag: str | None = None, query: str = "label=production", **meta) -> Answer:
        if secret:
            meta["HTTP_AUTHORIZATION"] = f"Bearer {secret}"
        if etag:
            meta["HTTP_IF_NONE_MATCH"] = etag
        return self.call(RequestFactory().get(f"{URL}?{query}", **meta).environ)

    def call(self, environ: dict) -> Answer:
        calls_before = len(self.django_calls)
        captured: dict = {}

        def start_response(status: str, headers: list[tuple[str, str]], exc_info=None) -> None:
            captured.update(status=int(status.split()[0]), headers=dict(headers))

        body = b"".join(self.layer(environ, start_response))
        self.statuses.append(captured["status"])
        return Answer(captured["status"], captured["headers"], body, len(self.django_calls) > calls_before)


def django_app(calls: list[str]):
    """Django's WSGI handler, without the per-request connection closing that would end the
    test's transaction (what Django's test client does too)."""
    handler = WSGIHandler()

    def app(environ, start_response):
        calls.append(environ["PATH_INFO"])
        request_started.disconnect(close_old_connections)
        request_finished.disconnect(close_old_connections)
        try:
            response = handler(environ, start_response)
            body = b"".join(response)
            response.close()
            return [body]
        finally:
            request_started.connect(close_old_connections)
            request_finished.connect(close_old_connections)

    return app


_started: list[PolicyRevalidation] = []


def serve() -> Served:
    """A new web process's WSGI application (under the settings in force). Its memory and
    invalidation subscription start with its first poll and stop with the redis_cache fixture."""
    calls: list[str] = []
    layer = policy_revalidation(django_app(calls))
    assert isinstance(layer, PolicyRevalidation), "the layer is off under these settings"
    _started.append(layer)
    return Served(layer, calls)


@pytest.fixture
def redis_cache(settings):
    """The shared cache as production configures it, on the test run's Redis. A fresh key prefix
    per test keeps tests apart without flushing a database others may use."""
    broker = urlsplit(os.environ.get("CELERY_BROKER_URL") or "redis://127.0.0.1:6379/15")
    location = f"redis://{broker.netloc}{broker.path or '/15'}"
    prefix = f"test-fastpath-{uuid.uuid4().hex[:8]}"
    settings.CACHES = {"default": {"BACKEND": "toolscope.cache.PooledRedisCache", "LOCATION": location,
                                   "KEY_PREFIX": prefix}}
    yield location
    while _started:
        _started.pop().close()
    client = redis.Redis.from_url(location)
    try:
        names = list(client.scan_iter(match=f"{prefix}:*"))
        if names:
            client.delete(*names)
    finally:
        client.close()
