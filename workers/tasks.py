"""Celery tasks: thin wrappers that load ids and call a service."""

from __future__ import annotations

import logging
import random
import socket
import traceback
from datetime import date, timedelta
from typing import Any

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection

from toolscope.heartbeat import heartbeat_record
from toolscope.policies.services import background, embeddings, recommendations, simulation_runs
from toolscope.policies.services.search_history import search_history_refresh_active
from toolscope.telemetry.services import ingest
from toolscope.telemetry.services.batches import batches_sweep
from toolscope.telemetry.services.processing import BatchResult, batch_attempts, batch_mark_failed, batch_process
from toolscope.telemetry.services.quarantine import failure_reason
from toolscope.telemetry.services.repricing import REPRICE_TASK, sessions_reprice
from toolscope.telemetry.services.retention import retention_maintain as retention_run
from toolscope.telemetry.services.rollups import rollups_refresh

logger = logging.getLogger(__name__)


@shared_task(name="workers.ping", bind=True, ignore_result=False)
def ping(self: Any) -> dict[str, str]:
    """Round-trip check: proves a worker (`node`: which one) took the message and reached the
    database; says how the worker's database session commits (PostgreSQL)."""
    reply = {"pong": socket.gethostname(), "node": self.request.hostname or "", "database": connection.vendor}
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SHOW synchronous_commit")
            reply["synchronous_commit"] = cursor.fetchone()[0]
        else:
            cursor.execute("SELECT 1")
    return reply


@shared_task(name="workers.heartbeat", ignore_result=True)
def heartbeat() -> None:
    heartbeat_record()


@shared_task(name="workers.search_history_refresh", ignore_result=True, acks_late=True)
def search_history_refresh() -> int:
    """Relearn tool_search's history of every project active in the last day."""
    return search_history_refresh_active()


@shared_task(name=embeddings.EMBED_TASK, ignore_result=True, acks_late=True)
def tool_embeddings(project_id: int) -> int:
    """Embed (once) the project's definitions tool_search's semantic side has no vector for."""
    return int(embeddings.project_embed(project_id=project_id)["embedded"])


@shared_task(name="workers.tool_embeddings_sweep", ignore_result=True, acks_late=True)
def tool_embeddings_sweep() -> int:
    """What a lost message left: the definitions of projects active in the last day."""
    return embeddings.active_embed()


@shared_task(name=REPRICE_TASK, ignore_result=True, acks_late=True)
def reprice_sessions(project_id: int, model: str = "") -> int:
    """Price a project's stored sessions again after its prices changed (of `model`, when given):
    the requests whose dollars changed."""
    from toolscope.telemetry.models import Project

    project = Project.objects.filter(pk=project_id).first()
    return sessions_reprice(project=project, model=model).changed if project is not None else 0


# A page's background work runs longer than processing (services/background.py).
BACKGROUND_LIMITS = background.BACKGROUND_LIMITS


@shared_task(name=simulation_runs.RUN_TASK, ignore_result=True, acks_late=True, **BACKGROUND_LIMITS)
def simulation_run(simulation_id: int) -> None:
    """Replay a queued simulation (a second delivery finds it claimed and returns; one whose
    project has no free slot goes back to the queue, services/background.py)."""
    simulation_runs.simulation_run(simulation_id=simulation_id)


@shared_task(name=recommendations.RUN_TASK, ignore_result=True, acks_late=True, **BACKGROUND_LIMITS)
def recommendation_run(recommendation_id: int) -> None:
    """Compute a queued recommendation (a second delivery finds it claimed and returns)."""
    recommendations.recommendation_run(recommendation_id=recommendation_id)


# Errors worth another try soon: the database blinked. Anything else may be a bug or bad data;
# it is retried too (a deploy may fix it) but the batch is failed, visible and retryable in the
# admin, after MAX_ATTEMPTS.
TRANSIENT_ERRORS = (OperationalError, InterfaceError)
MAX_ATTEMPTS = 5


class BatchAttemptFailed(Exception):
    """A failed attempt, as Celery logs it: the failure's reason without the batch's values."""


@shared_task(
    name=ingest.PROCESS_TASK,
    bind=True,
    acks_late=True,
    autoretry_for=TRANSIENT_ERRORS,
    retry_backoff=2,
    retry_backoff_max=120,
    retry_jitter=True,
    max_retries=MAX_ATTEMPTS,
    ignore_result=True,
)
def process_batch(self, batch_id: int, day: str | None = None) -> bool:
    # `day`: the batch's expires_on, the one day partition it lies in (None in messages sent
    # before it was added: every day is looked in).
    on = date.fromisoformat(day) if day else None
    try:
        result = batch_process(batch_id=batch_id, day=on, passthrough=(SoftTimeLimitExceeded,))
    except TRANSIENT_ERRORS:
        raise
    except Exception as exc:
        # A time limit, or a failure outside any one event (events that fail are quarantined and
        # never get here). The retry goes alone, without the batches merged into this attempt.
        final = batch_attempts(batch_id=batch_id, day=on) >= MAX_ATTEMPTS
        reason = failure_reason(exc)
        batch_mark_failed(batch_id=batch_id, day=on, error=reason, final=final)
        # The stack, not the message: a database error's message can quote the batch's values.
        logger.error("batch %s failed (final: %s): %s\n%s", batch_id, final, reason,
                     "".join(traceback.format_tb(exc.__traceback__)))
        if final:
            return False
        # Celery logs the retry's exception: give it the reason, not the original message.
        raise self.retry(exc=BatchAttemptFailed(reason), countdown=retry_delay(self.request.retries)) from None
    if result is BatchResult.BUSY:
        # Another worker holds the project: come back soon, without counting an attempt. The
        # message waits in this worker's memory, not in a pool process.
        queue = (self.request.delivery_info or {}).get("routing_key") or settings.INGEST_QUEUE
        process_batch.apply_async((batch_id, day), queue=queue, countdown=random.uniform(0.5, 1.5))
        return False
    return bool(result)


def retry_delay(retries: int) -> float:
    """Exponential backoff with full jitter: 2 s, 4 s, 8 s ... capped at two minutes."""
    return random.uniform(0, min(120, 2 ** (retries + 1)))


@shared_task(name="workers.sweep_batches", ignore_result=True)
def sweep_batches() -> int:
    return len(batches_sweep(
        pending_after=timedelta(seconds=settings.BATCH_SWEEP_PENDING_SECONDS),
        processing_after=timedelta(seconds=settings.BATCH_SWEEP_PROCESSING_SECONDS),
    ))


@shared_task(name="workers.rollup_dirty", ignore_result=True, acks_late=True)
def rollup_dirty() -> int:
    """Rebuild the hours marked for a rebuild (beat, every minute). Processing keeps the rollups
    itself, durations included; marks are repairs an operator or a command asked for."""
    return rollups_refresh()


@shared_task(name="workers.retention_maintain", ignore_result=True, acks_late=True)
def retention_maintain() -> dict[str, int]:
    """Make the days ahead and drop the expired ones (beat, hourly; services/retention.py)."""
    summary = retention_run().summary()
    logger.info("retention: %s", summary)
    return summary
