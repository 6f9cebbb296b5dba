"""Celery tasks: thin wrappers that load ids and call a service."""

from __future__ import annotations

import logging
import socket

from celery import shared_task
from django.db import InterfaceError, OperationalError, connection

from toolscope.telemetry.services.processing import batch_mark_failed, batch_process
from workers.heartbeat import heartbeat_record

logger = logging.getLogger(__name__)


@shared_task(name="workers.ping", ignore_result=False)
def ping() -> dict[str, str]:
    """Round-trip check: proves a worker took the message and reached the database."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return {"pong": socket.gethostname(), "database": connection.vendor}


@shared_task(name="workers.heartbeat", ignore_result=True)
def heartbeat() -> None:
    heartbeat_record()


# Errors worth another try: the database or broker blinked. Anything else is a bug or bad data
# and fails the batch after its attempts, visible in the admin.
TRANSIENT_ERRORS = (OperationalError, InterfaceError)
MAX_ATTEMPTS = 5


@shared_task(
    name="workers.process_batch",
    bind=True,
    acks_late=True,
    autoretry_for=TRANSIENT_ERRORS,
    retry_backoff=2,
    retry_backoff_max=120,
    retry_jitter=True,
    max_retries=MAX_ATTEMPTS,
    ignore_result=True,
)
def process_batch(self, batch_id: int) -> bool:
    try:
        return batch_process(batch_id=batch_id)
    except TRANSIENT_ERRORS:
        raise
    except Exception as exc:
        batch_mark_failed(batch_id=batch_id, error=f"{type(exc).__name__}: {exc}", final=True)
        logger.exception("batch %s failed", batch_id)
        return False
