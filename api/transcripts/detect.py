"""Which provider a transcript comes from, from the body's shape.

Detection only looks; it never rejects a malformed body (the parser does that, with a path). It
answers a format and the reason it is sure, or no reason when the body is plain user/assistant
text that every format could have produced.
"""

from __future__ import annotations

from typing import Any

from api.transcripts.common import JSON, TranscriptError

OPENAI_CHAT = "openai_chat"
ANTHROPIC = "anthropic"
OPENAI_RESPONSES = "openai_responses"
FORMATS = (OPENAI_CHAT, ANTHROPIC, OPENAI_RESPONSES)


def detect_format(body: JSON) -> tuple[str, str | None]:
    """(format, why it is certain) or (format, None) for ambiguous plain chat."""
    if isinstance(body.get("input"), list):
        return OPENAI_RESPONSES, "`input` is a list of items"
    if "messages" not in body and isinstance(body.get("input"), str):
        return OPENAI_RESPONSES, "`input` is a string"
    messages = body.get("messages")
    if messages is None:
        raise TranscriptError(
            "a transcript needs `messages` (OpenAI Chat Completions, Anthropic) or `input` (OpenAI Responses)",
            "messages",
        )
    messages_list: list[Any] = messages if isinstance(messages, list) else []
    tools = body.get("tools")
    tools_list: list[Any] = tools if isinstance(tools, list) else []
    reason = _anthropic_reason(body, messages_list, tools_list)
    if reason is not None:
        return ANTHROPIC, reason
    return OPENAI_CHAT, _chat_reason(messages_list, tools_list)


def resolve_format(body: JSON) -> str:
    """The body's `format` if given and consistent with its shape, else the detected one."""
    given = body.get("format")
    if given is None:
        return detect_format(body)[0]
    if not isinstance(given, str) or given not in FORMATS:
        raise TranscriptError(f"must be one of {', '.join(FORMATS)}, or absent to detect it", "format")
    if given == OPENAI_RESPONSES and "input" not in body and "messages" in body:
        raise TranscriptError("is 'openai_responses' but the body has `messages` and no `input`", "format")
    if given != OPENAI_RESPONSES and "messages" not in body and "input" in body:
        raise TranscriptError(f"is {given!r} but the body has `input` and no `messages`", "format")
    detected, reason = detect_format(body)
    if reason is not None and detected != given:
        raise TranscriptError(f"is {given!r} but the body is {detected} ({reason})", "format")
    return given


def _anthropic_reason(body: JSON, messages: list[Any], tools: list[Any]) -> str | None:
    if body.get("system") is not None:
        return "it has a top-level `system`"
    if any(isinstance(tool, dict) and "input_schema" in tool for tool in tools):
        return "its tools have `input_schema`"
    for index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") in ("tool_use", "tool_result"):
                return f"messages[{index}] has a {block['type']} block"
    return None


def _chat_reason(messages: list[Any], tools: list[Any]) -> str | None:
    if any(isinstance(tool, dict) and "function" in tool for tool in tools):
        return "its tools have `function`"
    for index, message in enumerate(messages):
        if isinstance(message, dict) and message.get("role") == "tool":
            return f"messages[{index}] has the role 'tool'"
        if isinstance(message, dict) and "tool_calls" in message:
            return f"messages[{index}] has `tool_calls`"
    return None
