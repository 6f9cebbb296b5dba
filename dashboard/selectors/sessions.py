"""The sessions list and one session's page (budget per turn, timeline, transcript)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q
from django.db.models.fields.json import KT

from toolscope.telemetry.models import Session, ToolCall, Turn
from toolscope.telemetry.retention import days_of, days_within
from toolscope.telemetry.selectors import call_values

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


def session_get(*, project_id: int, client_id: str) -> Session | None:
    return Session.objects.filter(project_id=project_id, client_id=client_id).first()


TURN_COLUMNS = ("id", "index", "model", "started_at", "time_known", "task_message", "messages", "input_tokens",
                "output_tokens",
                "cached_tokens", "latency_ms", "system_prompt_tokens", "schema_tokens", "message_tokens",
                "call_tokens", "tool_output_tokens", "estimated_input_tokens", "window_share", "near_window",
                "advertised_set__tool_count")


def session_turns(*, session: Session) -> list[dict[str, Any]]:
    """The session's turns in order, with their budget and, where the provider reported input,
    the tokens no component explains: one query, in the session's day partitions."""
    turns = list(Turn.objects.filter(days_within(days_of([session])), session_id=session.pk)
                 .order_by("index").values(*TURN_COLUMNS))
    for turn in turns:
        reported, estimated = turn["input_tokens"], turn["estimated_input_tokens"]
        turn["unattributed_tokens"] = None if reported is None or estimated is None else reported - estimated
    return turns


CALL_COLUMNS = ("id", "turn_index", "client_id", "call_id", "tool_name", "arguments", "output", "status", "error",
                "error_rule", "error_text_unflagged", "duration_ms", "retries", "approval", "started_at", "time_known",
                "output_tokens", "argument_tokens",
                "duplicate_of_id", "duplicate_tokens", "placeholder", "artifact_id", "artifact__original",
                "artifact__compacted", "artifact__tokens_before", "artifact__tokens_after", "artifact__strategy",
                "artifact__content_id")


def session_calls(*, session: Session) -> list[dict[str, Any]]:
    """The session's tool calls in order, with their compaction artifacts: one query, in the
    session's day partitions."""
    return call_values(ToolCall.objects.filter(session_id=session.pk).order_by("started_at", "id"), CALL_COLUMNS,
                       days_of([session]))


def session_transcript(*, turns: list[dict[str, Any]], calls: list[dict[str, Any]],
                       started_at: datetime) -> list[dict[str, Any]]:
    """Turns with their calls attached (pure). Calls whose turn was never recorded go to a
    stand-in turn, so no call is dropped. Each call gets its offset from the session start, or
    None when its source recorded no time (a transcript): it is then drawn by its order only."""
    by_index: dict[int, list[dict[str, Any]]] = {}
    for call in calls:
        call["offset_s"] = (call["started_at"] - started_at).total_seconds() if call["time_known"] else None
        by_index.setdefault(call["turn_index"], []).append(call)
    out = [{**turn, "calls": by_index.pop(turn["index"], [])} for turn in turns]
    for index in sorted(by_index):
        out.append({"index": index, "missing": True, "messages": [], "task_message": "", "calls": by_index[index]})
    out.sort(key=lambda turn: turn["index"])
    return out
