"""One agent session played through real MCP servers from PyPI (mcp-server-git, mcp-server-time)
with the official MCP client, sent as the three transcript formats a host would send, gives the
same figures in every format (issue 12, "Must show").

The session is played, not written by hand: the servers run as subprocesses over stdio, their tools
are listed with `ClientSession.list_tools`, and every output is what `call_tool` answered. The three
transcripts are built from that record the way hosts build them (an MCP tool's `inputSchema` is
the function's parameters; flagged results carry `is_error` in Anthropic's format and read
`Error executing tool <name>: ...` in OpenAI's; JSON-RPC errors read `MCP error <code>: <message>`),
checked against the official openai and anthropic SDKs' request types, posted to
`POST /api/v1/transcripts` (one project per format) and processed by the worker's service.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from anthropic.types import MessageParam, ToolParam
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionMessageParam
from openai.types.responses import FunctionToolParam, ResponseInputItemParam

from tests.api.conftest import KeyClient
from tests.factories import make_key, make_project
from tests.sdk_types import validated
from toolscope.telemetry.models import IngestBatch, Session, ToolCall, ToolHourly, Turn
from toolscope.telemetry.services.processing import batch_process
from toolscope.tokenizer import counter

pytestmark = pytest.mark.slow  # starts the MCP servers as subprocesses

URL = "/api/v1/transcripts"
TIMESTAMP = "2026-11-23T08:00:00Z"
SYSTEM = "You are a release assistant with git and time tools. Use them; do not guess."
TASK = "What changed in the repository since the last commit, and what time is 14:30 in Paris in Tokyo?"
FINAL = "calc.py gained `x = 1` since 'Add calc'; 14:30 in Paris is 22:30 in Tokyo."
FORMATS = ("openai_chat", "anthropic", "openai_responses")


# --- Playing the session -----------------------------------------------------------------------

@dataclass
class Call:
    server: str
    tool: str
    arguments: dict[str, Any]
    text: str = ""  # what came back: the result's text, or the JSON-RPC error's message
    kind: str = "ok"  # ok | is_error (a result flagged isError) | jsonrpc (a JSON-RPC error)
    code: int | None = None  # the JSON-RPC error code


@dataclass
class PlayedTurn:
    assistant_text: str
    calls: list[Call] = field(default_factory=list)


@dataclass
class Played:
    tools: dict[str, list[dict[str, Any]]]  # server -> tools as listed (MCP wire shape)
    turns: list[PlayedTurn]

    @property
    def advertised(self) -> list[dict[str, Any]]:
        return [tool for server in ("git", "time") for tool in self.tools[server]]

    @property
    def calls(self) -> list[Call]:
        return [call for turn in self.turns for call in turn.calls]


def _executable(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    assert found, f"{name} is not installed (requirements.txt pins it)"
    return found


def _repository(path: Path) -> None:
    """A git repository with one commit (fixed author, dates and so hash) and an unstaged change."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.com",
           "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.com",
           "GIT_AUTHOR_DATE": "2026-11-20T10:00:00Z", "GIT_COMMITTER_DATE": "2026-11-20T10:00:00Z",
           "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    path.mkdir()
    (path / "calc.py").write_text("def add(a, b):\n    return a + b\n", encoding="utf-8")
    for command in (["init", "-q", "-b", "main"], ["add", "calc.py"], ["commit", "-q", "-m", "Add calc"]):
        subprocess.run(["git", *command], cwd=path, env=env, check=True)
    (path / "calc.py").write_text("def add(a, b):\n    return a + b\nx = 1\n", encoding="utf-8")


def _script(repo: str) -> list[PlayedTurn]:
    """The agent's turns: what each model request asked for, in order."""
    paris_tokyo = {"source_timezone": "Europe/Paris", "time": "14:30", "target_timezone": "Asia/Tokyo"}
    return [
        PlayedTurn("Let me look at the repository first.", [
            Call("git", "git_status", {"repo_path": repo}),
            Call("git", "git_diff_unstaged", {"repo_path": repo}),
        ]),
        PlayedTurn("Now the history and the time.", [
            Call("git", "git_log", {"repo_path": repo, "max_count": 5}),
            Call("time", "convert_time", dict(paris_tokyo)),
        ]),
        PlayedTurn("Checking both again before I answer.", [
            Call("git", "git_status", {"repo_path": repo}),  # the same output as turn 0's: a duplicate
            Call("time", "convert_time", dict(paris_tokyo)),  # the same output as turn 1's: a duplicate
        ]),
        PlayedTurn("A few more details.", [
            Call("git", "git_show", {"repo_path": repo, "revision": "no-such-rev"}),  # ToolError: isError
            Call("time", "convert_time", {**paris_tokyo, "target_timezone": "Mars/Olympus"}),  # ToolError
            Call("git", "git_status", {}),  # invalid arguments: the SDK's validation error, isError
        ]),
        PlayedTurn("Trying the remaining lookups.", [
            Call("time", "get_time", {"timezone": "Asia/Tokyo"}),  # not a tool: JSON-RPC -32602
            Call("git", "git_log", {"repo_path": repo, "max_count": 1}),  # the host's timeout: JSON-RPC -32001
        ]),
        PlayedTurn(FINAL),
    ]


async def _play(repo: Path) -> Played:
    servers = {
        "git": StdioServerParameters(command=_executable("mcp-server-git"), args=["--repository", str(repo)]),
        "time": StdioServerParameters(command=_executable("mcp-server-time"), args=["--local-timezone", "UTC"]),
    }
    turns = _script(str(repo))
    tools: dict[str, list[dict[str, Any]]] = {}
    async with (
        stdio_client(servers["git"]) as git_streams,
        stdio_client(servers["time"]) as time_streams,
        ClientSession(*git_streams) as git,
        ClientSession(*time_streams) as time,
    ):
        sessions = {"git": git, "time": time}
        for name, session in sessions.items():
            await session.initialize()
            listed = await session.list_tools()
            tools[name] = [tool.model_dump(by_alias=True, exclude_none=True) for tool in listed.tools]
        for call in (call for turn in turns for call in turn.calls):
            # The last git_log stands for a host whose per-call timeout ran out: a timeout of 0
            # expires as soon as the request is written, before any answer can be read.
            timeout = 0 if call.tool == "git_log" and call.arguments.get("max_count") == 1 else None
            try:
                result = await sessions[call.server].call_tool(call.tool, call.arguments, read_timeout_seconds=timeout)
            except MCPError as error:
                call.kind, call.code, call.text = "jsonrpc", error.error.code, error.error.message
                continue
            call.text = "\n".join(block.text for block in result.content if block.type == "text")
            call.kind = "is_error" if result.is_error else "ok"
    return Played(tools, turns)


@pytest.fixture(scope="module")
def played(tmp_path_factory) -> Played:
    repo = tmp_path_factory.mktemp("mcp") / "repo"
    _repository(repo)
    return anyio.run(_play, repo)


# --- Rendering it as a host would --------------------------------------------------------------

def _openai_text(call: Call) -> str:
    """A tool message's text in the OpenAI formats, which have no error field."""
    if call.kind == "jsonrpc":
        return f"MCP error {call.code}: {call.text}"
    if call.kind == "is_error" and not call.text.startswith(f"Error executing tool {call.tool}:"):
        return f"Error executing tool {call.tool}: {call.text}"
    return call.text


def _described(tool: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "description": tool["description"]} if tool.get("description") else body


def render_openai_chat(played: Played, session_id: str) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
    number = 0
    for turn in played.turns:
        assistant: dict[str, Any] = {"role": "assistant", "content": turn.assistant_text}
        answers = []
        for call in turn.calls:
            number += 1
            call_id = f"call_{number:02d}"
            function = {"name": call.tool, "arguments": json.dumps(call.arguments)}
            assistant.setdefault("tool_calls", []).append({"id": call_id, "type": "function", "function": function})
            answers.append({"role": "tool", "tool_call_id": call_id, "content": _openai_text(call)})
        messages += [assistant, *answers]
    tools = [{"type": "function",
              "function": _described(tool, {"name": tool["name"], "parameters": tool["inputSchema"]})}
             for tool in played.advertised]
    return {"session_id": session_id, "timestamp": TIMESTAMP, "model": "gpt-4.1", "messages": messages, "tools": tools}


def render_anthropic(played: Played, session_id: str) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    number = 0
    for turn in played.turns:
        blocks: list[dict[str, Any]] = [{"type": "text", "text": turn.assistant_text}]
        results = []
        for call in turn.calls:
            number += 1
            call_id = f"toolu_{number:02d}"
            blocks.append({"type": "tool_use", "id": call_id, "name": call.tool, "input": call.arguments})
            text = f"MCP error {call.code}: {call.text}" if call.kind == "jsonrpc" else call.text
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id,
                                      "content": [{"type": "text", "text": text}]}
            if call.kind != "ok":
                result["is_error"] = True  # hosts set the flag for isError results and JSON-RPC errors
            results.append(result)
        messages.append({"role": "assistant", "content": blocks})
        if results:
            messages.append({"role": "user", "content": results})
    tools = [_described(tool, {"name": tool["name"], "input_schema": tool["inputSchema"]})
             for tool in played.advertised]
    return {"session_id": session_id, "timestamp": TIMESTAMP, "model": "claude-sonnet-4-5", "system": SYSTEM,
            "messages": messages, "tools": tools}


def render_openai_responses(played: Played, session_id: str) -> dict[str, Any]:
    items: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    number = 0
    for index, turn in enumerate(played.turns):
        items.append({"type": "message", "id": f"msg_{index:02d}", "role": "assistant", "status": "completed",
                      "content": [{"type": "output_text", "text": turn.assistant_text, "annotations": []}]})
        outputs = []
        for call in turn.calls:
            number += 1
            call_id = f"call_{number:02d}"
            items.append({"type": "function_call", "id": f"fc_{number:02d}", "call_id": call_id, "name": call.tool,
                          "arguments": json.dumps(call.arguments), "status": "completed"})
            outputs.append({"type": "function_call_output", "call_id": call_id, "output": _openai_text(call)})
        items += outputs
    tools = [_described(tool, {"type": "function", "name": tool["name"], "parameters": tool["inputSchema"],
                               "strict": False})
             for tool in played.advertised]
    return {"session_id": session_id, "timestamp": TIMESTAMP, "model": "gpt-4.1", "instructions": SYSTEM,
            "input": items, "tools": tools}


RENDER = {"openai_chat": render_openai_chat, "anthropic": render_anthropic, "openai_responses": render_openai_responses}


def _conforms(kind: Any, value: list[dict[str, Any]]) -> None:
    """`value` validates as the SDK's type and loses nothing doing so (no key the type lacks)."""
    assert validated(kind, value) == value


# --- Reading the figures back --------------------------------------------------------------------

def _figures(project) -> dict[str, Any]:
    session = Session.objects.get(project=project)
    calls = list(ToolCall.objects.filter(project=project).order_by("turn_index", "id"))
    position = {call.pk: index for index, call in enumerate(calls)}
    return {
        "session": {"turns": session.turn_count, "calls": session.tool_call_count, "errors": session.error_count,
                    "duplicate_tokens": session.duplicate_tokens},
        "turns": [
            {field_name: getattr(turn, field_name) for field_name in (
                "index", "system_prompt_tokens", "schema_tokens", "new_message_tokens", "message_tokens",
                "call_tokens", "tool_output_tokens", "estimated_input_tokens")}
            | {"tools": turn.advertised_set.tool_count if turn.advertised_set else None}
            for turn in Turn.objects.filter(project=project).order_by("index")
        ],
        "calls": [
            {"turn": call.turn_index, "tool": call.tool_name, "status": call.status,
             "unflagged": call.error_text_unflagged, "output_tokens": call.output_tokens,
             "argument_tokens": call.argument_tokens, "duplicate_of": position.get(call.duplicate_of_id),
             "duplicate_tokens": call.duplicate_tokens}
            for call in calls
        ],
        "rules": [call.error_rule for call in calls],
        "placeholders": [(call.turn_index, call.placeholder, call.placeholder_tokens or 0) for call in calls],
        "per_tool": {
            row.tool_name: {"calls": row.calls, "errors": row.errors, "output_tokens": row.output_tokens,
                            "duplicates": row.duplicates, "duplicate_tokens": row.duplicate_tokens,
                            "schema_tokens": row.schema_tokens, "times_advertised": row.times_advertised,
                            "times_called": row.times_called}
            for row in ToolHourly.objects.filter(project=project)
        },
    }


def _post(name: str, body: dict[str, Any]):
    project = make_project(f"mcp-{name.replace('_', '-')}")
    response = KeyClient(make_key(project, scopes=["ingest"]).secret).post_json(URL, body)
    assert response.status_code == 202, response.json()
    assert response.json()["rejected"] == 0, response.json()
    for batch_id in IngestBatch.objects.filter(project=project).values_list("pk", flat=True):
        batch_process(batch_id=batch_id)
    return project


# --- Tests -------------------------------------------------------------------------------------

def test_the_session_was_played_through_the_real_servers(played):
    """The record holds what the brief asks for, as the servers answered it."""
    assert {tool["name"] for tool in played.tools["time"]} == {"get_current_time", "convert_time"}
    assert {"git_status", "git_log", "git_show", "git_diff_unstaged"} <= {tool["name"] for tool in played.tools["git"]}
    kinds = [(call.tool, call.kind, call.code) for call in played.calls]
    assert kinds == [
        ("git_status", "ok", None), ("git_diff_unstaged", "ok", None),
        ("git_log", "ok", None), ("convert_time", "ok", None),
        ("git_status", "ok", None), ("convert_time", "ok", None),
        ("git_show", "is_error", None), ("convert_time", "is_error", None), ("git_status", "is_error", None),
        ("get_time", "jsonrpc", -32602), ("git_log", "jsonrpc", -32001),
    ]
    calls = played.calls
    assert calls[0].text == calls[4].text and "modified:   calc.py" in calls[0].text
    assert calls[6].text.startswith("Error executing tool git_show:")
    assert calls[8].text.startswith("Error executing tool git_status: 1 validation error")
    assert calls[9].text == "Unknown tool: get_time"


@pytest.mark.parametrize("name", FORMATS)
def test_the_transcripts_are_shaped_as_the_sdks_send_them(played, name):
    body = RENDER[name](played, "s")
    if name == "openai_chat":
        _conforms(ChatCompletionMessageParam, body["messages"])
        _conforms(ChatCompletionFunctionToolParam, body["tools"])
    elif name == "anthropic":
        _conforms(MessageParam, body["messages"])
        _conforms(ToolParam, body["tools"])
    else:
        _conforms(ResponseInputItemParam, body["input"])
        _conforms(FunctionToolParam, body["tools"])


def test_a_shape_the_sdk_does_not_know_fails_the_check(played):
    body = render_anthropic(played, "s")
    body["messages"][2]["content"][0]["error"] = True  # not a tool_result field
    with pytest.raises(AssertionError):
        _conforms(MessageParam, body["messages"])


@pytest.mark.django_db
def test_every_format_gives_the_same_figures(played):
    figures = {name: _figures(_post(name, RENDER[name](played, "mcp-session"))) for name in FORMATS}

    # What decided each failed call's status legitimately differs: Anthropic's hosts flag failures
    # with `is_error` (the explicit flag wins), the OpenAI formats have no flag and their text is
    # read by the project's error patterns. The call to a tool never advertised says so everywhere.
    flag, tool_error, mcp_error, not_advertised = (
        "is_error flag", "pattern: MCP tool error", "pattern: MCP error", "tool not advertised")
    openai_rules = [""] * 6 + [tool_error] * 3 + [not_advertised, mcp_error]
    assert figures["openai_chat"].pop("rules") == openai_rules
    assert figures["openai_responses"].pop("rules") == openai_rules
    assert figures["anthropic"].pop("rules") == [""] * 6 + [flag] * 3 + [not_advertised, flag]

    # A duplicate's placeholder (what the agent sends instead of the repeated output, counted in
    # later turns' tool outputs) cites the first call by the provider's call id: `toolu_01` in
    # Anthropic's format is one token longer than `call_01` in OpenAI's. So the budget's tool outputs
    # and estimated input differ by exactly that in the turns after a duplicate; nothing else may.
    placeholders = {name: figures[name].pop("placeholders") for name in FORMATS}
    assert placeholders["openai_responses"] == placeholders["openai_chat"]
    assert [text.replace("toolu_", "call_") for _, text, _ in placeholders["anthropic"]] == [
        text for _, text, _ in placeholders["openai_chat"]]
    for turn in figures["anthropic"]["turns"]:
        extra = sum(anthropic[2] - chat[2] for anthropic, chat in zip(
            placeholders["anthropic"], placeholders["openai_chat"], strict=True) if chat[0] < turn["index"])
        turn["tool_output_tokens"] -= extra
        turn["estimated_input_tokens"] -= extra

    chat = figures["openai_chat"]
    assert figures["anthropic"] == chat
    assert figures["openai_responses"] == chat

    # And the figures are those of the session played.
    calls = played.calls
    count = counter("o200k_base")
    assert chat["session"] == {
        "turns": 6, "calls": 11, "errors": 5,
        "duplicate_tokens": count(calls[0].text) + count(calls[3].text),
    }
    statuses = [call["status"] for call in chat["calls"]]
    assert statuses == ["ok"] * 6 + ["error"] * 3 + ["unknown_tool", "error"]
    assert [call["duplicate_of"] for call in chat["calls"]] == [None] * 4 + [0, 3] + [None] * 5
    assert not any(call["unflagged"] for call in chat["calls"])
    assert Counter({tool: row["calls"] for tool, row in chat["per_tool"].items()}) == Counter(
        call.tool for call in calls)
    assert {tool: row["errors"] for tool, row in chat["per_tool"].items() if row["errors"]} == {
        "git_show": 1, "convert_time": 1, "git_status": 1, "get_time": 1, "git_log": 1}
    assert {tool: row["duplicates"] for tool, row in chat["per_tool"].items() if row["duplicates"]} == {
        "git_status": 1, "convert_time": 1}
    # Output tokens: the text the model read, which for failures is the OpenAI formats' text
    # (FastMCP already words a flagged failure "Error executing tool <name>: ..."; a JSON-RPC error is
    # "MCP error <code>: <message>" in every format).
    assert [call["output_tokens"] for call in chat["calls"]] == [count(_openai_text(call)) for call in calls]
    assert sum(row["output_tokens"] for row in chat["per_tool"].values()) == sum(
        count(_openai_text(call)) for call in calls)
    advertised = len(played.advertised)
    assert [turn["tools"] for turn in chat["turns"]] == [advertised] * 6
    assert len({turn["schema_tokens"] for turn in chat["turns"]}) == 1 and chat["turns"][0]["schema_tokens"] > 0
    assert sum(row["schema_tokens"] for row in chat["per_tool"].values()) == sum(
        turn["schema_tokens"] for turn in chat["turns"])
