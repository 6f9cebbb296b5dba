"""Accepting a batch of events: validate, recognise re-sent ones, redact, store durably, enqueue.

The request path writes the IngestBatch rows (one, or for a whole transcript as many as its
events need, in one transaction) and answers; turning events into sessions, turns and tool
calls is the workers' job (services/processing.py).
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
from toolscope.telemetry.services.advertised import advertised_entry
from toolscope.telemetry.services.events import Rejected, event_validate
from toolscope.telemetry.services.redact import events_redact
from toolscope.telemetry.services.retention import with_partitions

PROCESS_TASK = "workers.process_batch"
logger = logging.getLogger(__name__)


@dataclass
class IngestOutcome:
    results: list[dict[str, Any]]
    batch_ids: list[int] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: {"accepted": 0, "duplicate": 0, "rejected": 0})

    @property
    def batch_id(self) -> int | None:
        """The first batch stored (None when nothing was)."""
        return self.batch_ids[0] if self.batch_ids else None

    @property
    def stored_anything(self) -> bool:
        return self.counts["accepted"] + self.counts["duplicate"] > 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "batch_ids": self.batch_ids,
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
    *, api_key: ApiKey, raw_events: list[Any], kind: str = BatchKind.EVENTS, batch_events: int | None = None,
) -> IngestOutcome:
    """Validate and store `raw_events` for the key's project; enqueue processing on commit.

    The accepted events are one batch, or with `batch_events` (a whole transcript) consecutive
    batches of at most that many, all stored in one transaction: every one of them or none."""
    project = api_key.project
    received_at = timezone.now().isoformat()
    outcome = IngestOutcome(results=[])
    valid, borrowed = _validate(raw_events, received_at, outcome)

    # Redacted before the duplicate check: ids are stored redacted, so a re-sent event whose id
    # held a secret is recognised by its redacted id.
    valid = events_redact(project=project, events=valid)
    for index, lent in borrowed.items():
        for name, carrier in lent.items():
            valid[index][name] = valid[carrier][name]
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
        batches = [accepted] if batch_events is None else [
            _tools_by_reference(part) for part in events_split(accepted, batch_events)]
        outcome.batch_ids = batches_store(project=project, api_key=api_key, batches=batches, kind=kind)
    return outcome


# Turn fields a producer may share between the turns it maps (one object for every turn): a
# transcript's tools and system prompt. Validated and redacted once, not once per turn.
SHARED_FIELDS = ("tools", "system_prompt")


def _validate(
    raw_events: list[Any], received_at: str, outcome: IngestOutcome,
) -> tuple[list[dict[str, Any]], dict[int, dict[str, int]]]:
    """The valid events, each event's result recorded in `outcome`; and which valid events
    borrow a shared field from an earlier one (index -> {field: index of the one that carried it}).

    A turn's `tools` or `system_prompt` that is the very object an earlier accepted turn carried
    is left out of its validation and redaction and given the earlier turn's result afterwards:
    the same value validates and redacts the same way. Events parsed from a body never share
    objects; a transcript's mapping shares them (api/transcripts/events.py), so a session of
    thousands of turns validates and redacts one tool list, not thousands."""
    valid: list[dict[str, Any]] = []
    carriers: dict[tuple[str, int], int] = {}  # (field, id of the value) -> index of the valid event that had it
    borrowed: dict[int, dict[str, int]] = {}
    for position, raw in enumerate(raw_events):
        raw_id = raw.get("id") if isinstance(raw, dict) else None
        raw_id = raw_id if isinstance(raw_id, str) else None  # results echo ids, not other JSON
        lent: dict[str, int] = {}
        shared: dict[str, Any] = {}
        if isinstance(raw, dict) and raw.get("type") == "turn":
            shared = {name: raw[name] for name in SHARED_FIELDS if isinstance(raw.get(name), list | str)}
            lent = {name: carriers[(name, id(value))] for name, value in shared.items()
                    if (name, id(value)) in carriers}
            if lent:
                raw = {name: value for name, value in raw.items() if name not in lent}
        try:
            event = event_validate(raw, path=f"events[{position}]", received_at=received_at)
        except Rejected as exc:
            outcome.results.append({"id": raw_id, "status": "rejected", "reason": exc.reason, "path": exc.path})
            outcome.counts["rejected"] += 1
            continue
        outcome.results.append({"id": raw_id, "status": "accepted"})
        if lent:
            borrowed[len(valid)] = lent
        for name, value in shared.items():
            carriers.setdefault((name, id(value)), len(valid))
        valid.append(event)
    return valid, borrowed


def events_split(events: list[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    """`events` in order as consecutive runs of at most `size`, cut before a session, turn or
    catalog event where one is near: a turn stays in one batch with the calls that follow it
    (its calls), unless they alone are more than a batch holds."""
    groups: list[list[dict[str, Any]]] = []
    for event in events:
        if event["type"] == "tool_call" and groups:
            groups[-1].append(event)
        else:
            groups.append([event])
    batches: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    for group in groups:
        if current and len(current) + len(group) > size:
            batches.append(current)
            current = []
        for start in range(0, len(group), size):
            piece = group[start:start + size]
            if current and len(current) + len(piece) > size:
                batches.append(current)
                current = []
            current.extend(piece)
    if current:
        batches.append(current)
    return batches


def _tools_by_reference(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The batch with a turn's tools sent as `{name, schema_hash}` references where an earlier
    turn of the same batch carried the very same list: its first turn carries the definitions
    (the catalog gets them from it), later ones name them, as a client sends a definition once.
    Every batch carries its own, so batches can be processed in any order."""
    references: dict[int, list[dict[str, str]]] = {}
    out = []
    for event in batch:
        tools = event.get("tools") if event["type"] == "turn" else None
        if tools:
            if id(tools) in references:
                event = {**event, "tools": references[id(tools)]}
            else:
                references[id(tools)] = [advertised_entry(tool) for tool in tools]
        out.append(event)
    return out


def batches_store(*, project: Project, api_key: ApiKey | None, batches: list[list[dict[str, Any]]],
                  kind: str) -> list[int]:
    """Store the batches in one transaction (all or none) and enqueue each once it commits."""
    def store() -> list[IngestBatch]:
        stored = []
        for events in batches:
            batch = IngestBatch.objects.create(
                project=project, api_key=api_key, kind=kind, payload={"events": events}, event_count=len(events)
            )
            transaction.on_commit(lambda batch=batch: batch_enqueue(batch_id=batch.pk, day=batch.expires_on),
                                  robust=True)
            stored.append(batch)
        return stored

    # Its own transaction (a savepoint only inside a caller's): a missing day is made and the
    # store tried again, without a savepoint's two extra round trips on the request path.
    return [batch.pk for batch in with_partitions(store)]


def batch_store(*, project: Project, api_key: ApiKey | None, events: list[dict[str, Any]], kind: str) -> int:
    (batch_id,) = batches_store(project=project, api_key=api_key, batches=[events], kind=kind)
    return batch_id


def batch_enqueue(*, batch_id: int, day: date | None) -> None:
    """Ask a worker to process the batch (`day`: its expires_on, so the worker looks it up in that
    day partition alone). A broker outage is logged, not raised: the batch is committed and
    pending, and the sweeper enqueues it again once the broker is back."""
    try:
        task_send(PROCESS_TASK, batch_id, day.isoformat() if day else None, queue=settings.INGEST_QUEUE)
    except Exception:
        logger.warning("could not enqueue batch %s; the sweeper will retry", batch_id, exc_info=True)
