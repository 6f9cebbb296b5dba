"""A separate web process for tests: the warm-poll layer (api/fastpath.py) with its memory and
invalidation subscription, over a stand-in for Django that answers 599 (a child process cannot
see the test's database transaction, and only what the layer answers itself matters here).

    python -m tests.policies.poll_process <cache location> <key prefix>

Reads commands on stdin, one per line, and answers one JSON line each:
`lease` (waits until the subscription holds a lease), `poll <secret> <etag>`, `stall` and
`resume` (hold and release the lock the subscription thread handles each message under).
"""

from __future__ import annotations

import json
import os
import sys

import django

DJANGO = 599


def stand_in(environ, start_response):
    start_response(f"{DJANGO} Django", [])
    return [b""]


def main() -> None:
    location, prefix = sys.argv[1:3]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolscope.settings")
    django.setup()
    from django.conf import settings
    from django.test import RequestFactory

    from api.fastpath import policy_revalidation

    settings.CACHES = {"default": {"BACKEND": "toolscope.cache.PooledRedisCache", "LOCATION": location,
                                   "KEY_PREFIX": prefix}}
    settings.ALLOWED_HOSTS = ["testserver"]
    layer = policy_revalidation(stand_in)
    for line in sys.stdin:
        command, *args = line.split()
        if command == "lease":
            answer = {"leased": layer.memory.subscription.leased.wait(10)}
        elif command in ("stall", "resume"):  # its subscription thread cannot handle messages meanwhile
            handling = layer.memory.subscription.handling
            handling.acquire() if command == "stall" else handling.release()
            answer = {}
        else:
            secret, etag = args
            environ = RequestFactory().get("/api/v1/policy?label=production", HTTP_AUTHORIZATION=f"Bearer {secret}",
                                           HTTP_IF_NONE_MATCH=etag).environ
            answer = {"status": _status(layer, environ), "hits": layer.memory.hits if layer.memory else 0}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    layer.close()


def _status(layer, environ) -> int:
    captured = []
    layer(environ, lambda status, headers, exc_info=None: captured.append(int(status.split()[0])))
    return captured[0]


if __name__ == "__main__":
    main()
