"""The sessions list: filtered, searched and sorted pages of the sessions' summary rows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q
from django.db.models.fields.json import KT

from toolscope.telemetry.models import Session

PAGE_SIZE = 50
SESSION_COLUMNS = ("id", "client_id", "agent_name", "model", "started_at", "ended_at", "turn_count",
                   "tool_call_count", "error_count", "duplicate_tokens", "max_window_share", "near_window")
# What toolscope-mcp (the MCP gateway) writes into the metadata of the sessions it records.
GATEWAY_KEY, GATEWAY_NAME = "gateway", "toolscope-mcp"


@dataclass(frozen=True)
class SessionPage:
    rows: list[dict[str, Any]]
    # (started_at, id) of the last row when more rows follow; the next page starts after it.
    next_after: tuple[datetime, int] | None


def _session_filter(*, project_id: int, start: datetime, end: datetime, agent: str, model: str,
                    has_errors: bool | None, near_window: bool, gateway: bool = False) -> Q:
    condition = Q(project_id=project_id, started_at__gte=start, started_at__lt=end)
    if agent:
        condition &= Q(agent_name=agent)
    if model:
        condition &= Q(model=model)
    if has_errors is not None:
        condition &= Q(error_count__gt=0) if has_errors else Q(error_count=0)
    if near_window:
        condition &= Q(near_window=True)
    if gateway:
        condition &= Q(**{f"metadata__{GATEWAY_KEY}": GATEWAY_NAME})
    return condition


def session_list(
    *, project_id: int, start: datetime, end: datetime, agent: str = "", model: str = "",
    has_errors: bool | None = None, near_window: bool = False, gateway: bool = False,
    after: tuple[datetime, int] | None = None, limit: int = PAGE_SIZE,
) -> SessionPage:
    """Newest first, `limit` rows after the cursor, from the sessions' summary fields: one query.
    Keyset pagination over (started_at, id): no OFFSET and no COUNT, so page 100 costs page 1."""
    condition = _session_filter(project_id=project_id, start=start, end=end, agent=agent, model=model,
                                has_errors=has_errors, near_window=near_window, gateway=gateway)
    if after is not None:
        moment, pk = after
        condition &= Q(started_at__lt=moment) | Q(started_at=moment, id__lt=pk)
    # One row more than shown tells whether a next page exists.
    rows = list(Session.objects.filter(condition).order_by("-started_at", "-id")
                .values(*SESSION_COLUMNS, via=KT(f"metadata__{GATEWAY_KEY}"))[:limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return SessionPage(rows=rows, next_after=(rows[-1]["started_at"], rows[-1]["id"]) if more else None)


def session_export(*, project_id: int, start: datetime, end: datetime, agent: str = "", model: str = "",
                   has_errors: bool | None = None, near_window: bool = False, gateway: bool = False) -> Any:
    """Every matching session for a CSV, streamed from a server-side cursor: one query."""
    condition = _session_filter(project_id=project_id, start=start, end=end, agent=agent, model=model,
                                has_errors=has_errors, near_window=near_window, gateway=gateway)
    return (Session.objects.filter(condition).order_by("-started_at", "-id")
            .values(*SESSION_COLUMNS, via=KT(f"metadata__{GATEWAY_KEY}")).iterator(chunk_size=2000))


def session_facets(*, project_id: int, start: datetime, end: datetime) -> dict[str, list[str]]:
    """The agents and models of the range's sessions, for the filter's choices: one query."""
    pairs = (Session.objects.filter(project_id=project_id, started_at__gte=start, started_at__lt=end)
             .order_by().values_list("agent_name", "model").distinct())
    agents, models = set(), set()
    for agent, model in pairs:
        agents.add(agent)
        models.add(model)
    return {"agents": sorted(a for a in agents if a), "models": sorted(m for m in models if m)}


