"""Turning a stored batch into sessions, turns and tool calls, in bulk and exactly once.

The whole batch is processed in one transaction holding the batch row's lock: a worker killed
half way rolls back to `pending` and the redelivered task (acks_late) or the sweeper runs it again;
a second worker given the same batch waits for the lock, then sees `done` and returns. Unique
constraints on (project, client_id) make every insert idempotent as well.
"""

from __future__ import annotations

import enum
import hashlib
import logging
import math
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime
from typing import Any

from django.db import IntegrityError, InterfaceError, OperationalError, connection, transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone
from toolscope_agent.engine.duplicates import normalize_output, normalized_fingerprint
from toolscope_agent.engine.schemas import canonical_json

from toolscope.policies.services.catalog import catalog_upsert
from toolscope.telemetry.error_patterns import classify
from toolscope.telemetry.models import BatchStatus, IngestBatch, Project, Session, ToolCall, ToolsFrom, Turn
from toolscope.telemetry.retention import Days, days_of, days_within, event_days, expiry_day
from toolscope.telemetry.services.accounting import BatchConflictError, SessionBefore, sessions_account
from toolscope.telemetry.services.advertised import advertised_entry, advertised_sets_resolve
from toolscope.telemetry.services.bulk import ids_allocate, rows_update
from toolscope.telemetry.services.inferred_tools import Advertised, Inferred, agent_tools_record, tools_infer
from toolscope.telemetry.services.quarantine import Entry, events_apply_isolating, failure_reason, quarantine_store
from toolscope.tokenizer import count_many

logger = logging.getLogger(__name__)


def _when(value: str) -> datetime:
    return datetime.fromisoformat(value)


# A batch's first attempt also takes the project's other pending batches, oldest first, up to
# this many events in all: under a backlog one transaction does the work of many, paying a
# batch's fixed cost (some twenty statements, a commit) once. Retries go alone, so that one bad
# batch cannot fail the others.
MERGE_MAX_EVENTS = 2_000
MERGE_MAX_BATCHES = 20


class BatchResult(enum.Enum):
    DONE = "done"  # processed now (some events may be quarantined)
    SKIPPED = "skipped"  # nothing to do: gone, done or failed already
    BUSY = "busy"  # the project's quota of workers is busy with its other batches; try again soon

    def __bool__(self) -> bool:
        return self is BatchResult.DONE


def _batch(batch_id: int, day: date | None) -> QuerySet[IngestBatch]:
    """The batch by id, in its day partition when the day is known (the task message carries it)."""
    return IngestBatch.objects.filter(pk=batch_id, **({"expires_on": day} if day else {}))


def batch_process(
    *, batch_id: int, day: date | None = None, passthrough: tuple[type[BaseException], ...] = (),
) -> BatchResult:
    """Process the batch if it still needs it. Events the workers cannot store are quarantined
    with their reason and the rest commit (services/quarantine.py); exceptions that are not an
    event's fault (the database blinking, `passthrough`: a time limit) fail the attempt.

    A project is processed by one worker at a time (PostgreSQL): a tenant's slow or plentiful
    batches occupy one worker process, never all of them, and its other batches answer BUSY
    without counting an attempt. `day`: the batch's expires_on, if known."""
    project_id = _batch(batch_id, day).values_list("project_id", flat=True).first()
    if project_id is None:
        return BatchResult.SKIPPED
    with _project_slot(project_id) as acquired:
        if not acquired:
            return BatchResult.BUSY
        return _batch_process(batch_id, day, passthrough)


def _batch_process(batch_id: int, day: date | None, passthrough: tuple[type[BaseException], ...]) -> BatchResult:
    _batch(batch_id, day).filter(status__in=[BatchStatus.PENDING, BatchStatus.PROCESSING]).update(
        attempts=F("attempts") + 1, status=BatchStatus.PROCESSING, started_at=timezone.now()
    )
    with transaction.atomic():
        # of=("self",): lock the batch row only. Locking the joined project row too would make
        # every ingest commit (its foreign key check) and every rollup wait for this batch, and
        # deadlock two workers against each other.
        batch = _batch(batch_id, day).select_for_update(of=("self",)).select_related("project").first()
        if batch is None or batch.status in (BatchStatus.DONE, BatchStatus.FAILED):
            return BatchResult.SKIPPED
        partners = _partners_claim(batch) if batch.attempts <= 1 else []
        # In the order they were received: a later session event (new metadata, the end) wins.
        group = sorted([batch, *partners], key=lambda b: (b.received_at, b.pk))
        entries = [Entry(b.pk, event) for b in group for event in b.payload["events"]]
        failures = events_apply_isolating(
            entries=entries, apply=lambda events: events_apply(project=batch.project, events=events),
            passthrough=(*NOT_THE_EVENTS_FAULT, *passthrough),
        )
        if failures:
            quarantine_store(project=batch.project, failures=failures)
        now = timezone.now()
        _batch(batch.pk, batch.expires_on).update(status=BatchStatus.DONE, error="", finished_at=now)
        if partners:
            IngestBatch.objects.filter(pk__in=[p.pk for p in partners], expires_on=batch.expires_on).update(
                status=BatchStatus.DONE, error="", attempts=F("attempts") + 1, started_at=batch.started_at,
                finished_at=now,
            )
    return BatchResult.DONE


# Errors that say nothing about the events: the attempt fails and is retried whole.
NOT_THE_EVENTS_FAULT: tuple[type[BaseException], ...] = (OperationalError, InterfaceError)
# pg_try_advisory_lock(bigint): the single-key space, apart from the rollups' two-key locks.
_PROJECT_LOCK_BASE = 0x7473_0001 << 32


@contextmanager
def _project_slot(project_id: int) -> Iterator[bool]:
    """Whether this worker may process the project now: a session-level advisory lock, released
    on exit or when the connection dies with the worker. Not on SQLite (tasks run in-process)."""
    if connection.vendor != "postgresql":
        yield True
        return
    key = _PROJECT_LOCK_BASE + project_id
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        acquired = cursor.fetchone()[0]
    try:
        yield acquired
    finally:
        if acquired:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [key])


def _partners_claim(batch: IngestBatch) -> list[IngestBatch]:
    """Pending batches of the same project never tried yet that no other worker holds, locked
    until commit. Their own tasks find them done. PostgreSQL only: elsewhere nothing can skip a
    locked row. Only those of the batch's day partition (received the same day, the project's
    retention unchanged): a batch of another day is left to its own task."""
    if not connection.features.has_select_for_update_skip_locked:
        return []
    budget = MERGE_MAX_EVENTS - batch.event_count
    candidates = (
        IngestBatch.objects.select_for_update(skip_locked=True, of=("self",))
        .filter(project_id=batch.project_id, expires_on=batch.expires_on, status=BatchStatus.PENDING, attempts=0,
                event_count__lte=budget)
        .exclude(pk=batch.pk).order_by("received_at", "id").values_list("pk", "event_count")[:MERGE_MAX_BATCHES]
    )
    chosen = []
    for pk, count in candidates:
        if count <= budget:
            chosen.append(pk)
            budget -= count
    return list(IngestBatch.objects.filter(pk__in=chosen, expires_on=batch.expires_on).order_by("received_at", "id")
                ) if chosen else []


def batch_attempts(*, batch_id: int, day: date | None = None) -> int:
    return _batch(batch_id, day).values_list("attempts", flat=True).first() or 0


def batch_mark_failed(*, batch_id: int, error: str, final: bool, day: date | None = None) -> None:
    """Record a failed attempt; a final one leaves the batch `failed` for an operator to retry.
    `error` must not quote the batch's values (quarantine.failure_reason)."""
    status = BatchStatus.FAILED if final else BatchStatus.PENDING
    _batch(batch_id, day).exclude(status=BatchStatus.DONE).update(
        status=status, error=error[:10_000], finished_at=timezone.now() if final else None
    )


def events_apply(*, project: Project, events: list[dict[str, Any]]) -> None:
    by_type: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        by_type[event["type"]].append(event)
    definitions = [tool for event in by_type["catalog"] for tool in event["tools"]]
    definitions += [
        tool for event in by_type["turn"] for tool in event.get("tools", ()) if "input_schema" in tool
    ]
    if definitions:
        catalog_upsert(project=project, definitions=definitions)
    sessions, starts = _sessions_upsert(project, events, by_type["session"])
    # The day partitions the batch's rows are looked up in: its stored sessions' and its events'.
    days = days_of([session for session in sessions.values() if starts[session.pk] is not None],
                   more=event_days((*by_type["turn"], *by_type["tool_call"]), retention_days=project.retention_days))
    new_turns, turn_ids = _turns_new(project, sessions, by_type["turn"], days)
    new_calls = _tool_calls_new(project, sessions, turn_ids, by_type["tool_call"], days)
    sessions_account(project=project, sessions_before=starts, new_turns=new_turns, new_calls=new_calls,
                     stored_days=days)


SESSION_FIELDS = ("agent_name", "model", "metadata", "started_at", "ended_at")


def _sessions_upsert(
    project: Project, events: list[dict[str, Any]], session_events: list[dict[str, Any]]
) -> tuple[dict[str, Session], dict[int, SessionBefore | None]]:
    """The batch's sessions, stored ones locked until commit (so two batches of one session are
    accounted one after the other) and new ones inserted with this batch's events applied; and
    each as it was before this batch (None for a new one), for the rollups' session counts and
    slices."""
    first_seen: dict[str, str] = {}
    for event in events:
        session_id = event.get("session_id")
        if session_id and (session_id not in first_seen or event["timestamp"] < first_seen[session_id]):
            first_seen[session_id] = event["timestamp"]
    if not first_seen:
        return {}, {}
    sessions = {
        s.client_id: s for s in Session.objects.select_for_update(of=("self",))
        .filter(project=project, client_id__in=first_seen).order_by("pk")
    }
    starts: dict[int, SessionBefore | None] = {s.pk: SessionBefore(s.started_at, s.agent_name, s.model)
                                               for s in sessions.values()}
    # In client id order, so that two batches inserting the same new sessions wait in one order.
    drafts = {sid: Session(project=project, client_id=sid, started_at=_when(first_seen[sid]))
              for sid in sorted(first_seen.keys() - sessions.keys())}
    changed = _sessions_apply({**sessions, **drafts}, session_events, first_seen)
    try:
        Session.objects.bulk_create(drafts.values())
    except IntegrityError as exc:
        # A concurrent worker stored one of these sessions since the lookup; a retry locks it.
        raise BatchConflictError(failure_reason(exc)) from exc
    rows_update(Session, SESSION_FIELDS, [session for session in changed if session.client_id in sessions])
    starts.update((draft.pk, None) for draft in drafts.values())
    return {**sessions, **drafts}, starts


def _sessions_apply(
    sessions: dict[str, Session], session_events: list[dict[str, Any]], first_seen: dict[str, str]
) -> list[Session]:
    changed: dict[str, Session] = {}
    for event in session_events:
        session = sessions[event["session_id"]]
        before = [getattr(session, name) for name in SESSION_FIELDS]
        if event["action"] == "end":
            session.ended_at = _when(event["timestamp"])
        else:
            session.agent_name = event.get("agent_name", session.agent_name)
            session.model = event.get("model", session.model)
            session.metadata = event.get("metadata", session.metadata)
            session.started_at = min(session.started_at, _when(event["timestamp"]))
        if before != [getattr(session, name) for name in SESSION_FIELDS]:
            changed[session.client_id] = session
    # Events of a session seen before its start event may be earlier than its recorded start.
    for sid, ts in first_seen.items():
        if _when(ts) < sessions[sid].started_at:
            sessions[sid].started_at = _when(ts)
            changed[sid] = sessions[sid]
    return list(changed.values())


def _turns_new(
    project: Project, sessions: dict[str, Session], events: list[dict[str, Any]], days: Days | None,
) -> tuple[list[dict[str, Any]], dict[tuple[int, int], int]]:
    """The rows of the batch's turns not stored yet, ids drawn, for accounting to insert with
    their budgets; and the id of every turn of the batch's sessions by (session id, index).

    A turn is its event id: one whose id is taken already is skipped, as a re-sent one (a re-sent
    one is in its session's days; a taken id elsewhere would conflict only on its own day). Two
    turns may share an index (two requests with one history: a retry, two branches); a call of
    that index belongs to the first of them."""
    stored = Turn.objects.filter(
        days_within(days),
        Q(session_id__in=[s.pk for s in sessions.values()])
        | Q(project=project, client_id__in=[e["id"] for e in events]),
    ).order_by("started_at", "pk").values_list("pk", "session_id", "index", "client_id")
    turn_ids: dict[tuple[int, int], int] = {}
    taken: set[str] = set()
    for pk, session_id, index, client_id in stored:
        turn_ids.setdefault((session_id, index), pk)
        taken.add(client_id)
    fresh = []
    for event in events:
        if event["id"] not in taken:
            taken.add(event["id"])
            fresh.append(event)
    if not fresh:
        return [], turn_ids
    rows = _turn_rows(project, sessions, fresh)
    for row in sorted(rows, key=lambda row: row["started_at"]):
        turn_ids.setdefault((row["session_id"], row["index"]), row["id"])
    return rows, turn_ids


def _turn_rows(project: Project, sessions: dict[str, Session], events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    sets = _advertised_sets(project, sessions, events)
    system_tokens, message_tokens = _turn_tokens(project, events)
    ids = ids_allocate(Turn, len(events))
    now = timezone.now()
    today = now.astimezone(UTC).date()
    return [
        {
            "id": pk, "project_id": project.pk, "session_id": sessions[event["session_id"]].pk,
            "client_id": event["id"], "index": event["index"], "model": event.get("model", ""),
            "started_at": _when(event["timestamp"]), "time_known": event.get("timed", True),
            "expires_on": expiry_day(retention_days=project.retention_days, moment=_when(event["timestamp"]), on=today),
            "advertised_set_id": advertised.advertised_set_id, "tools_from": advertised.tools_from,
            "shadow_tools": event.get("shadow_tools"),
            "input_tokens": event.get("usage", {}).get("input_tokens"),
            "output_tokens": event.get("usage", {}).get("output_tokens"),
            "cached_tokens": event.get("usage", {}).get("cached_tokens"),
            "cache_write_tokens": event.get("usage", {}).get("cache_write_tokens"),
            "cache_write_1h_tokens": event.get("usage", {}).get("cache_write_1h_tokens"),
            "latency_ms": round(event["latency_ms"]) if "latency_ms" in event else None,
            "system_prompt_chars": event.get("system_prompt_chars", len(event.get("system_prompt", "")) or None),
            "system_prompt_hash": text_hash(event.get("system_prompt", "")),
            "task_message": event.get("task_message", ""), "messages": event.get("messages", []),
            "system_prompt_tokens": system, "new_message_tokens": messages, "created_at": now,
        }
        for pk, event, advertised, system, messages in zip(
            ids, events, sets, system_tokens, message_tokens, strict=True)
    ]


def _advertised_sets(project: Project, sessions: dict[str, Session], events: list[dict[str, Any]]) -> list[Inferred]:
    """Each turn's advertised set: the tools it sent, or for one that says it does not know them
    (`tools_known: false`), what its agent last advertised or the catalog (inferred_tools.py)."""
    sets = advertised_sets_resolve(
        project=project, lists=[[advertised_entry(tool) for tool in event.get("tools", ())] for event in events]
    )
    agents = [sessions[event["session_id"]].agent_name for event in events]
    agent_tools_record(project=project, advertised=[
        Advertised(agent, advertised.pk, _when(event["timestamp"]))
        for agent, advertised, event in zip(agents, sets, events, strict=True) if advertised is not None])
    unknown = {agent for agent, event in zip(agents, events, strict=True) if _tools_unknown(event)}
    inferred = tools_infer(project=project, agents=unknown) if unknown else {}
    return [inferred[agent] if _tools_unknown(event)
            else Inferred(advertised.pk if advertised else None, ToolsFrom.SENT)
            for agent, advertised, event in zip(agents, sets, events, strict=True)]


def _tools_unknown(event: dict[str, Any]) -> bool:
    return event.get("tools_known") is False and not event.get("tools")


def text_hash(text: str) -> str:
    """A text's identity as turns keep it (Turn.system_prompt_hash): SHA-256's first 16 hex
    digits; blank for no text."""
    return hashlib.sha256(text.encode()).hexdigest()[:16] if text else ""


def _turn_tokens(project: Project, events: list[dict[str, Any]]) -> tuple[list[int | None], list[int]]:
    """Tokens of each turn's system prompt and new messages, counted in one batch call.

    A system prompt sent only as a size is estimated at four characters a token."""
    prompts = [event.get("system_prompt", "") for event in events]
    # A turn that lists its new messages counts them (none: nothing new, though its task, an
    # earlier instruction, is set); one that does not counts its task message.
    messages = [
        "\n".join(m["content"] for m in event["messages"]) if "messages" in event else event.get("task_message", "")
        for event in events
    ]
    counts = count_many(prompts + messages, project.encoding)
    system = [
        counts[i] if prompts[i] else (math.ceil(event["system_prompt_chars"] / 4) if "system_prompt_chars" in event
                                      else None)
        for i, event in enumerate(events)
    ]
    return system, counts[len(events):]


def _tool_calls_new(
    project: Project, sessions: dict[str, Session], turn_ids: dict[tuple[int, int], int], events: list[dict[str, Any]],
    days: Days | None,
) -> list[dict[str, Any]]:
    """The rows of the batch's tool calls not stored yet (an event sent twice is stored once), with
    their ids drawn already and their tokens counted; accounting links and inserts them."""
    if not events:
        return []
    stored = set(ToolCall.objects.filter(days_within(days), project=project, client_id__in=[e["id"] for e in events])
                 .values_list("client_id", flat=True))
    fresh: dict[str, dict[str, Any]] = {}
    for event in events:
        if event["id"] not in stored:
            fresh.setdefault(event["id"], event)
    events = list(fresh.values())
    if not events:
        return []
    outputs = [event.get("output", "") for event in events]
    arguments = [canonical_json(event["arguments"]) if event.get("arguments") else "" for event in events]
    counts = count_many(outputs + arguments, project.encoding)
    ids = ids_allocate(ToolCall, len(events))
    now = timezone.now()
    today = now.astimezone(UTC).date()
    rows = []
    for i, event in enumerate(events):
        session_id = sessions[event["session_id"]].pk
        # Classified here rather than when the API maps a transcript: one place for every way in
        # (ingest events without a status, all three transcript formats, OTLP), the project row
        # is loaded already, and the request path stays one write (DESIGN.md, Scale).
        verdict = classify(event=event, patterns=project.tool_error_patterns)
        rows.append({
            "id": ids[i], "project_id": project.pk, "session_id": session_id,
            "turn_id": turn_ids.get((session_id, event["turn_index"])), "turn_index": event["turn_index"],
            "client_id": event["id"], "call_id": event.get("call_id", ""), "tool_name": event["tool_name"],
            "arguments": event.get("arguments", {}), "output": outputs[i], "status": verdict.status,
            "error_rule": verdict.rule[:100], "error_text_unflagged": verdict.unflagged,
            "error": event.get("error", ""), "duration_ms": event.get("duration_ms"),
            "retries": event.get("retries", 0), "approval": event.get("approval", "not_required"),
            "started_at": _when(event["timestamp"]), "time_known": event.get("timed", True),
            "expires_on": expiry_day(retention_days=project.retention_days, moment=_when(event["timestamp"]), on=today),
            "altered": bool(event.get("altered")),
            # Whitespace-only outputs carry nothing to repeat: never duplicates.
            "output_hash": normalized_fingerprint(normalized) if (normalized := normalize_output(outputs[i])) else "",
            "output_tokens": counts[i], "argument_tokens": counts[len(events) + i], "created_at": now,
        })
    return rows
