"""The sessions list and one session's page (budget per turn, timeline, transcript)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from django.db.models import Q

from toolscope.telemetry.models import ModelPrice, Session, ToolCall, Turn
from toolscope.telemetry.retention import days_of, days_within
from toolscope.telemetry.selectors import call_values
from toolscope.telemetry.services.costs import (
    COST_FIELDS,
    cost_columns,
    session_cost_summary,
    session_costs,
)


def session_get(*, project_id: int, client_id: str) -> Session | None:
    return Session.objects.filter(project_id=project_id, client_id=client_id).first()


TURN_COLUMNS = ("id", "index", "model", "started_at", "time_known", "task_message", "messages", "input_tokens",
                "output_tokens",
                "cached_tokens", "cache_write_tokens", "cache_write_1h_tokens", "latency_ms", "system_prompt_tokens",
                "schema_tokens", "message_tokens",
                "call_tokens", "tool_output_tokens", "estimated_input_tokens", "window_share", "near_window",
                "advertised_set__tool_count", "tools_from", "shadow_tools")


def shadow_summary(*, turns: list[dict[str, Any]], calls: list[dict[str, Any]]) -> dict[str, Any] | None:
    """For turns recorded by toolscope-proxy in shadow mode (pure): how many tool definitions the
    agent sent and the policy would have sent, and the calls the policy would have missed (a call
    the model made to a tool its request would not have carried). None without such turns."""
    shadowed = {turn["index"]: set(turn["shadow_tools"]) for turn in turns if turn.get("shadow_tools") is not None}
    if not shadowed:
        return None
    missed = Counter(call["tool_name"] for call in calls
                     if call["turn_index"] in shadowed and call["tool_name"] not in shadowed[call["turn_index"]])
    return {"turns": len(shadowed),
            "sent": sum(turn["advertised_set__tool_count"] or 0 for turn in turns if turn["index"] in shadowed),
            "policy": sum(len(tools) for tools in shadowed.values()),
            "calls": sum(call["turn_index"] in shadowed for call in calls),
            "missed": sorted(missed.items(), key=lambda item: (-item[1], item[0]))}


def session_turns(*, session: Session) -> list[dict[str, Any]]:
    """The session's turns in order, with their budget and, where the provider reported input,
    the tokens no component explains: one query, in the session's day partitions."""
    return _unattributed(list(Turn.objects.filter(days_within(days_of([session])), session_id=session.pk)
                              .order_by("index").values(*TURN_COLUMNS)))


def session_cost_turns(*, session: Session, upto_index: int | None = None) -> list[dict[str, Any]]:
    """What pricing the session's requests reads (telemetry/services/costs.COST_FIELDS), from its
    first turn (a cache's state depends on every request before) to `upto_index` (all: None),
    in the order they were sent: one query, in the session's day partitions."""
    turns = Turn.objects.filter(days_within(days_of([session])), session_id=session.pk)
    if upto_index is not None:
        turns = turns.filter(index__lte=upto_index)
    return list(turns.order_by("index", "started_at", "id").values(*COST_FIELDS))


def session_cost(*, session: Session, turns: list[dict[str, Any]], whole: bool = False) -> dict[str, Any]:
    """`turns` (rows of this session, each with its "id") priced: each gets `cost` (a TurnCost, or
    None) and its cost columns (COST_COLUMNS); and the session's cost from its first turn to the
    last of `turns` (`whole`: to its end), the cache of a request depending on every one before.
    Two queries: the turns to price, and the project's own prices."""
    upto = None if whole else max((turn["index"] for turn in turns), default=None)
    if upto is None and not whole:
        return {}
    rows = session_cost_turns(session=session, upto_index=upto)
    costs = session_costs(turns=rows, overrides=list(ModelPrice.objects.filter(project_id=session.project_id)))
    by_id = {cost.turn_id: cost for cost in costs}
    for turn in turns:
        turn["cost"] = by_id.get(turn["id"])
        turn.update(cost_columns(turn["cost"]))
    return session_cost_summary(rows, costs)


def _unattributed(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
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


def session_calls(*, session: Session, columns: tuple[str, ...] = CALL_COLUMNS) -> list[dict[str, Any]]:
    """The session's tool calls in order, with their compaction artifacts (`columns` of them):
    one query, in the session's day partitions."""
    return call_values(ToolCall.objects.filter(session_id=session.pk).order_by("started_at", "id"), columns,
                       days_of([session]))


# Turns and calls on one page of a session (the read API's default; its `limit` goes to 2,000).
DETAIL_PAGE_SIZE = 500
DETAIL_PAGE_MAX = 2000


class Position(NamedTuple):
    """Where a turn or call stands in a session's order: turns by index, each index's turns (one,
    or several sharing it) followed by the calls of that turn index, each in (started_at, id)
    order. kind 0 is a turn, 1 a call."""

    turn_index: int
    kind: int
    started_at: datetime
    pk: int


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_INT, MAX_ID = 2**31 - 1, 2**63 - 1
# turn index _ 0 (a turn) or 1 (a call) _ its start in microseconds since the epoch _ its id
POSITION = re.compile(r"[0-9]{1,10}_[01]_[0-9]{1,20}_[0-9]{1,20}")


def position_format(position: Position) -> str:
    micros = max((position.started_at - EPOCH) // timedelta(microseconds=1), 0)  # rows are held to 1970-3000
    return f"{position.turn_index}_{position.kind}_{micros}_{position.pk}"


def position_parse(raw: str) -> Position | None:
    """The position a cursor of the documented shape names (None for any other text): beyond the
    largest index, time or id a row can have, it is past the session's end."""
    if not POSITION.fullmatch(raw):
        return None
    turn_index, kind, micros, pk = (int(part) for part in raw.split("_"))
    try:
        moment = EPOCH + timedelta(microseconds=micros)
    except OverflowError:
        moment = datetime.max.replace(tzinfo=UTC)
    return Position(min(turn_index, MAX_INT), kind, moment, min(pk, MAX_ID))


def _after(position: Position, index: str) -> Q:
    """Rows past `position` among those of its kind, `index` naming their turn index field. The
    bound on the index alone lets PostgreSQL start its index scan there, not at the session's start."""
    return Q(**{f"{index}__gte": position.turn_index}) & (
        Q(**{f"{index}__gt": position.turn_index})
        | Q(**{index: position.turn_index, "started_at__gt": position.started_at})
        | Q(**{index: position.turn_index, "started_at": position.started_at, "id__gt": position.pk}))


@dataclass(frozen=True)
class SessionDetailPage:
    turns: list[dict[str, Any]]
    calls: list[dict[str, Any]]
    # The last item's position when more follow: the next page starts after it.
    next_after: Position | None


def session_detail_page(*, session: Session, after: Position | None = None, start_turn: int | None = None,
                        limit: int = DETAIL_PAGE_SIZE) -> SessionDetailPage:
    """Up to `limit` of the session's turns and calls together, in session order, after `after`
    (or from the turn index `start_turn` on, its calls included; from the start without either),
    with what session_turns and session_calls give for each: two queries of at most limit + 1
    rows, in the session's day partitions, so a page of a 40,000-call session costs a page of a
    short one. Keyset pagination: no OFFSET, no COUNT (the session row holds the totals)."""
    days = days_of([session])
    turns = Turn.objects.filter(days_within(days), session_id=session.pk)
    calls = ToolCall.objects.filter(session_id=session.pk)
    if after is not None and after.kind == 0:
        turns = turns.filter(_after(after, "index"))
        calls = calls.filter(turn_index__gte=after.turn_index)
    elif after is not None:
        turns = turns.filter(index__gt=after.turn_index)
        calls = calls.filter(_after(after, "turn_index"))
    elif start_turn is not None:
        turns = turns.filter(index__gte=start_turn)
        calls = calls.filter(turn_index__gte=start_turn)
    turn_rows = list(turns.order_by("index", "started_at", "id").values(*TURN_COLUMNS)[:limit + 1])
    call_rows = call_values(calls.order_by("turn_index", "started_at", "id"), CALL_COLUMNS, days, limit + 1)
    items = sorted([(Position(turn["index"], 0, turn["started_at"], turn["id"]), turn) for turn in turn_rows]
                   + [(Position(call["turn_index"], 1, call["started_at"], call["id"]), call) for call in call_rows],
                   key=lambda item: item[0])
    shown = items[:limit]
    return SessionDetailPage(
        turns=_unattributed([row for position, row in shown if position.kind == 0]),
        calls=[row for position, row in shown if position.kind == 1],
        next_after=shown[-1][0] if len(items) > limit else None,
    )


def calls_elsewhere(*, session: Session, calls: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """The first occurrence of each repeat in `calls` that `calls` do not hold (on another page),
    by id: its event id and turn. One query, in the session's days; none when all are listed."""
    listed = {call["id"] for call in calls}
    missing = {call["duplicate_of_id"] for call in calls} - listed - {None}
    if not missing:
        return {}
    rows = ToolCall.objects.filter(days_within(days_of([session])), pk__in=missing)
    return {row["id"]: row for row in rows.values("id", "client_id", "turn_index")}


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
    for turn in out:
        turn["errors"] = sum(call["status"] != "ok" for call in turn["calls"])
    return out


def call_previews(*, calls: list[dict[str, Any]], chars: int) -> list[dict[str, Any]]:
    """Each call's output, error and artifact texts cut to their first `chars`
    characters (pure): `<field>_preview` and `<field>_more`, the characters left out (0: none).
    A page of 200 calls of multi-kilobyte logs weighed megabytes; the whole text is one link away."""
    for call in calls:
        for field in ("output", "error", "artifact__original", "artifact__compacted"):
            text = call.get(field) or ""
            call[f"{field}_preview"], call[f"{field}_more"] = text[:chars], max(len(text) - chars, 0)
    return calls


def session_call_text(*, session: Session, call_id: int) -> dict[str, Any] | None:
    """One call of the session with its whole output and its artifact's original (None: no such
    call in this session). One query, in the session's day partitions."""
    rows = call_values(ToolCall.objects.filter(session_id=session.pk, pk=call_id),
                       ("id", "tool_name", "turn_index", "output", "artifact__original"), days_of([session]), 1)
    return rows[0] if rows else None
