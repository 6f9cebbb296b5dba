"""Keeping what cannot be stored: an event the workers fail on is quarantined with its reason,
and the rest of its batch commits.

The API refuses what the database cannot hold (services/events.py), so quarantine is the
backstop for what validation did not foresee: a bug, a column it missed, a constraint. A batch is
applied whole first; only when that raises does it split in halves, each half applied in its own
savepoint, down to the single events that fail on their own: k bad events in n cost about
2·k·log2(n) extra applications, and a batch with none costs one savepoint.
"""

from __future__ import annotations

import logging
import re
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction

from toolscope.telemetry.models import BatchKind, Project, QuarantinedEvent

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Entry:
    """An event of a batch, with the batch it came in."""

    batch_id: int | None
    event: dict[str, Any]


def events_apply_isolating(
    *, entries: Sequence[Entry], apply: Callable[[list[dict[str, Any]]], None],
    passthrough: tuple[type[BaseException], ...],
) -> list[tuple[Entry, BaseException]]:
    """Apply the entries' events with `apply`, isolating the ones it fails on: the failures, each
    with its exception. Exceptions in `passthrough` (the database blinking, a time limit) are not
    the events' fault and end the whole attempt."""
    try:
        with transaction.atomic():  # a savepoint: a failure leaves the transaction usable
            apply([entry.event for entry in entries])
    except passthrough:
        raise
    except Exception as exc:
        if len(entries) == 1:
            return [(entries[0], exc)]
        middle = len(entries) // 2
        # In order: a later session event still wins over an earlier one.
        return (events_apply_isolating(entries=entries[:middle], apply=apply, passthrough=passthrough)
                + events_apply_isolating(entries=entries[middle:], apply=apply, passthrough=passthrough))
    return []


def quarantine_store(*, project: Project, failures: Sequence[tuple[Entry, BaseException]]) -> None:
    rows = [
        QuarantinedEvent(
            project=project, batch_id=entry.batch_id, event_type=str(entry.event.get("type", ""))[:16],
            client_id=str(entry.event.get("id", ""))[:200], event=entry.event, reason=failure_reason(exc),
        )
        for entry, exc in failures
    ]
    QuarantinedEvent.objects.bulk_create(rows)
    for row in rows:
        logger.warning("quarantined event %s of batch %s: %s", row.client_id, row.batch_id, row.reason)


def failure_reason(exc: BaseException) -> str:
    """What went wrong, without the values involved: the exception's class and where it was
    raised, and for a database error only its primary message (PostgreSQL's detail and context
    quote the row, and Django's message can hold the SQL)."""
    where = _origin(exc)
    if isinstance(exc, DatabaseError):
        cause = exc.__cause__
        primary = getattr(getattr(cause, "diag", None), "message_primary", None)
        state = getattr(cause, "sqlstate", None)
        if primary:
            # Some primary messages quote the value: 'invalid input syntax for type integer: "x"'.
            detail = _QUOTED.sub('"…"', primary) + (f" (SQLSTATE {state})" if state else "")
        else:
            # The driver refused before sending: its messages are fixed texts ("PostgreSQL text
            # fields cannot contain NUL (0x00) bytes"), quoted parts dropped all the same.
            detail = _QUOTED.sub('"…"', str(cause or "database error"))[:200]
        return f"{type(exc).__name__}: {detail}{where}"
    return f"{type(exc).__name__}{where}"


_QUOTED = re.compile(r'"[^"]*"')


def _origin(exc: BaseException) -> str:
    """' at module.py:123 (function)': the innermost frame of toolscope's own code."""
    frames = traceback.extract_tb(exc.__traceback__)
    root = str(settings.BASE_DIR)
    ours = [frame for frame in frames if frame.filename.startswith(root) and "-packages/" not in frame.filename]
    if not (ours or frames):
        return ""
    frame = (ours or frames)[-1]
    return f" at {frame.filename.rsplit('/', 1)[-1]}:{frame.lineno} ({frame.name})"


def quarantined_retry(*, event_ids: Sequence[int]) -> int:
    """An operator's retry: the quarantined events go back to the workers as one new batch per
    project, and leave the quarantine (an event that fails again comes back with a fresh reason)."""
    from toolscope.telemetry.services.ingest import batch_store

    with transaction.atomic():
        rows = list(QuarantinedEvent.objects.select_for_update().filter(pk__in=event_ids).select_related("project"))
        by_project: dict[int, tuple[Project, list[dict[str, Any]]]] = {}
        for row in rows:
            by_project.setdefault(row.project_id, (row.project, []))[1].append(row.event)
        for project, events in by_project.values():
            batch_store(project=project, api_key=None, events=events, kind=BatchKind.EVENTS)
        QuarantinedEvent.objects.filter(pk__in=[row.pk for row in rows]).delete()
    return len(rows)
