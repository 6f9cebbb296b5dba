"""Anthropic Messages: top-level `system`, `messages` (user, assistant) and `tools`.

Every assistant message is one model request. Its `tool_use` blocks are answered by `tool_result`
blocks of a later user message that name the call in `tool_use_id`.
An assistant message's `usage` (the response's, as hosts store it) is its request's usage, and its
`timestamp` (ISO 8601 with a time zone, or epoch seconds), when the host stores one, its request's time.
"""

from __future__ import annotations

from typing import Any

from api.transcripts.common import (
    JSON,
    Conversation,
    ConversationBuilder,
    TranscriptError,
    content_text,
    expect_list,
    expect_object,
    expect_str,
    message_role,
    parse_tools,
)

ROLES = frozenset({"user", "assistant"})


def parse(body: JSON) -> Conversation:
    builder = ConversationBuilder(parse_tools(body.get("tools")))
    builder.system(content_text(body.get("system"), "system"))
    if "messages" not in body:
        raise TranscriptError("required", "messages")
    for index, raw in enumerate(expect_list(body["messages"], "messages")):
        path = f"messages[{index}]"
        message = expect_object(raw, path)
        _message(builder, message, message_role(message, path, ROLES), path)
    return builder.build()


def _message(builder: ConversationBuilder, message: JSON, role: str, path: str) -> None:
    content = message.get("content")
    if content is None:
        raise TranscriptError("a message needs content", f"{path}.content")
    text = content_text(content, f"{path}.content")
    if role == "assistant":
        builder.start_turn()
        builder.usage(message.get("usage"), f"{path}.usage")
        builder.time(message.get("timestamp"), f"{path}.timestamp")
        builder.assistant(text)
    else:
        builder.user(text)
    blocks = content if isinstance(content, list) else []
    for index, block in enumerate(blocks):
        _block(builder, block, role, f"{path}.content[{index}]")


def _block(builder: ConversationBuilder, block: JSON, role: str, path: str) -> None:
    kind = block["type"]  # content_text has checked every block's type
    if kind == "tool_use":
        if role != "assistant":
            raise TranscriptError("a tool_use block belongs in an assistant message", f"{path}.type")
        _tool_use(builder, block, path)
    elif kind == "tool_result":
        if role != "user":
            raise TranscriptError("a tool_result block belongs in a user message", f"{path}.type")
        _tool_result(builder, block, path)


def _tool_use(builder: ConversationBuilder, block: JSON, path: str) -> None:
    builder.add_call(
        call_id=expect_str(block.get("id"), f"{path}.id", empty=False),
        name=expect_str(block.get("name"), f"{path}.name", empty=False),
        arguments=expect_object(block.get("input"), f"{path}.input"),
        id_path=f"{path}.id",
    )


def _tool_result(builder: ConversationBuilder, block: JSON, path: str) -> None:
    builder.add_result(
        call_id=expect_str(block.get("tool_use_id"), f"{path}.tool_use_id", empty=False),
        output=content_text(block.get("content"), f"{path}.content"),
        is_error=_is_error(block.get("is_error"), f"{path}.is_error"),
        id_path=f"{path}.tool_use_id",
    )


def _is_error(value: Any, path: str) -> bool | None:
    """The flag, or None when the block leaves it out: then the output's text is classified by
    the project's error patterns, as in the formats without a flag."""
    if value is None:
        return None
    if not isinstance(value, bool):
        raise TranscriptError("must be a boolean", path)
    return value
