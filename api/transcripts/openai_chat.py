"""OpenAI Chat Completions: `messages` (system, developer, user, assistant, tool) and `tools`.

Every assistant message is one model request. Its `tool_calls` are answered by later `tool`
messages that name the call in `tool_call_id`.
An assistant message's `usage` (the response's, as hosts store it) is its request's usage, and its
`timestamp` (ISO 8601 with a time zone, or epoch seconds), when the host stores one, its request's time.
"""

from __future__ import annotations

from collections.abc import Callable

from api.transcripts.common import (
    JSON,
    Conversation,
    ConversationBuilder,
    TranscriptError,
    content_text,
    expect_arguments,
    expect_list,
    expect_object,
    expect_str,
    message_role,
    parse_tools,
)

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


def parse(body: JSON) -> Conversation:
    builder = ConversationBuilder(parse_tools(body.get("tools")))
    if "messages" not in body:
        raise TranscriptError("required", "messages")
    for index, raw in enumerate(expect_list(body["messages"], "messages")):
        path = f"messages[{index}]"
        message = expect_object(raw, path)
        HANDLERS[message_role(message, path, ROLES)](builder, message, path)
    return builder.build()


def _system(builder: ConversationBuilder, message: JSON, path: str) -> None:
    builder.system(content_text(message.get("content"), f"{path}.content"))


def _user(builder: ConversationBuilder, message: JSON, path: str) -> None:
    builder.user(content_text(message.get("content"), f"{path}.content"))


def _assistant(builder: ConversationBuilder, message: JSON, path: str) -> None:
    builder.start_turn()
    builder.usage(message.get("usage"), f"{path}.usage")
    builder.time(message.get("timestamp"), f"{path}.timestamp")
    texts = [content_text(message.get("content"), f"{path}.content")]
    if message.get("refusal") is not None:
        texts.append(expect_str(message["refusal"], f"{path}.refusal"))
    builder.assistant("\n".join(text for text in texts if text))
    if message.get("tool_calls") is None:
        return
    for index, raw in enumerate(expect_list(message["tool_calls"], f"{path}.tool_calls")):
        _tool_call(builder, raw, f"{path}.tool_calls[{index}]")


def _tool_call(builder: ConversationBuilder, raw: object, path: str) -> None:
    call = expect_object(raw, path)
    if call.get("type", "function") != "function":
        raise TranscriptError(f"unsupported tool call type {call['type']!r}; expected 'function'", f"{path}.type")
    function = expect_object(call.get("function"), f"{path}.function")
    builder.add_call(
        call_id=expect_str(call.get("id"), f"{path}.id", empty=False),
        name=expect_str(function.get("name"), f"{path}.function.name", empty=False),
        arguments=expect_arguments(function.get("arguments"), f"{path}.function.arguments"),
        id_path=f"{path}.id",
    )


def _tool(builder: ConversationBuilder, message: JSON, path: str) -> None:
    builder.add_result(
        call_id=expect_str(message.get("tool_call_id"), f"{path}.tool_call_id", empty=False),
        output=content_text(message.get("content"), f"{path}.content"),
        is_error=None,  # the format has no error field: the project's error patterns read the text
        id_path=f"{path}.tool_call_id",
    )


HANDLERS: dict[str, Callable[[ConversationBuilder, JSON, str], None]] = {
    "system": _system,
    "developer": _system,
    "user": _user,
    "assistant": _assistant,
    "tool": _tool,
}
