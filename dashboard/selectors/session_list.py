"""The sessions list: filtered, searched and sorted pages of the sessions' summary rows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import F, Q, TextField, Value
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce

from toolscope.telemetry.models import Session, Turn
from toolscope.telemetry.services.costs import NANOS

PAGE_SIZE = 50
SESSION_COLUMNS = ("id", "client_id", "agent_name", "model", "started_at", "ended_at", "turn_count",
                   "tool_call_count", "error_count", "duplicate_tokens", "max_window_share", "near_window",
                   "total_tokens", "cost_nanos")
# What the list sorts by, largest (newest) first; the cursor is (that value, id). Unpriced sessions
# sort after every priced one.
SORTS: dict[str, Any] = {"time": F("started_at"), "tokens": F("total_tokens"),
                         "cost": Coalesce("cost_nanos", Value(-1)), "errors": F("error_count"),
                         "turns": F("turn_count")}
# What toolscope-mcp (the MCP gateway) and toolscope-proxy (the model-API proxy) write into the
# metadata of the sessions they record.
GATEWAY_KEY, GATEWAY_NAME, PROXY_NAME = "gateway", "toolscope-mcp", "toolscope-proxy"


@dataclass(frozen=True)
class SessionPage:
    rows: list[dict[str, Any]]
    # (sort value, id) of the last row when more rows follow; the next page starts after it.
    next_after: tuple[Any, int] | None


def _session_filter(*, project_id: int, start: datetime, end: datetime, agent: str, model: str,
                    has_errors: bool | None, near_window: bool, gateway: bool = False, q: str = "",
                    proxy: bool = False) -> Q:
    condition = Q(project_id=project_id, started_at__gte=start, started_at__lt=end)
    if q:
        condition &= _search(project_id, start, q)
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
    if proxy:
        condition &= Q(**{f"metadata__{GATEWAY_KEY}": PROXY_NAME})
    return condition


def _search(project_id: int, start: datetime, q: str) -> Q:
    """Sessions whose id, metadata (tags included: they are in it) or a turn's task message holds
    `q`, case-insensitively. The turns looked at are the project's since the range's start."""
    tasks = Turn.objects.filter(project_id=project_id, started_at__gte=start, task_message__icontains=q)
    return (Q(client_id__icontains=q) | Q(metadata_text__icontains=q)
            | Q(pk__in=tasks.order_by().values("session_id")))


def session_list(
    *, project_id: int, start: datetime, end: datetime, agent: str = "", model: str = "",
    has_errors: bool | None = None, near_window: bool = False, gateway: bool = False, q: str = "",
    sort: str = "time", after: tuple[Any, int] | None = None, limit: int = PAGE_SIZE, proxy: bool = False,
) -> SessionPage:
    """`limit` rows after the cursor, largest `sort` value first (newest for time), from the
    sessions' summary fields: one query. Keyset pagination over (sort value, id): no OFFSET and
    no COUNT, so page 100 costs page 1."""
    condition = _session_filter(project_id=project_id, start=start, end=end, agent=agent, model=model,
                                has_errors=has_errors, near_window=near_window, gateway=gateway, q=q,
                                proxy=proxy)
    if after is not None:
        value, pk = after
        condition &= Q(sort_key__lt=value) | Q(sort_key=value, id__lt=pk)
    # One row more than shown tells whether a next page exists.
    rows = list(_annotated(sort).filter(condition).order_by("-sort_key", "-id")
                .values(*SESSION_COLUMNS, "sort_key", via=KT(f"metadata__{GATEWAY_KEY}"))[:limit + 1])
    more = len(rows) > limit
    rows = [_with_usd(row) for row in rows[:limit]]
    return SessionPage(rows=rows, next_after=(rows[-1]["sort_key"], rows[-1]["id"]) if more else None)


def _with_usd(row: dict[str, Any]) -> dict[str, Any]:
    """The row with its dollars (`usd`, exact; None when no request was priced)."""
    row["usd"] = None if row["cost_nanos"] is None else Decimal(row["cost_nanos"]) / NANOS
    return row


def _annotated(sort: str) -> Any:
    return Session.objects.annotate(sort_key=SORTS.get(sort, SORTS["time"]),
                                    metadata_text=Cast("metadata", TextField()))


def session_export(*, project_id: int, start: datetime, end: datetime, agent: str = "", model: str = "",
                   has_errors: bool | None = None, near_window: bool = False, gateway: bool = False, q: str = "",
                   sort: str = "time", proxy: bool = False) -> Any:
    """Every matching session for a CSV, in the list's order, streamed from a server-side cursor:
    one query."""
    condition = _session_filter(project_id=project_id, start=start, end=end, agent=agent, model=model,
                                has_errors=has_errors, near_window=near_window, gateway=gateway, q=q,
                                proxy=proxy)
    rows = (_annotated(sort).filter(condition).order_by("-sort_key", "-id")
            .values(*SESSION_COLUMNS, via=KT(f"metadata__{GATEWAY_KEY}")).iterator(chunk_size=2000))
    return (_with_usd(row) for row in rows)


def session_facets(*, project_id: int, start: datetime, end: datetime) -> dict[str, list[str]]:
    """The agents and models of the range's sessions, for the filter's choices: one query."""
    pairs = (Session.objects.filter(project_id=project_id, started_at__gte=start, started_at__lt=end)
             .order_by().values_list("agent_name", "model").distinct())
    agents, models = set(), set()
    for agent, model in pairs:
        agents.add(agent)
        models.add(model)
    return {"agents": sorted(a for a in agents if a), "models": sorted(m for m in models if m)}


