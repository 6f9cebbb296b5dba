"""/healthz answers while the process runs; /readyz checks what the process depends on."""

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


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def _timed(check) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        detail = check()
        ok = True
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
    from toolscope.telemetry.services.batches import worker_metrics
    from workers.heartbeat import heartbeat_age_seconds

    age = heartbeat_age_seconds()
    return {"last_heartbeat_seconds_ago": None if age is None else round(age, 1), "batches": worker_metrics()}


@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    checks = {"database": _timed(check_database), "broker": _timed(check_broker)}
    # Worker liveness is reported, not required: the API accepts work while workers restart.
    checks["worker"] = _timed(check_worker)
    ready = checks["database"]["ok"] and checks["broker"]["ok"]
    return JsonResponse({"status": "ready" if ready else "unavailable", "checks": checks}, status=200 if ready else 503)
