"""Validation of ingest events (docs/events.md): each raw event becomes a normalised dict or a
rejection naming the JSON path of the bad field.

Hand-written rather than DRF serializers: this runs for every event on the ingest hot path, and
a serializer costs an order of magnitude more per field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from toolscope.telemetry.models import Approval, ToolCallStatus

MAX_ID_LENGTH = 200
MAX_NAME_LENGTH = 200
EVENT_TYPES = ("session", "turn", "tool_call", "catalog")

# What the database can hold, checked here so that an accepted event is always stored: counts go
# to PostgreSQL integer columns (retries to a smallint), times to timestamptz through Python's
# datetime (years 1-9999, and an hour is added to the last one), free JSON to jsonb.
MAX_INT = 2**31 - 1
MAX_SMALLINT = 2**15 - 1
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(3000, 1, 1, tzinfo=UTC)
# Objects nested deeper than this in arguments, metadata or schemas are refused: no agent sends
# them, and every walk over them (redaction, canonical JSON, jsonb) recurses.
MAX_JSON_DEPTH = 64
# Integers in free JSON: what a signed or unsigned 64-bit field can hold. Larger ones come only
# from transcripts' argument strings (Python's json reads any size) and cannot be written back.
MIN_JSON_INT, MAX_JSON_INT = -(2**63), 2**64 - 1
REPLACEMENT = "\ufffd"
# In a Python string a surrogate code point is always unpaired: JSON's escaped pairs decode to one
# character.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


class Rejected(Exception):
    def __init__(self, reason: str, path: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.path = path


Check = Callable[[Any, str], Any]


def _join(path: str, key: str | int) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else key)


# JSON paths of the free text in the event being validated whose characters had to be replaced.
_altered: ContextVar[list[str] | None] = ContextVar("altered", default=None)


def _storable(value: str) -> bool:
    """Whether PostgreSQL can store the string as text: no NUL, no lone surrogate (JSON's
    "\\ud800" decodes to one, and it has no UTF-8 form)."""
    if "\x00" in value:
        return False
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def scrub(value: str, path: str) -> str:
    """Free text kept as sent, except NUL and lone surrogates, which become U+FFFD (the event
    records where)."""
    if _storable(value):
        return value
    altered = _altered.get()
    if altered is not None:
        altered.append(path)
    return _UNSTORABLE.sub(REPLACEMENT, value)


def text(value: Any, path: str) -> str:
    """Free text (outputs, messages, descriptions): any string, NUL and lone surrogates replaced."""
    if not isinstance(value, str):
        raise Rejected("must be a string", path)
    return scrub(value, path)


def short_text(value: Any, path: str, max_length: int = MAX_NAME_LENGTH) -> str:
    """A name or label: refused, not repaired, when it holds what the database cannot store."""
    if not isinstance(value, str):
        raise Rejected("must be a string", path)
    if len(value) > max_length:
        raise Rejected(f"must be at most {max_length} characters", path)
    if not _storable(value):
        raise Rejected("must not contain NUL (\\u0000) or unpaired surrogates", path)
    return value


def identifier(value: Any, path: str) -> str:
    value = short_text(value, path, MAX_ID_LENGTH)
    if not value.strip():
        raise Rejected("must not be empty", path)
    return value


def count(value: Any, path: str, maximum: int = MAX_INT) -> int:
    # bool is an int subclass; true is not a count.
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= maximum:
        raise Rejected(f"must be an integer from 0 to {maximum}", path)
    return value


def small_count(value: Any, path: str) -> int:
    return count(value, path, MAX_SMALLINT)


def duration(value: Any, path: str) -> float:
    """A number of milliseconds ≥ 0 (fractions kept). Stored as a double, but rounded into an
    integer column where the model keeps whole milliseconds, so the integer range applies."""
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= MAX_INT:
        raise Rejected(f"must be a number from 0 to {MAX_INT}", path)
    return float(value)


def boolean(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise Rejected("must be true or false", path)
    return value


def mapping(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Rejected("must be an object", path)
    return value


def json_object(value: Any, path: str) -> dict[str, Any]:
    """An object of free JSON (arguments, metadata, a schema), as jsonb can store it."""
    return json_value(mapping(value, path), path)


def json_value(value: Any, path: str, depth: int = 0) -> Any:
    """Free JSON kept as sent, with keys and strings scrubbed; refused when nested deeper than
    MAX_JSON_DEPTH or holding a number jsonb or JSON cannot (NaN, infinities, huge integers)."""
    if isinstance(value, str):
        return scrub(value, path)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        if not MIN_JSON_INT <= value <= MAX_JSON_INT:
            raise Rejected("holds an integer too large to store (at most 64 bits)", path)
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise Rejected("holds a number that is not finite", path)
        return value
    if depth >= MAX_JSON_DEPTH:
        raise Rejected(f"is nested deeper than {MAX_JSON_DEPTH} levels", path)
    if isinstance(value, dict):
        return {
            scrub(key, _join(path, key)) if isinstance(key, str) else str(key):
            json_value(item, _join(path, key), depth + 1)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [json_value(item, _join(path, i), depth + 1) for i, item in enumerate(value)]
    raise Rejected("must be JSON", path)


def timestamp(value: Any, path: str) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            moment = datetime.fromtimestamp(value, tz=UTC)
        except (OverflowError, OSError, ValueError):
            raise Rejected("is not a valid epoch time", path) from None
        return _in_range(moment, path)
    if not isinstance(value, str):
        raise Rejected("must be an ISO 8601 string or epoch seconds", path)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise Rejected("is not an ISO 8601 date-time", path) from None
    if parsed.tzinfo is None:
        raise Rejected("needs a time zone, e.g. 2026-11-22T10:00:00Z", path)
    return _in_range(parsed, path)


def _in_range(moment: datetime, path: str) -> str:
    try:
        moment = moment.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00:00+05:00 is in year 0
        raise Rejected(f"must be from {EARLIEST:%Y-%m-%d} to {LATEST:%Y-%m-%d}", path) from None
    if not EARLIEST <= moment < LATEST:
        raise Rejected(f"must be from {EARLIEST:%Y-%m-%d} to {LATEST:%Y-%m-%d}", path)
    return moment.isoformat()


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


_TOOL_FIELDS: dict[str, Check] = {"name": identifier, "description": text, "input_schema": json_object,
                                  "source": short_text}


def tool_definition(value: Any, path: str) -> dict[str, Any]:
    """A full definition, or {name, schema_hash} for one sent before. Every field present is
    checked whichever form it takes: each has one rule, wherever it is."""
    tool = fields({**_TOOL_FIELDS, "schema_hash": short_text}, ("name",))(value, path)
    if "schema_hash" in tool and "input_schema" not in tool:
        return {"name": tool["name"], "schema_hash": tool["schema_hash"]}
    tool.pop("schema_hash", None)
    return tool


def full_tool_definition(value: Any, path: str) -> dict[str, Any]:
    return fields(_TOOL_FIELDS, ("name", "input_schema"))(value, path)


message = fields({"role": short_text, "content": text}, ("role", "content"))
usage = fields({"input_tokens": count, "output_tokens": count, "cached_tokens": count, "cache_write_tokens": count,
                "cache_write_1h_tokens": count})

COMMON = {"type": text, "id": identifier, "timestamp": timestamp}
SPECS: dict[str, Check] = {
    "session": fields(
        {**COMMON, "session_id": identifier, "action": choice("start", "end"), "agent_name": short_text,
         "model": short_text, "metadata": json_object},
    ),
    "turn": fields(
        {**COMMON, "session_id": identifier, "index": count, "model": short_text,
         "tools": list_of(tool_definition), "usage": usage, "latency_ms": duration,
         "system_prompt": text, "system_prompt_chars": count, "task_message": text,
         "messages": list_of(message), "timed": boolean, "tools_known": boolean,
         "shadow_tools": list_of(identifier)},
        ("session_id", "index"),
    ),
    "tool_call": fields(
        {**COMMON, "session_id": identifier, "turn_index": count, "call_id": short_text,
         "tool_name": identifier, "arguments": json_object, "output": text,
         "status": choice(*ToolCallStatus.values), "error": text, "duration_ms": duration,
         "retries": small_count, "approval": choice(*Approval.values), "status_from": short_text,
         "timed": boolean},
        ("session_id", "turn_index", "tool_name"),
    ),
    "catalog": fields({**COMMON, "tools": list_of(full_tool_definition)}, ("tools",)),
}


def event_validate(raw: Any, *, path: str, received_at: str) -> dict[str, Any]:
    """The normalised event, or Rejected with the path of the first bad field. Every value it
    keeps fits the column the workers write it to; free text that held NUL or lone surrogates has
    them replaced by U+FFFD and lists those paths under "altered"."""
    raw = mapping(raw, path)
    if raw.get("id") is None:
        raise Rejected("is required", _join(path, "id"))
    kind = raw.get("type")
    if not isinstance(kind, str) or kind not in SPECS:
        raise Rejected(f"must be one of: {', '.join(EVENT_TYPES)}", _join(path, "type"))
    altered: list[str] = []
    token = _altered.set(altered)
    try:
        event = SPECS[kind](raw, path)
    finally:
        _altered.reset(token)
    if altered:
        # Where characters were replaced; a tool call keeps the mark (ToolCall.altered).
        event["altered"] = altered
    event.setdefault("timestamp", received_at)
    if kind == "session":
        event.setdefault("session_id", event["id"])
        event.setdefault("action", "start")
    return event
