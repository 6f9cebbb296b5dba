"""OpenInference spans (Arize: the OpenAI, Anthropic, LangChain, LlamaIndex, OpenAI Agents…
instrumentations) read as OpenTelemetry GenAI spans, so that genai.py maps both alike.

OpenInference flattens lists into indexed attributes (`llm.input_messages.0.message.role`); this
module gathers them back into the GenAI conventions' JSON shapes. The table is in docs/otlp.md
("OpenInference").
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from toolscope.telemetry.otlp.decode import Span
from toolscope.telemetry.otlp.jsontext import read_json

KIND = "openinference.span.kind"
_INDEXED = re.compile(r"^(llm\.(?:input|output)_messages|llm\.tools)\.(\d+)\.(.+)$")


def as_genai(span: Span) -> Span:
    """`span` with GenAI attributes added when it is an OpenInference LLM or TOOL span."""
    kind = span.attributes.get(KIND)
    if kind == "LLM":
        return replace(span, attributes={**span.attributes, **_llm(span.attributes)})
    if kind == "TOOL":
        return replace(span, attributes={**span.attributes, **_tool(span.attributes)})
    return span


def _grouped(attributes: dict[str, Any]) -> dict[str, dict[int, dict[str, Any]]]:
    """{"llm.input_messages": {0: {"message.role": ..., ...}}, ...} from the indexed attributes."""
    groups: dict[str, dict[int, dict[str, Any]]] = {}
    for key, value in attributes.items():
        match = _INDEXED.match(key)
        if match:
            groups.setdefault(match.group(1), {}).setdefault(int(match.group(2)), {})[match.group(3)] = value
    return groups


_CONTENT_PART = re.compile(r"^message\.contents\.(\d+)\.message_content\.(type|text)$")


def _texts(fields: dict[str, Any]) -> list[str]:
    """A message's text: `message.content`, else its list of parts (`message.contents.N.
    message_content.type/text`, what the instrumentations write for list content), in order."""
    content = fields.get("message.content")
    if isinstance(content, str) and content:
        return [content]
    parts: dict[int, dict[str, Any]] = {}
    for key, value in fields.items():
        match = _CONTENT_PART.match(key)
        if match:
            parts.setdefault(int(match.group(1)), {})[match.group(2)] = value
    return [part["text"] for _, part in sorted(parts.items())
            if part.get("type", "text") == "text" and isinstance(part.get("text"), str) and part["text"]]


def _message(fields: dict[str, Any]) -> dict[str, Any]:
    role = fields.get("message.role")
    parts: list[dict[str, Any]] = []
    texts = _texts(fields)
    if role == "tool":
        parts.append({"type": "tool_call_response", "id": fields.get("message.tool_call_id"),
                      "response": "\n".join(texts) if texts else fields.get("message.content")})
    else:
        parts.extend({"type": "text", "content": text} for text in texts)
    calls: dict[int, dict[str, Any]] = {}
    for key, value in fields.items():
        match = re.match(r"^message\.tool_calls\.(\d+)\.tool_call\.(.+)$", key)
        if match:
            calls.setdefault(int(match.group(1)), {})[match.group(2)] = value
    for _, call in sorted(calls.items()):
        parts.append({"type": "tool_call", "id": call.get("id"), "name": call.get("function.name"),
                      "arguments": call.get("function.arguments")})
    return {"role": role, "parts": parts}


def _llm(attributes: dict[str, Any]) -> dict[str, Any]:
    groups = _grouped(attributes)
    out: dict[str, Any] = {"gen_ai.operation.name": "chat", "toolscope.conventions": "openinference"}
    if "session.id" in attributes:
        out["gen_ai.conversation.id"] = attributes["session.id"]
    if "llm.model_name" in attributes:
        out["gen_ai.request.model"] = attributes["llm.model_name"]
    for source, target in (("llm.token_count.prompt", "gen_ai.usage.input_tokens"),
                           ("llm.token_count.completion", "gen_ai.usage.output_tokens"),
                           ("llm.token_count.prompt_details.cache_read", "gen_ai.usage.cache_read.input_tokens"),
                           ("llm.token_count.prompt_details.cache_write",
                            "gen_ai.usage.cache_creation.input_tokens")):
        if isinstance(attributes.get(source), int):
            out[target] = attributes[source]
    if "llm.input_messages" in groups:
        out["gen_ai.input.messages"] = json.dumps(
            [_message(fields) for _, fields in sorted(groups["llm.input_messages"].items())])
    tools = []
    for _, fields in sorted(groups.get("llm.tools", {}).items()):
        try:
            tools.append(read_json(fields.get("tool.json_schema")))
        except ValueError:
            continue
    if tools:
        out["gen_ai.tool.definitions"] = json.dumps(tools)
    agent = attributes.get("agent.name")
    if isinstance(agent, str):
        out["gen_ai.agent.name"] = agent
    return out


def _tool(attributes: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "toolscope.conventions": "openinference"}
    for source, target in (("tool.name", "gen_ai.tool.name"), ("tool_call.id", "gen_ai.tool.call.id"),
                           ("input.value", "gen_ai.tool.call.arguments"), ("output.value", "gen_ai.tool.call.result"),
                           ("session.id", "gen_ai.conversation.id")):
        if source in attributes:
            out[target] = attributes[source]
    return out
