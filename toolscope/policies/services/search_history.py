"""A project's learned search history: refreshed from its recorded sessions, served with policies.

`search_history_refresh` reads the project's most recent sessions in three queries (their ids,
their turns' task messages, their calls with only a `tool_search` call's query taken out of the JSON),
learns `{tool: texts}` with the engine (toolscope_agent.engine.history, the code the benchmark
evaluates) and stores it with a revision hash. A changed revision invalidates the served
policies, so agents get the new history at their next revalidation (a changed ETag); an
unchanged one writes nothing but the refresh time. Running it twice is harmless: the second run
computes the same revision.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

import orjson
from django.db import transaction
from django.utils import timezone
from toolscope_agent.engine.history import SEARCH_TOOL, RecordedSession, learn_history

from toolscope.policies.models import SearchHistory
from toolscope.policies.services.serving import policy_served_invalidate
from toolscope.telemetry.models import Project, Session, ToolCall, Turn

HISTORY_DAYS = 30
MAX_SESSIONS = 5000


def search_history_refresh(*, project: Project, days: int = HISTORY_DAYS, max_sessions: int = MAX_SESSIONS,
                           until: datetime | None = None) -> SearchHistory:
    """Learn the history of the project's newest `max_sessions` sessions of the `days` before
    `until` (now)."""
    until = until or timezone.now()
    since = until - timedelta(days=days)
    session_ids = list(Session.objects.filter(project=project, started_at__gte=since, started_at__lte=until)
                       .order_by("-started_at", "-id").values_list("id", flat=True)[:max_sessions])
    tools = learn_history(_recorded_sessions(session_ids))
    revision = hashlib.sha256(orjson.dumps(tools, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]
    fields = {"tools": tools, "revision": revision, "sessions": len(session_ids), "refreshed_at": timezone.now()}
    with transaction.atomic():
        history = SearchHistory.objects.select_for_update().filter(project=project).first()
        changed = history is None or history.revision != revision
        if history is None:
            history = SearchHistory.objects.create(project=project, **fields)
        else:
            SearchHistory.objects.filter(pk=history.pk).update(**fields)
            for name, value in fields.items():
                setattr(history, name, value)
        if changed:
            policy_served_invalidate(project_id=project.pk)
    return history


def _recorded_sessions(session_ids: list[int]) -> list[RecordedSession]:
    """The sessions in the order of `session_ids` (newest first), as the engine reads them: each
    call with the task of its request. A turn without a task works on the latest one before it
    in its session (an agent that sends its instruction on the first turn only), as the
    simulator replays it."""
    tasks: dict[tuple[int, int], str] = {}
    latest: dict[int, str] = {}
    for session_id, index, message in (Turn.objects.filter(session_id__in=session_ids)
                                       .order_by("session_id", "index", "started_at", "id")
                                       .values_list("session_id", "index", "task_message")):
        latest[session_id] = message or latest.get(session_id, "")
        tasks.setdefault((session_id, index), latest[session_id])  # two turns of one index: the first's
    calls: dict[int, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    call_tasks: dict[int, list[str]] = defaultdict(list)
    rows = (ToolCall.objects.filter(session_id__in=session_ids)
            .order_by("session_id", "turn_index", "started_at", "id")
            .values_list("session_id", "turn_index", "tool_name", "arguments__query"))
    for session_id, turn_index, name, query in rows:
        calls[session_id].append((name, {"query": query} if name == SEARCH_TOOL else {}))
        call_tasks[session_id].append(tasks.get((session_id, turn_index), ""))
    # A call of no stored turn keeps the session's first task, as before tasks were per request.
    first = {session_id: task for (session_id, _), task in reversed(tasks.items()) if task}
    return [RecordedSession(task_message=first.get(sid, ""), calls=calls.get(sid, ()),
                            call_tasks=call_tasks.get(sid, ())) for sid in session_ids]


def search_history_refresh_active(*, days: int = 1) -> int:
    """Refresh every project that recorded a session in the last `days`; how many were."""
    since = timezone.now() - timedelta(days=days)
    project_ids = Session.objects.filter(started_at__gte=since).values_list("project_id", flat=True).distinct()
    projects = Project.objects.filter(pk__in=list(project_ids)).order_by("pk")
    for project in projects:
        search_history_refresh(project=project)
    return len(projects)
