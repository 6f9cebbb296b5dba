"""OpenAI Responses: `instructions`, `input` items and `tools`.

A response's output is a run of items (reasoning, assistant messages, function calls, built-in
tool calls), so one model request is one uninterrupted run of output items; any input item
(a user/system/developer message, a function_call_output) ends the run. Function calls are
answered by `function_call_output` items that name the call in `call_id`.
"""

from __future__ import annotations

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

ROLES = frozenset({"system", "developer", "user", "assistant"})

# Items only the model produces: they start or continue a model request's run.
OUTPUT_ITEMS = frozenset(
    {
        "reasoning",
        "function_call",
        "custom_tool_call",
        "web_search_call",
        "file_search_call",
        "computer_call",
        "code_interpreter_call",
        "image_generation_call",
        "local_shell_call",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
    }
)
# Items the client sends back: they end a run. Unknown item types (item_reference, types added
# later) neither start nor end one.
INPUT_ITEMS = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "computer_call_output",
        "local_shell_call_output",
        "mcp_approval_response",
    }
)


def parse(body: JSON) -> Conversation:
    builder = ConversationBuilder(parse_tools(body.get("tools")))
    if body.get("instructions") is not None:
        builder.system(expect_str(body["instructions"], "instructions"))
    in_run = False
    for index, raw in enumerate(_items(body)):
        path = f"input[{index}]"
        item = expect_object(raw, path)
        kind = expect_str(item.get("type", "message"), f"{path}.type")
        if kind == "message":
            in_run = _message(builder, item, path, in_run=in_run)
        elif kind in OUTPUT_ITEMS:
            if not in_run:
                builder.start_turn()
            in_run = True
            if kind == "function_call":
                _function_call(builder, item, path)
        elif kind in INPUT_ITEMS:
            in_run = False
            if kind == "function_call_output":
                _function_call_output(builder, item, path)
    return builder.build()


def _items(body: JSON) -> list[object]:
    """`input` is a list of items, or a string that stands for one user message."""
    if "input" not in body:
        raise TranscriptError("required", "input")
    if isinstance(body["input"], str):
        return [{"role": "user", "content": body["input"]}]
    return expect_list(body["input"], "input")


def _message(builder: ConversationBuilder, item: JSON, path: str, *, in_run: bool) -> bool:
    """Adds a message item; answers whether a model run is now open."""
    role = message_role(item, path, ROLES)
    text = content_text(item.get("content"), f"{path}.content")
    if role in ("system", "developer"):
        builder.system(text)
        return False
    if role == "user":
        builder.user(text)
        return False
    if not in_run:
        builder.start_turn()
    builder.assistant(text)
    return True


def _function_call(builder: ConversationBuilder, item: JSON, path: str) -> None:
    builder.add_call(
        call_id=expect_str(item.get("call_id"), f"{path}.call_id", empty=False),
        name=expect_str(item.get("name"), f"{path}.name", empty=False),
        arguments=expect_arguments(item.get("arguments"), f"{path}.arguments"),
        id_path=f"{path}.call_id",
    )


def _function_call_output(builder: ConversationBuilder, item: JSON, path: str) -> None:
    builder.add_result(
        call_id=expect_str(item.get("call_id"), f"{path}.call_id", empty=False),
        output=content_text(item.get("output"), f"{path}.output"),
        is_error=None,  # the format has no error field: the project's error patterns read the text
        id_path=f"{path}.call_id",
    )
