"""The life of an ingest batch outside processing itself: re-delivery, retry, and the numbers
that say whether workers keep up."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Min, Q, Sum
from django.utils import timezone

from toolscope.telemetry.models import BatchStatus, IngestBatch, QuarantinedEvent
from toolscope.telemetry.services.ingest import batch_enqueue

logger = logging.getLogger(__name__)


def batches_sweep(*, pending_after: timedelta, processing_after: timedelta, limit: int = 1000) -> list[int]:
    """Enqueue again the batches whose message was lost (pending too long) or whose worker died
    (processing too long). Processing is idempotent, so a batch that was only slow and then is
    delivered twice is processed once: the second delivery finds it done."""
    now = timezone.now()
    stale = IngestBatch.objects.filter(
        Q(status=BatchStatus.PENDING, received_at__lt=now - pending_after)
        | Q(status=BatchStatus.PROCESSING, started_at__lt=now - processing_after)
    ).order_by("received_at").values_list("pk", "expires_on")[:limit]
    batch_ids = []
    for batch_id, day in stale:
        batch_enqueue(batch_id=batch_id, day=day)
        batch_ids.append(batch_id)
    if batch_ids:
        logger.info("sweeper re-enqueued %d batches", len(batch_ids))
    return batch_ids


def batches_retry(*, batch_ids: list[int]) -> int:
    """An operator's retry of failed batches: back to pending with fresh attempts."""
    with transaction.atomic():
        retried = dict(
            IngestBatch.objects.filter(pk__in=batch_ids, status=BatchStatus.FAILED).values_list("pk", "expires_on")
        )
        IngestBatch.objects.filter(pk__in=retried).update(
            status=BatchStatus.PENDING, attempts=0, error="", started_at=None, finished_at=None
        )
        for batch_id, day in retried.items():
            transaction.on_commit(lambda batch_id=batch_id, day=day: batch_enqueue(batch_id=batch_id, day=day),
                                  robust=True)
    return len(retried)


def worker_metrics(*, window: timedelta = timedelta(minutes=5)) -> dict[str, Any]:
    """Lag, throughput and failures of batch processing, from two aggregate queries."""
    now = timezone.now()
    open_batches = IngestBatch.objects.filter(status__in=[BatchStatus.PENDING, BatchStatus.PROCESSING]).aggregate(
        oldest=Min("received_at"), events=Sum("event_count")
    )
    recent = IngestBatch.objects.filter(finished_at__gte=now - window).aggregate(
        done=Sum("event_count", filter=Q(status=BatchStatus.DONE)),
        failed_recently=Sum("event_count", filter=Q(status=BatchStatus.FAILED)),
    )
    oldest = open_batches["oldest"]
    return {
        "oldest_pending_seconds": round((now - oldest).total_seconds(), 1) if oldest else 0.0,
        "pending_events": open_batches["events"] or 0,
        "events_per_second": round((recent["done"] or 0) / window.total_seconds(), 1),
        "failed_batches": IngestBatch.objects.filter(status=BatchStatus.FAILED).count(),
        "quarantined_events": QuarantinedEvent.objects.count(),
        "window_seconds": int(window.total_seconds()),
    }
