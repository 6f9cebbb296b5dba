"""Celery tasks: thin wrappers that load ids and call a service."""

from __future__ import annotations

import socket

from celery import shared_task
from django.db import connection

from workers.heartbeat import heartbeat_record


@shared_task(name="workers.ping", ignore_result=False)
def ping() -> dict[str, str]:
    """Round-trip check: proves a worker took the message and reached the database."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return {"pong": socket.gethostname(), "database": connection.vendor}


@shared_task(name="workers.heartbeat", ignore_result=True)
def heartbeat() -> None:
    heartbeat_record()
