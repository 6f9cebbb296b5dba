"""Claude Code's OpenTelemetry log events (OTLP logs) as toolscope's session, turn and tool_call
events. The attribute table is in docs/otlp.md ("Claude Code").

Claude Code sends one LogRecord per event: its body is `claude_code.<name>` and its `event.name`
attribute the bare name. Every event carries `session.id` and `event.sequence`, a counter that
orders the session's events. Numbers arrive as strings (before v2.1.122 everywhere, still on
tool_result) or as numbers: both are read.

- `api_request` (one model request) is a turn: index = its `event.sequence`, usage from
  `input_tokens`, `output_tokens`, `cache_read_tokens`, `model`, `duration_ms` as latency.
- `tool_result` is a tool call: `tool_name`, `success` as status, `duration_ms`, the arguments
  from `tool_input` (or `tool_parameters`, both opt-in with OTEL_LOG_TOOL_DETAILS=1), on the turn
  of the last api_request before it in the export (else its own sequence: a stand-in turn).
  Claude Code never exports a tool's output, only its size: the call has no output text.
- `tool_decision` with `decision` reject is a call with status `denied` (no tool_result follows).
- `user_prompt` with the prompt logged (OTEL_LOG_USER_PROMPTS=1) is the task message of the turns
  of the same `prompt.id`.

Ids: a turn is `<session>:api:<request_id or sequence>`, a call its `tool_use_id` (v2.1.119 on)
or `<session>:tool:<sequence>`: re-sent exports create nothing twice. Ids and names longer than
200 characters are fitted after their secrets are replaced (services/redact.identifier_fit).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from toolscope.telemetry.otlp.decode import LogRecord
from toolscope.telemetry.otlp.jsontext import read_json
from toolscope.telemetry.services.redact import identifier_fit, text_fit

PREFIX = "claude_code."
MAX_INDEX = 2**31 - 1
MAX_ERROR_LENGTH = 2000


def event_name(record: LogRecord) -> str:
    name = record.body if isinstance(record.body, str) and record.body else record.attributes.get("event.name")
    return name.removeprefix(PREFIX) if isinstance(name, str) else ""


def is_claude_code(record: LogRecord) -> bool:
    return (record.scope.startswith("com.anthropic.claude_code") or str(record.body).startswith(PREFIX)) and bool(
        record.attributes.get("session.id"))


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _int(value: Any) -> int | None:
    number = _number(value)
    return int(number) if number is not None and 0 <= number <= MAX_INDEX else None


def _time(record: LogRecord) -> str:
    stamp = record.attributes.get("event.timestamp")
    if isinstance(stamp, str) and stamp:
        return stamp
    return datetime.fromtimestamp(record.time_ns / 1e9, tz=UTC).isoformat().replace("+00:00", "Z")


def claude_code_events(records: Iterable[LogRecord]) -> list[dict[str, Any]]:
    """The events of the Claude Code log records among `records` (others are ignored)."""
    records = sorted((record for record in records if is_claude_code(record)),
                     key=lambda record: (_int(record.attributes.get("event.sequence")) or 0, record.time_ns))
    sessions: dict[str, dict[str, Any]] = {}
    turns: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    prompts: dict[str, str] = {}
    last_turn: dict[str, int] = {}
    for record in records:
        attributes, name = record.attributes, event_name(record)
        session = identifier_fit(str(attributes["session.id"]))
        event = sessions.setdefault(session, {
            "type": "session", "id": session, "timestamp": _time(record),
            "agent_name": identifier_fit(str(record.resource.get("service.name") or "claude-code")),
            "metadata": {"source": "otlp", "conventions": "claude_code", "content_captured": False}})
        sequence = _int(attributes.get("event.sequence"))
        if name == "user_prompt":
            prompt = attributes.get("prompt")
            if isinstance(prompt, str) and prompt and prompt != "<REDACTED>" and attributes.get("prompt.id"):
                prompts[str(attributes["prompt.id"])] = prompt
        elif name == "api_request" and sequence is not None:
            turn = _turn(record, session, sequence, prompts)
            turns.append(turn)
            last_turn[session] = sequence
            if "model" not in event and turn.get("model"):
                event["model"] = turn["model"]
        elif name == "tool_result" and sequence is not None:
            calls.append(_call(record, session, sequence, last_turn.get(session, sequence), status=(
                "ok" if str(attributes.get("success", "true")).lower() == "true" else "error")))
        elif name == "tool_decision" and sequence is not None and attributes.get("decision") == "reject":
            calls.append(_call(record, session, sequence, last_turn.get(session, sequence), status="denied"))
    return [*sessions.values(), *turns, *calls]


def _turn(record: LogRecord, session: str, sequence: int, prompts: dict[str, str]) -> dict[str, Any]:
    attributes = record.attributes
    request_id = attributes.get("request_id") or attributes.get("client_request_id")
    turn: dict[str, Any] = {"type": "turn", "id": identifier_fit(f"{session}:api:{request_id or sequence}"),
                            "session_id": session, "index": sequence, "timestamp": _time(record)}
    if isinstance(attributes.get("model"), str):
        turn["model"] = identifier_fit(attributes["model"])
    usage = {name: value for name, key in (("input_tokens", "input_tokens"), ("output_tokens", "output_tokens"),
                                            ("cached_tokens", "cache_read_tokens"),
                                            ("cache_write_tokens", "cache_creation_tokens"))
             if (value := _int(attributes.get(key))) is not None}
    if usage:
        turn["usage"] = usage
    duration = _number(attributes.get("duration_ms"))
    if duration is not None and duration >= 0:
        turn["latency_ms"] = duration
    prompt = prompts.get(str(attributes.get("prompt.id", "")))
    if prompt:
        turn["task_message"] = prompt
    return turn


def _call(record: LogRecord, session: str, sequence: int, turn_index: int, *, status: str) -> dict[str, Any]:
    attributes = record.attributes
    tool_use_id = attributes.get("tool_use_id")
    call: dict[str, Any] = {"type": "tool_call", "id": identifier_fit(str(tool_use_id or f"{session}:tool:{sequence}")),
                            "session_id": session, "turn_index": turn_index, "timestamp": _time(record),
                            "tool_name": identifier_fit(str(attributes.get("tool_name") or "unknown")),
                            "status": status}
    if tool_use_id:
        call["call_id"] = identifier_fit(str(tool_use_id))
    duration = _number(attributes.get("duration_ms"))
    if duration is not None and duration >= 0:
        call["duration_ms"] = duration
    for key in ("tool_input", "tool_parameters"):
        raw = attributes.get(key)
        if isinstance(raw, str):
            try:
                arguments = read_json(raw)
            except ValueError:
                continue
            if isinstance(arguments, dict):
                call["arguments"] = arguments
                break
    error = attributes.get("error")
    if status == "error" and isinstance(error, str):
        call["error"] = text_fit(error, MAX_ERROR_LENGTH)
    return call
