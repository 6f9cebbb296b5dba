"""Celery tasks: thin wrappers that load ids and call a service."""

from __future__ import annotations

import logging
import random
import socket
import time
import traceback
import uuid
from datetime import timedelta
from typing import Any

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.core.cache import cache
from django.db import InterfaceError, OperationalError, connection

from toolscope.heartbeat import heartbeat_record
from toolscope.policies.services import recommendations, simulation_runs
from toolscope.policies.services.search_history import search_history_refresh_active
from toolscope.telemetry.services import ingest
from toolscope.telemetry.services.batches import batches_sweep
from toolscope.telemetry.services.processing import BatchResult, batch_attempts, batch_mark_failed, batch_process
from toolscope.telemetry.services.quarantine import failure_reason
from toolscope.telemetry.services.rollups import dirty_hours_pending, rollups_refresh

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


# A page's background work runs longer than processing: a replay of 2,000,000 turns or a
# recommendation over 5,000 sessions takes a minute or two on the simulation queue.
BACKGROUND_LIMITS = {"soft_time_limit": 600, "time_limit": 660}


@shared_task(name=simulation_runs.RUN_TASK, ignore_result=True, acks_late=True, **BACKGROUND_LIMITS)
def simulation_run(simulation_id: int) -> None:
    """Replay a queued simulation (a second delivery finds it claimed and returns)."""
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
def process_batch(self, batch_id: int) -> bool:
    try:
        result = batch_process(batch_id=batch_id, passthrough=(SoftTimeLimitExceeded,))
    except TRANSIENT_ERRORS:
        raise
    except Exception as exc:
        # A time limit, or a failure outside any one event (events that fail are quarantined and
        # never get here). The retry goes alone, without the batches merged into this attempt.
        final = batch_attempts(batch_id=batch_id) >= MAX_ATTEMPTS
        reason = failure_reason(exc)
        batch_mark_failed(batch_id=batch_id, error=reason, final=final)
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
        process_batch.apply_async((batch_id,), queue=queue, countdown=random.uniform(0.5, 1.5))
        return False
    if result:
        rollup_request()
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


# Set while a rollup task is queued and not started yet. Batches that finish meanwhile need no
# task of their own: the queued one claims their marks too. The expiry bounds the damage of a lost
# message; beat's periodic rollup catches any mark left behind.
ROLLUP_QUEUED_KEY = "workers:rollup-queued"
ROLLUP_QUEUED_SECONDS = 30
# When the last rollup started and how long it ran. Batches add their figures to the rollups
# themselves; what a rollup does under load is recompute the busy hour's duration percentiles, a
# scan of the hour's calls that grows as the hour fills. So the next one waits until
# ROLLUP_SPACING x the last one's run time has passed since it started (at least
# ROLLUP_MIN_INTERVAL_SECONDS): percentiles take at most a third of one database core, and lag
# a few run times behind. Capped well below the queued flag's expiry.
ROLLUP_LAST_KEY = "workers:rollup-last"
ROLLUP_SPACING = 3
ROLLUP_MAX_DELAY_SECONDS = 20


def rollup_request() -> None:
    """Queue a rollup unless one is queued already (with the cache down, queue one anyway), spaced
    after the last one (ROLLUP_LAST_KEY). The flag holds the queued task's id: only that task
    clears it when it starts."""
    task_id = str(uuid.uuid4())
    try:
        if not cache.add(ROLLUP_QUEUED_KEY, task_id, timeout=ROLLUP_QUEUED_SECONDS):
            return
    except Exception:
        logger.warning("cache unavailable; queueing a rollup without checking", exc_info=True)
    try:
        rollup_dirty.apply_async(queue=settings.INGEST_QUEUE, countdown=rollup_delay(), task_id=task_id)
    except Exception:
        # The batch is done and its hours are marked: beat's periodic rollup picks them up.
        logger.warning("could not queue a rollup; beat's periodic one will run it", exc_info=True)
        _rollup_flag_clear()


def rollup_delay(now: float | None = None) -> float:
    """Seconds the next rollup should wait, from the last one's start and run time."""
    return _delay(_cache_get(ROLLUP_LAST_KEY), time.time() if now is None else now)


def _delay(last: tuple[Any, ...] | None, now: float) -> float:
    if not last:
        return 0.0
    started, seconds = last[:2]
    if _running(last, now):
        seconds = max(seconds, now - started)  # it has run this long already
    gap = max(settings.ROLLUP_MIN_INTERVAL_SECONDS, ROLLUP_SPACING * seconds)
    return round(min(max(started + gap - now, 0.0), ROLLUP_MAX_DELAY_SECONDS), 3)


def _running(last: tuple[Any, ...] | None, now: float) -> bool:
    """A rollup started and has not finished (one killed past the hard time limit does not count)."""
    return bool(last and len(last) > 2 and last[2] and now - last[0] < settings.CELERY_TASK_TIME_LIMIT)


def _rollup_flag_clear() -> None:
    try:
        cache.delete(ROLLUP_QUEUED_KEY)
    except Exception:
        logger.warning("cache unavailable; the rollup-queued flag expires by itself", exc_info=True)


@shared_task(name="workers.rollup_dirty", bind=True, ignore_result=True, acks_late=True)
def rollup_dirty(self) -> int:
    """Refresh marked hours. The queued rollup always runs; another (beat's periodic one, a
    duplicate message) only when none is queued and the last one is not too recent, so rollups
    never pile up back to back."""
    queued = _cache_get(ROLLUP_QUEUED_KEY)
    if queued is not None and queued != self.request.id:
        return 0  # the queued one will take the marks
    last, now = _cache_get(ROLLUP_LAST_KEY), time.time()
    delay = _delay(last, now)
    if queued is None and delay > 0:
        # One ran just now. Marks left (this may be a queued rollup whose flag expired while it
        # waited behind a backlog) get a rollup queued for when it is due, not stranded.
        if dirty_hours_pending():
            rollup_request()
        return 0
    if queued is not None and delay > 0 and _running(last, now) and not self.request.is_eager:
        # Queued while the last one ran, it is due before that one finished: wait for it, spaced
        # by its run time so far, rather than scan the same hours beside it.
        raise self.retry(countdown=delay, max_retries=None)
    # Recorded at the start, as running, with the previous run time as the estimate: the next
    # rollup, queued by a batch finishing while this one runs, is spaced from this start.
    _rollup_last_record(now, float(last[1]) if last else 0.0, running=True)
    _rollup_flag_clear()  # before claiming marks: a batch finishing from here on queues the next rollup
    try:
        return rollups_refresh()
    finally:
        _rollup_last_record(now, time.time() - now, running=False)


def _cache_get(key: str) -> Any:
    try:
        return cache.get(key)
    except Exception:
        return None


def _rollup_last_record(started: float, seconds: float, *, running: bool) -> None:
    try:
        cache.set(ROLLUP_LAST_KEY, (started, seconds, running), timeout=3600)
    except Exception:
        logger.warning("cache unavailable; the next rollup is not spaced", exc_info=True)
