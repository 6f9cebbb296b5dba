"""Accepting a batch of events: validate, recognise re-sent ones, redact, store durably, enqueue.

The request path writes exactly one row (the IngestBatch) and answers; turning events into
sessions, turns and tool calls is the workers' job (services/processing.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from toolscope.tasks import task_send
from toolscope.telemetry.models import ApiKey, BatchKind, IngestBatch, Project, Session, ToolCall, Turn
from toolscope.telemetry.retention import days_of, days_within, event_days
from toolscope.telemetry.services.events import Rejected, event_validate
from toolscope.telemetry.services.redact import events_redact
from toolscope.telemetry.services.retention import with_partitions

PROCESS_TASK = "workers.process_batch"
logger = logging.getLogger(__name__)


@dataclass
class IngestOutcome:
    results: list[dict[str, Any]]
    batch_id: int | None = None
    counts: dict[str, int] = field(default_factory=lambda: {"accepted": 0, "duplicate": 0, "rejected": 0})

    @property
    def stored_anything(self) -> bool:
        return self.counts["accepted"] + self.counts["duplicate"] > 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "accepted": self.counts["accepted"],
            "duplicates": self.counts["duplicate"],
            "rejected": self.counts["rejected"],
            "results": self.results,
        }


def _known_ids(project: Project, events: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(type, id) of turn and tool_call events that already have rows: one query per type, in the
    day partitions their sessions' rows and their own lie in (one more query: the sessions')."""
    wanted: dict[str, list[str]] = {"turn": [], "tool_call": []}
    for event in events:
        if event["type"] in wanted:
            wanted[event["type"]].append(event["id"])
    known: set[tuple[str, str]] = set()
    if not any(wanted.values()):
        return known
    looked_up = [event for event in events if event["type"] in wanted]
    sessions = Session.objects.filter(project=project, client_id__in={event["session_id"] for event in looked_up})
    days = days_of(sessions.only("first_expires_on", "expires_on"),
                   more=event_days(looked_up, retention_days=project.retention_days))
    for kind, model in (("turn", Turn), ("tool_call", ToolCall)):
        if wanted[kind]:
            rows = model.objects.filter(days_within(days), project=project, client_id__in=wanted[kind])
            known.update((kind, client_id) for client_id in rows.values_list("client_id", flat=True))
    return known


def _dedupe_key(event: dict[str, Any]) -> tuple[str, str]:
    # Session events are idempotent upserts (a re-sent start may carry the attributes a tool call
    # event could not), so only an exact repeat inside one batch counts as a duplicate.
    return (event["type"], event["id"])


def ingest_events(
    *, api_key: ApiKey, raw_events: list[Any], kind: str = BatchKind.EVENTS
) -> IngestOutcome:
    """Validate and store `raw_events` for the key's project; enqueue processing on commit."""
    project = api_key.project
    received_at = timezone.now().isoformat()
    outcome = IngestOutcome(results=[])
    valid: list[dict[str, Any]] = []
    for position, raw in enumerate(raw_events):
        raw_id = raw.get("id") if isinstance(raw, dict) else None
        raw_id = raw_id if isinstance(raw_id, str) else None  # results echo ids, not other JSON
        try:
            valid.append(event_validate(raw, path=f"events[{position}]", received_at=received_at))
            outcome.results.append({"id": raw_id, "status": "accepted"})
        except Rejected as exc:
            outcome.results.append({"id": raw_id, "status": "rejected", "reason": exc.reason, "path": exc.path})
            outcome.counts["rejected"] += 1

    # Redacted before the duplicate check: ids are stored redacted, so a re-sent event whose id
    # held a secret is recognised by its redacted id.
    valid = events_redact(project=project, events=valid)
    seen = _known_ids(project, valid)
    accepted: list[dict[str, Any]] = []
    results = iter(r for r in outcome.results if r["status"] == "accepted")
    for event in valid:
        result = next(results)
        key = _dedupe_key(event)
        if key in seen:
            result["status"] = "duplicate"
            outcome.counts["duplicate"] += 1
            continue
        seen.add(key)
        accepted.append(event)
        outcome.counts["accepted"] += 1

    if accepted:
        outcome.batch_id = batch_store(project=project, api_key=api_key, events=accepted, kind=kind)
    return outcome


def batch_store(*, project: Project, api_key: ApiKey | None, events: list[dict[str, Any]], kind: str) -> int:
    def store() -> IngestBatch:
        batch = IngestBatch.objects.create(
            project=project, api_key=api_key, kind=kind, payload={"events": events}, event_count=len(events)
        )
        transaction.on_commit(lambda: batch_enqueue(batch_id=batch.pk, day=batch.expires_on), robust=True)
        return batch

    # Its own transaction (a savepoint only inside a caller's): a missing day is made and the
    # store tried again, without a savepoint's two extra round trips on the request path.
    return with_partitions(store).pk


def batch_enqueue(*, batch_id: int, day: date | None) -> None:
    """Ask a worker to process the batch (`day`: its expires_on, so the worker looks it up in that
    day partition alone). A broker outage is logged, not raised: the batch is committed and
    pending, and the sweeper enqueues it again once the broker is back."""
    try:
        task_send(PROCESS_TASK, batch_id, day.isoformat() if day else None, queue=settings.INGEST_QUEUE)
    except Exception:
        logger.warning("could not enqueue batch %s; the sweeper will retry", batch_id, exc_info=True)
