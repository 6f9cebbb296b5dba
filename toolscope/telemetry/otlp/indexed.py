"""The older, indexed GenAI shape (OpenLLMetry's opentelemetry-instrumentation-openai up to
0.54.0, and instrumentations of that generation) read as the current GenAI attributes, so that
genai.py maps it: `gen_ai.prompt.N.*` is the input messages, `llm.request.functions.N.*` the tool
definitions, `gen_ai.usage.prompt_tokens`/`completion_tokens` the usage, `llm.request.type` the
operation, Traceloop's `traceloop.association.properties.session_id` the conversation. The table
is in docs/otlp.md ("Older indexed attributes").
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from toolscope.telemetry.otlp.decode import Span
from toolscope.telemetry.otlp.jsontext import read_json

_PROMPT = re.compile(r"^gen_ai\.prompt\.(\d+)\.(.+)$")
_FUNCTION = re.compile(r"^llm\.request\.functions\.(\d+)\.(.+)$")
_TOOL_CALL = re.compile(r"^tool_calls\.(\d+)\.(.+)$")


def is_indexed(span: Span) -> bool:
    return "gen_ai.operation.name" not in span.attributes and (
        span.attributes.get("llm.request.type") in ("chat", "completion")
        or any(key.startswith("gen_ai.prompt.") for key in span.attributes))


def as_current(span: Span) -> Span:
    """`span` with the current GenAI attributes added when it has the indexed shape."""
    if not is_indexed(span):
        return span
    attributes = span.attributes
    out: dict[str, Any] = {"gen_ai.operation.name": "chat", "toolscope.conventions": "gen_ai_indexed"}
    messages: dict[int, dict[str, Any]] = {}
    functions: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if match := _PROMPT.match(key):
            messages.setdefault(int(match.group(1)), {})[match.group(2)] = value
        elif match := _FUNCTION.match(key):
            functions.setdefault(int(match.group(1)), {})[match.group(2)] = value
    if messages:
        out["gen_ai.input.messages"] = json.dumps([_message(fields) for _, fields in sorted(messages.items())])
    if functions:
        out["gen_ai.tool.definitions"] = json.dumps([_function(fields) for _, fields in sorted(functions.items())])
    for old, new in (("gen_ai.usage.prompt_tokens", "gen_ai.usage.input_tokens"),
                     ("gen_ai.usage.completion_tokens", "gen_ai.usage.output_tokens")):
        if old in attributes and new not in attributes:
            out[new] = attributes[old]
    session = attributes.get("traceloop.association.properties.session_id")
    if session and "gen_ai.conversation.id" not in attributes:
        out["gen_ai.conversation.id"] = session
    workflow = attributes.get("traceloop.workflow.name")
    if isinstance(workflow, str) and "gen_ai.agent.name" not in attributes:
        out["gen_ai.agent.name"] = workflow
    return replace(span, attributes={**attributes, **out})


def _message(fields: dict[str, Any]) -> dict[str, Any]:
    role, content = fields.get("role"), fields.get("content")
    parts: list[dict[str, Any]] = []
    if role == "tool":
        parts.append({"type": "tool_call_response", "id": fields.get("tool_call_id"), "response": content})
    elif isinstance(content, str) and content:
        parts.append({"type": "text", "content": content})
    calls: dict[int, dict[str, Any]] = {}
    for key, value in fields.items():
        if match := _TOOL_CALL.match(key):
            calls.setdefault(int(match.group(1)), {})[match.group(2)] = value
    for _, call in sorted(calls.items()):
        parts.append({"type": "tool_call", "id": call.get("id"), "name": call.get("name"),
                      "arguments": call.get("arguments")})
    return {"role": role, "parts": parts}


def _function(fields: dict[str, Any]) -> dict[str, Any]:
    parameters = fields.get("parameters")
    if isinstance(parameters, str):
        try:
            parameters = read_json(parameters)
        except ValueError:
            parameters = {}
    return {"type": "function", "name": fields.get("name"), "description": fields.get("description") or "",
            "parameters": parameters if isinstance(parameters, dict) else {}}
