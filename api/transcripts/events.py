"""A parsed conversation as toolscope ingest events (docs/events.md): one session start, one turn
per model request, one tool_call per call.

Ids derive from the session id, the turn index and the provider's call id, so the same transcript
sent twice maps to the same ids and ingest answers `duplicate` instead of storing it twice.

No format carries a time per message, so none is invented: a turn is stamped with its request's
time when the host stored one beside the assistant message (`timestamp`, as Claude Code's
transcripts do), else with the time of the turn before it, or the session's start (an hour
bucket for the rollups), `timed: false`; its calls with its time, `timed: false` (when a call
ran is not stored). Pages draw untimed ones by order. The transcript is the whole conversation as
of its receipt, so its session ends then (a session event is an upsert: sending the transcript
again, longer or not, moves the end).

A call's status is sent only when the transcript says it: Anthropic's `is_error`, a call to a tool
never advertised, arguments that are not JSON (with `status_from` naming which). Otherwise the
worker classifies the output's text by the project's error patterns (telemetry/error_patterns.py).

A turn's `task_message` is the latest user message before its request, new at that turn or
earlier (as an agent passes its current instruction to `tools()`): every request of a multi-turn
chat carries the instruction it works on. Tool results are no instruction.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from api.transcripts.common import JSON, Conversation, ToolCall, TranscriptError, Turn

MAX_ID_LENGTH = 200  # docs/events.md: an event id is 1-200 characters


@dataclass(frozen=True)
class SessionInfo:
    session_id: str
    start: datetime
    received_at: datetime
    agent_name: str | None
    model: str | None
    metadata: JSON | None


def build_events(conversation: Conversation, session: SessionInfo) -> list[JSON]:
    """The session's start, each turn followed by its calls, the session's end.

    Every turn advertises the transcript's tools: one copy of the list (the body's own is never
    handed out), shared by all turn events, as each turn's system prompt is the one string.
    Ingest validates and redacts such a shared value once (services/ingest.py), so a session of
    thousands of turns costs one tool list, not thousands."""
    events = [_session_event(session)]
    known = None if conversation.tools is None else {tool["name"] for tool in conversation.tools}
    tools = copy.deepcopy(conversation.tools)
    at = _iso(session.start)  # until a turn says when it ran: `timed: false` says it did not
    task: str | None = None
    for index, turn in enumerate(conversation.turns):
        task = _latest_instruction(turn) or task
        at = _iso(turn.at) if turn.at is not None else at
        events.append(_turn_event(turn, index, tools, session, at, task, timed=turn.at is not None))
        events.extend(_call_event(call, known, session.session_id, at) for call in turn.calls)
    events.append(_session_end(session))
    return events


def _session_end(session: SessionInfo) -> JSON:
    return {
        "type": "session", "id": f"{session.session_id}:end", "session_id": session.session_id,
        "action": "end", "timestamp": _iso(max(session.start, session.received_at)),
    }


def _session_event(session: SessionInfo) -> JSON:
    event: JSON = {"type": "session", "id": session.session_id, "action": "start"}
    optional = {"agent_name": session.agent_name, "model": session.model, "metadata": session.metadata}
    event.update({key: value for key, value in optional.items() if value is not None})
    event["timestamp"] = _iso(session.start)
    return event


def _latest_instruction(turn: Turn) -> str | None:
    """The last user message new at this turn: the instruction the request answers. Tool results
    are no user message here (the parsers attach them to their calls)."""
    return next((m["content"] for m in reversed(turn.messages) if m["role"] == "user"), None)


def _turn_event(turn: Turn, index: int, tools: list[JSON] | None, session: SessionInfo, at: str,
                task: str | None, *, timed: bool = False) -> JSON:
    event: JSON = {
        "type": "turn",
        "id": f"{session.session_id}:t{index}",
        "session_id": session.session_id,
        "index": index,
        "timestamp": at,
        "timed": timed,
    }
    if session.model is not None:
        event["model"] = session.model
    if tools is not None:
        event["tools"] = tools
    if turn.system_prompt:
        event["system_prompt"] = turn.system_prompt
    if task is not None:
        event["task_message"] = task
    event["messages"] = [dict(message) for message in turn.messages]
    if turn.usage:
        event["usage"] = dict(turn.usage)
    return event


def _call_event(call: ToolCall, known: set[str] | None, session_id: str, at: str) -> JSON:
    event_id = f"{session_id}:call:{call.call_id}"
    if len(event_id) > MAX_ID_LENGTH:
        raise TranscriptError(
            f"too long: the event id {session_id!r}:call:<id> must fit in {MAX_ID_LENGTH} characters",
            call.path,
        )
    arguments, valid = parse_arguments(call.arguments)
    event: JSON = {
        "type": "tool_call",
        "id": event_id,
        "session_id": session_id,
        "turn_index": call.turn_index,
        "call_id": call.call_id,
        "tool_name": call.name,
        "arguments": arguments,
        "timestamp": at,
        "timed": False,
    }
    if (status := _status(call, known, valid_arguments=valid)) is not None:
        event["status"], event["status_from"] = status
    if call.output is not None:
        event["output"] = call.output
    return event


def parse_arguments(raw: Any) -> tuple[JSON, bool]:
    """(arguments, valid). Arguments that are not a JSON object are kept as {"_raw": text}.

    Read as the request body is (orjson): what Python's json module would also take but toolscope
    cannot store (NaN, Infinity, lone surrogates, nesting past 1,024 levels) is not JSON here
    either, and integers beyond 64 bits become floats, as in a body."""
    if isinstance(raw, dict):
        return copy.deepcopy(raw), True  # changing an event (redaction) must not change the body
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {"_raw": raw}, False
    return (parsed, True) if isinstance(parsed, dict) else ({"_raw": raw}, False)


def _status(call: ToolCall, known: set[str] | None, *, valid_arguments: bool) -> tuple[str, str] | None:
    """(status, what said so), or None when the transcript does not say (no flag in the format)."""
    # The most specific cause first: a call to a tool the model was never offered fails whatever
    # its arguments, and arguments that are not JSON explain the error result they get back.
    if known is not None and call.name not in known:
        return "unknown_tool", "tool not advertised"
    if not valid_arguments:
        return "schema_error", "arguments not JSON"
    if call.is_error is None:
        return None
    return ("error" if call.is_error else "ok"), "is_error flag"


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
