"""Pricing stored sessions again (issue 26, item 1: prices change).

Processing keeps each request's dollars on its turn (accounting: TURN_COSTS) under the prices in
force then, and the hourly rollups add them up. A project price added, changed or deleted later
(`ModelPrice`, in the admin), or a newer genai-prices release, changes what they should be; the
session page prices on every view and shows it at once, the overview and the tools page would
not. `sessions_reprice` prices a project's sessions again under the prices now, each session's
requests in order from its first (a request's cache depends on every one before), writes the
turns whose dollars changed and marks their hours for the rollups' rebuild (`rollups_refresh`:
the periodic task, or `manage.py rollup`). Turns whose dollars are unchanged are not written.

It runs in a background worker when the admin saves a project's prices (`reprice_soon`), and as
`manage.py reprice` (with progress).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction

from toolscope.tasks import task_send
from toolscope.telemetry.models import ModelPrice, Project, Session, Turn
from toolscope.telemetry.retention import days_of, days_within
from toolscope.telemetry.services.bulk import rows_update
from toolscope.telemetry.services.costs import COST_FIELDS, TURN_COSTS, cost_values, session_costs
from toolscope.telemetry.services.rollups import dirty_hours_mark

logger = logging.getLogger(__name__)

REPRICE_TASK = "workers.sessions_reprice"
CHUNK = 200  # sessions priced and written per transaction


@dataclass(frozen=True)
class Repriced:
    sessions: int  # sessions priced again
    turns: int  # their requests
    changed: int  # requests whose stored dollars changed (written)


def sessions_reprice(*, project: Project, model: str = "", since: datetime | None = None, chunk: int = CHUNK,
                     progress: Callable[[int, int], None] | None = None) -> Repriced:
    """Price the project's sessions again (those with a request of `model` when given, and started
    at or after `since` when given) under today's prices; `progress(done, total)` after each
    chunk of sessions (see the module docstring)."""
    sessions = Session.objects.filter(project=project)
    if since is not None:
        sessions = sessions.filter(started_at__gte=since)
    if model:
        sessions = sessions.filter(pk__in=Turn.objects.filter(project=project, model=model).values("session_id"))
    ids = list(sessions.order_by("pk").values_list("pk", flat=True))
    overrides = list(ModelPrice.objects.filter(project_id=project.pk))
    prices: dict[Any, Any] = {}  # prices looked up, by (model, day), across chunks
    turns = changed = 0
    for start in range(0, len(ids), chunk):
        counted, written = _chunk_reprice(project, ids[start:start + chunk], overrides, prices)
        turns += counted
        changed += written
        if progress is not None:
            progress(min(start + chunk, len(ids)), len(ids))
    return Repriced(sessions=len(ids), turns=turns, changed=changed)


def _chunk_reprice(project: Project, ids: list[int], overrides: list[ModelPrice],
                   prices: dict[Any, Any]) -> tuple[int, int]:
    with transaction.atomic():
        days = days_of(Session.objects.filter(pk__in=ids).only("first_expires_on", "expires_on"))
        rows = list(Turn.objects.filter(days_within(days), session_id__in=ids)
                    .order_by("session_id", "index", "started_at", "id")
                    .values(*COST_FIELDS, "session_id", *TURN_COSTS))
        by_session: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            by_session[row["session_id"]].append(row)
        changed: list[Turn] = []
        hours: list[datetime] = []
        for turns in by_session.values():
            for row, cost in zip(turns, session_costs(turns=turns, overrides=overrides, prices=prices), strict=True):
                values = cost_values(cost)
                if any(row[name] != value for name, value in values.items()):
                    changed.append(Turn(pk=row["id"], **values))
                    hours.append(row["started_at"])
        rows_update(Turn, TURN_COSTS, changed, days=days)
        if hours:
            dirty_hours_mark(project_id=project.pk, timestamps=hours)
    return len(rows), len(changed)


def reprice_soon(*, project_id: int, model: str = "") -> None:
    """After this transaction commits, ask a background worker to price the project's sessions
    again (of `model`, when given). A broker outage is logged: `manage.py reprice` does it."""

    def send() -> None:
        try:
            task_send(REPRICE_TASK, project_id, model, queue=settings.SIMULATION_QUEUE)
        except Exception:
            logger.warning("could not enqueue re-pricing project %s; run manage.py reprice", project_id,
                           exc_info=True)

    transaction.on_commit(send, robust=True)

