"""Bringing what agents have at hand (provider SDK objects, OpenAI/Anthropic/MCP shapes) into the
event format of docs/events.md. Nothing here runs on the tool-call hot path except `now`.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from .engine.schemas import normalize_tool, schema_hash
from .engine.usage import provider_usage

Event = dict[str, Any]

_UTC = timezone.utc  # noqa: UP017 -- the SDK supports Python 3.10, which has no datetime.UTC

#: Event timestamps are taken as epoch seconds on the caller's thread (cheap) and written as
#: ISO 8601 UTC by the exporter thread.
now = time.time


def iso_timestamp(epoch_seconds: float) -> str:
    text = datetime.fromtimestamp(epoch_seconds, _UTC).isoformat(timespec="microseconds")
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def plain(value: Any) -> Any:
    """A provider SDK object (pydantic v2 or v1 model, dataclass) as plain data; anything else as
    is."""
    if value is None or isinstance(value, dict | list | str | int | float | bool):
        return value
    try:
        dump = getattr(value, "model_dump", None)
        if callable(dump):
            return dump(exclude_none=True)
        legacy = getattr(value, "dict", None)
        if callable(legacy) and hasattr(value, "__fields__"):
            return legacy(exclude_none=True)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return dataclasses.asdict(value)
        if isinstance(value, Mapping):
            return dict(value)
    except Exception:
        return value
    return value


def json_default(value: Any) -> Any:
    """For json.dumps: provider SDK objects as plain data, bytes as text, anything else as str()."""
    converted = plain(value)
    if converted is not value:
        return converted
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, set | frozenset):
        return list(value)
    return str(value)


def json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=json_default)


def output_text(value: Any) -> str:
    """What a tool returned, as the text the model saw: JSON for containers, str() otherwise."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    value = plain(value)
    if isinstance(value, dict | list | tuple):
        try:
            return json_text(value)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


def arguments_object(value: Any) -> dict[str, Any]:
    """Tool-call arguments as an object. OpenAI hands them over as a JSON string."""
    value = plain(value)
    if isinstance(value, str):
        try:
            parsed = json.loads(value) if value.strip() else {}
        except ValueError:
            return {"_raw": value}
        return parsed if isinstance(parsed, dict) else {"_raw": parsed}
    if isinstance(value, dict):
        return value
    if isinstance(value, Mapping):
        return dict(value)
    return {"_raw": value}


def tool_definition(definition: Any) -> tuple[dict[str, Any], str | None]:
    """(event form, schema hash) of one advertised tool; the hash is None for a `{"name",
    "schema_hash"}` reference, which is passed through."""
    definition = plain(definition)
    if not isinstance(definition, dict):
        raise TypeError(f"a tool definition must be a dict, not {type(definition).__name__}")
    if "schema_hash" in definition and not {"input_schema", "parameters", "inputSchema", "function"} & set(definition):
        return {"name": definition.get("name", ""), "schema_hash": definition["schema_hash"]}, None
    normalized = normalize_tool(definition)
    digest = schema_hash(normalized["name"], normalized["description"], normalized["input_schema"])
    full = {
        "name": normalized["name"],
        "description": normalized["description"],
        "input_schema": normalized["input_schema"],
    }
    if normalized["source"]:
        full["source"] = normalized["source"]
    return full, digest


def full_definition_hash(tool: Mapping[str, Any]) -> str | None:
    """The schema hash of a full definition as sent in a turn event (None for a reference)."""
    if "input_schema" not in tool:
        return None
    return schema_hash(tool.get("name", ""), tool.get("description", "") or "", tool.get("input_schema") or {})


_TEXT_BLOCKS = ("text", "input_text", "output_text")
_TOOL_OUTPUT_BLOCKS = ("tool_result", "function_call_output")


def message_text(content: Any) -> tuple[str, bool]:
    """(text, only tool outputs) of a message's content: a string, or a list of content blocks
    (Anthropic, OpenAI multi-part, Responses) whose text parts are joined."""
    content = plain(content)
    if content is None:
        return "", False
    if isinstance(content, str):
        return content, False
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return str(content), False
    parts: list[str] = []
    tool_outputs = 0
    for block in content:
        block = plain(block)
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            kind = block.get("type")
            if kind in _TOOL_OUTPUT_BLOCKS:
                tool_outputs += 1
            elif kind in _TEXT_BLOCKS or (kind is None and isinstance(block.get("text"), str)):
                text = block.get("text")
                if isinstance(text, str):
                    parts.append(text)
    return "\n".join(parts), bool(content) and tool_outputs == len(content)


def messages(items: Iterable[Any]) -> list[dict[str, str]]:
    """The user/assistant messages of a turn as `{"role", "content"}` with string content.

    Tool outputs (OpenAI `role: "tool"`, Anthropic user messages made only of `tool_result`
    blocks, Responses `function_call_output` items) are left out: they are reported by tool_call
    events. Assistant tool calls keep their text (possibly empty).
    """
    out: list[dict[str, str]] = []
    for item in items:
        item = plain(item)
        if not isinstance(item, dict):
            continue
        role = item.get("role")
        if item.get("type") in _TOOL_OUTPUT_BLOCKS or role in ("tool", "function"):
            continue
        if not isinstance(role, str) or not role:
            continue
        text, only_tool_outputs = message_text(item.get("content"))
        if only_tool_outputs:
            continue
        out.append({"role": role[:200], "content": text})
    return out


def usage(value: Any) -> dict[str, int]:
    """A provider SDK's usage object (or plain data) in toolscope's terms (engine/usage.py); its
    details (`prompt_tokens_details`, `cache_creation`...) may be SDK objects too."""
    raw = plain(value)
    return provider_usage({key: plain(item) for key, item in raw.items()} if isinstance(raw, dict) else raw)
