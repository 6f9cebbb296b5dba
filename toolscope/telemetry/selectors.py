"""Read queries over telemetry that the API serves."""

from __future__ import annotations

import re
from typing import Any
from uuid import UUID

from toolscope_agent.engine.compaction import ARTIFACT_ID_LENGTH

from toolscope.telemetry.models import Artifact, BatchStatus, IngestBatch, Project, QuarantinedEvent

CONTENT_ID = re.compile(f"[0-9a-f]{{{ARTIFACT_ID_LENGTH}}}")


def artifact_get(*, project: Project, artifact_id: str) -> Artifact | None:
    """The artifact of `project` with this content id (what compacted texts name; among
    identical originals, the earliest stored) or, for artifacts linked before content ids, this
    uuid. Another project's id is simply not found."""
    artifacts = Artifact.objects.select_related("tool_call").filter(project=project)
    if CONTENT_ID.fullmatch(artifact_id):
        return artifacts.filter(content_id=artifact_id).order_by("created_at", "pk").first()
    try:
        pk = UUID(artifact_id)
    except ValueError:
        return None
    return artifacts.filter(pk=pk).first()


def batch_outcome(*, project_id: int, batch_id: int) -> dict[str, Any] | None:
    """An ingest batch of the project with each event's outcome: "stored", "quarantined" (with
    the reason), "pending" before processing ends, "failed" when the batch failed for good; None
    when the project has no such batch. Two queries."""
    batch = IngestBatch.objects.filter(project_id=project_id, pk=batch_id).first()
    if batch is None:
        return None
    quarantined = dict(QuarantinedEvent.objects.filter(batch=batch).values_list("client_id", "reason"))
    outcome = {BatchStatus.DONE: "stored", BatchStatus.FAILED: "failed"}.get(batch.status, "pending")
    events = []
    for event in (batch.payload or {}).get("events", []):
        event = event if isinstance(event, dict) else {}
        event_id = event.get("id")
        if event_id in quarantined:
            events.append({"id": event_id, "type": event.get("type"), "outcome": "quarantined",
                           "reason": quarantined[event_id]})
        else:
            events.append({"id": event_id, "type": event.get("type"), "outcome": outcome})
    return {"id": batch.pk, "kind": batch.kind, "status": batch.status, "attempts": batch.attempts,
            "error": batch.error, "received_at": batch.received_at, "started_at": batch.started_at,
            "finished_at": batch.finished_at, "event_count": batch.event_count, "quarantined": len(quarantined),
            "events": events}
