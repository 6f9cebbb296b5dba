"""Validation of ingest events (docs/events.md): each raw event becomes a normalised dict or a
rejection naming the JSON path of the bad field.

Hand-written rather than DRF serializers: this runs for every event on the ingest hot path, and
a serializer costs an order of magnitude more per field.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from toolscope.telemetry.models import Approval, ToolCallStatus

MAX_ID_LENGTH = 200
MAX_NAME_LENGTH = 200
EVENT_TYPES = ("session", "turn", "tool_call", "catalog")


class Rejected(Exception):
    def __init__(self, reason: str, path: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.path = path


Check = Callable[[Any, str], Any]


def _join(path: str, key: str | int) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else key)


def text(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise Rejected("must be a string", path)
    return value


def short_text(value: Any, path: str, max_length: int = MAX_NAME_LENGTH) -> str:
    value = text(value, path)
    if len(value) > max_length:
        raise Rejected(f"must be at most {max_length} characters", path)
    return value


def identifier(value: Any, path: str) -> str:
    value = short_text(value, path, MAX_ID_LENGTH)
    if not value.strip():
        raise Rejected("must not be empty", path)
    return value


def count(value: Any, path: str) -> int:
    # bool is an int subclass; true is not a count.
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise Rejected("must be an integer ≥ 0", path)
    return value


def duration(value: Any, path: str) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
        raise Rejected("must be a number ≥ 0", path)
    return float(value)


def mapping(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Rejected("must be an object", path)
    return value


def timestamp(value: Any, path: str) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value, tz=UTC).isoformat()
        except (OverflowError, OSError, ValueError):
            raise Rejected("is not a valid epoch time", path) from None
    if not isinstance(value, str):
        raise Rejected("must be an ISO 8601 string or epoch seconds", path)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise Rejected("is not an ISO 8601 date-time", path) from None
    if parsed.tzinfo is None:
        raise Rejected("needs a time zone, e.g. 2026-11-22T10:00:00Z", path)
    return parsed.astimezone(UTC).isoformat()


def choice(*options: str) -> Check:
    def check(value: Any, path: str) -> str:
        if value not in options:
            raise Rejected(f"must be one of: {', '.join(options)}", path)
        return str(value)

    return check


def list_of(item: Check) -> Check:
    def check(value: Any, path: str) -> list[Any]:
        if not isinstance(value, list):
            raise Rejected("must be a list", path)
        return [item(element, _join(path, i)) for i, element in enumerate(value)]

    return check


def fields(spec: dict[str, Check], required: tuple[str, ...] = ()) -> Check:
    """An object check: required keys must be present; unknown keys are dropped."""

    def check(value: Any, path: str) -> dict[str, Any]:
        value = mapping(value, path)
        for key in required:
            if value.get(key) is None:
                raise Rejected("is required", _join(path, key))
        return {
            key: spec[key](value[key], _join(path, key))
            for key in spec
            if value.get(key) is not None
        }

    return check


def tool_definition(value: Any, path: str) -> dict[str, Any]:
    value = mapping(value, path)
    if "schema_hash" in value and "input_schema" not in value:
        return fields({"name": identifier, "schema_hash": short_text}, ("name", "schema_hash"))(value, path)
    return fields(
        {"name": identifier, "description": text, "input_schema": mapping, "source": short_text},
        ("name",),
    )(value, path)


def full_tool_definition(value: Any, path: str) -> dict[str, Any]:
    return fields(
        {"name": identifier, "description": text, "input_schema": mapping, "source": short_text},
        ("name", "input_schema"),
    )(value, path)


message = fields({"role": short_text, "content": text}, ("role", "content"))
usage = fields({"input_tokens": count, "output_tokens": count, "cached_tokens": count})

COMMON = {"type": text, "id": identifier, "timestamp": timestamp}
SPECS: dict[str, Check] = {
    "session": fields(
        {**COMMON, "session_id": identifier, "action": choice("start", "end"), "agent_name": short_text,
         "model": short_text, "metadata": mapping},
    ),
    "turn": fields(
        {**COMMON, "session_id": identifier, "index": count, "model": short_text,
         "tools": list_of(tool_definition), "usage": usage, "latency_ms": duration,
         "system_prompt": text, "system_prompt_chars": count, "task_message": text,
         "messages": list_of(message)},
        ("session_id", "index"),
    ),
    "tool_call": fields(
        {**COMMON, "session_id": identifier, "turn_index": count, "call_id": short_text,
         "tool_name": identifier, "arguments": mapping, "output": text,
         "status": choice(*ToolCallStatus.values), "error": text, "duration_ms": duration,
         "retries": count, "approval": choice(*Approval.values)},
        ("session_id", "turn_index", "tool_name"),
    ),
    "catalog": fields({**COMMON, "tools": list_of(full_tool_definition)}, ("tools",)),
}


def event_validate(raw: Any, *, path: str, received_at: str) -> dict[str, Any]:
    """The normalised event, or Rejected with the path of the first bad field."""
    raw = mapping(raw, path)
    if raw.get("id") is None:
        raise Rejected("is required", _join(path, "id"))
    kind = raw.get("type")
    if kind not in SPECS:
        raise Rejected(f"must be one of: {', '.join(EVENT_TYPES)}", _join(path, "type"))
    event = SPECS[kind](raw, path)
    event.setdefault("timestamp", received_at)
    if kind == "session":
        event.setdefault("session_id", event["id"])
        event.setdefault("action", "start")
    return event
