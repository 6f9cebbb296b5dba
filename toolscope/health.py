"""/healthz answers while the process runs; /readyz checks what the process depends on.

/readyz is ready when the database and the broker answer and a worker heartbeat is fresh: beat
sends `workers.heartbeat` every WORKER_HEARTBEAT_SECONDS, a worker records it in the shared cache,
and a heartbeat older than WORKER_HEARTBEAT_STALE_SECONDS means workers or beat are down or cut
off from the broker, so accepted batches are not being processed. Two cases are not failures:
the embedded default (tasks run eagerly in the web process, no worker exists) and a web process
younger than the stale limit that has seen no heartbeat yet (a stack starting up). A 503 names
the failing checks in `failing`.
"""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from kombu import Connection

BROKER_TIMEOUT_SECONDS = 2.0
# When this module was imported: in a web process, at its first /readyz (the URLconf loads
# lazily) at the latest, so the start-up grace may outlast the process's real start a little.
_STARTED = time.monotonic()


class NotReady(Exception):
    """A check that answered, with the reason it is not ready and what it saw."""

    def __init__(self, reason: str, detail: dict[str, Any]) -> None:
        super().__init__(reason)
        self.detail = detail


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def _timed(check) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        detail = check()
        ok = True
    except NotReady as exc:
        detail = {"error": str(exc), **exc.detail}
        ok = False
    except Exception as exc:  # any failure makes the dependency not ready; say which
        detail = {"error": f"{type(exc).__name__}: {exc}"}
        ok = False
    return {"ok": ok, "latency_ms": round((time.perf_counter() - started) * 1000, 1), **detail}


def check_database() -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return {"vendor": connection.vendor}


def check_broker() -> dict[str, Any]:
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return {"mode": "eager", "detail": "no broker configured; tasks run in the web process"}
    # A fresh connection, not the app's pool: readiness must reflect the broker now.
    with Connection(settings.CELERY_BROKER_URL, connect_timeout=BROKER_TIMEOUT_SECONDS) as conn:
        conn.ensure_connection(max_retries=1, timeout=BROKER_TIMEOUT_SECONDS)
        return {"mode": "broker", "transport": conn.transport_cls}


def check_worker() -> dict[str, Any]:
    from toolscope.heartbeat import heartbeat_age_seconds
    from toolscope.telemetry.services.batches import worker_metrics

    if settings.CELERY_TASK_ALWAYS_EAGER:
        return {"mode": "eager", "detail": "no workers; tasks run in the web process", "batches": worker_metrics()}
    age = heartbeat_age_seconds()
    limit = settings.WORKER_HEARTBEAT_STALE_SECONDS
    detail = {"last_heartbeat_seconds_ago": None if age is None else round(age, 1), "stale_after_seconds": limit,
              "batches": worker_metrics()}
    if age is None and time.monotonic() - _STARTED < limit:
        return {**detail, "starting": True}
    if age is None or age > limit:
        seen = "no worker heartbeat yet" if age is None else f"the last worker heartbeat is {age:.0f} s old"
        raise NotReady(f"{seen} (limit {limit} s): workers or beat are down or cannot reach the broker", detail)
    return detail


@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    checks = {"database": _timed(check_database), "broker": _timed(check_broker), "worker": _timed(check_worker)}
    failing = [name for name, check in checks.items() if not check["ok"]]
    if failing:
        return JsonResponse({"status": "unavailable", "failing": failing, "checks": checks}, status=503)
    return JsonResponse({"status": "ready", "checks": checks})
