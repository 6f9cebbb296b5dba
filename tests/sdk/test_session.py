"""The session API and the tool decorator produce the events of docs/events.md."""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from toolscope_agent import current_session
from toolscope_agent.engine.schemas import normalize_tool, schema_hash

from tests.sdk.server import Action

READ_FILE_OPENAI = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
}
SEARCH_MCP = {
    "name": "search",
    "description": "Search the web",
    "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
    "source": "mcp:web",
}
BASH_ANTHROPIC = {
    "name": "bash",
    "description": "Run a shell command",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
}


def digest(definition):
    tool = normalize_tool(definition)
    return schema_hash(tool["name"], tool["description"], tool["input_schema"])


def is_utc_iso(value):
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed.utcoffset() == timedelta(0) and abs(datetime.now(UTC) - parsed) < timedelta(minutes=1)


def by_id(events):
    return {event["id"]: event for event in events}


def test_session_turn_and_tool_call_events(server, client):
    with client.session(agent_name="coder", model="gpt-4o", metadata={"repo": "acme/api"}) as s:
        assert current_session() is s
        index = s.turn(
            tools=[READ_FILE_OPENAI, SEARCH_MCP],
            usage={"input_tokens": 5120, "output_tokens": 210, "cached_tokens": 4096},
            latency_ms=1830,
            system_prompt="You are a coding agent",
            task_message="Fix the failing test",
            messages=[{"role": "user", "content": "Fix the failing test"}],
        )
        assert index == 0
        first_call = s.tool_call(
            "read_file", {"path": "src/api.py"}, output="import os\n", duration_ms=12.5, call_id="call_0"
        )
        assert s.turn(model="gpt-4o-mini", tools=[READ_FILE_OPENAI, SEARCH_MCP, BASH_ANTHROPIC]) == 1
        s.tool_call(
            "bash",
            '{"command": "pytest"}',
            output={"exit": 1},
            status="error",
            error="exit status 1",
            retries=2,
            approval="approved",
        )
        s.tool_call("read_file", {"path": "a"}, turn_index=0)
    assert current_session() is None
    assert client.flush(timeout=5)

    sid = s.id
    assert uuid.UUID(sid).version == 4
    assert first_call == f"{sid}:c0"
    events = server.events
    suffixes = ["", ":t0", ":c0", ":t1", ":c1", ":c2", ":end"]
    assert [e["id"] for e in events] == [sid + suffix for suffix in suffixes]
    assert all(is_utc_iso(e.pop("timestamp")) for e in events)
    start, turn0, call0, turn1, call1, call2, end = events

    assert start == {
        "type": "session", "id": sid, "action": "start", "agent_name": "coder", "model": "gpt-4o",
        "metadata": {"repo": "acme/api"},
    }  # fmt: skip
    assert end == {"type": "session", "id": f"{sid}:end", "session_id": sid, "action": "end"}
    assert turn0 == {
        "type": "turn", "id": f"{sid}:t0", "session_id": sid, "index": 0, "model": "gpt-4o",
        "tools": [
            {"name": "read_file", "description": "Read a file",
             "input_schema": READ_FILE_OPENAI["function"]["parameters"]},
            {"name": "search", "description": "Search the web", "input_schema": SEARCH_MCP["inputSchema"],
             "source": "mcp:web"},
        ],
        "usage": {"input_tokens": 5120, "output_tokens": 210, "cached_tokens": 4096},
        "latency_ms": 1830, "system_prompt": "You are a coding agent", "task_message": "Fix the failing test",
        "messages": [{"role": "user", "content": "Fix the failing test"}],
    }  # fmt: skip
    assert turn1["model"] == "gpt-4o-mini"
    assert turn1["tools"] == [
        {"name": "read_file", "schema_hash": digest(READ_FILE_OPENAI)},
        {"name": "search", "schema_hash": digest(SEARCH_MCP)},
        {"name": "bash", "description": "Run a shell command", "input_schema": BASH_ANTHROPIC["input_schema"]},
    ]
    assert call0 == {
        "type": "tool_call", "id": f"{sid}:c0", "session_id": sid, "turn_index": 0, "call_id": "call_0",
        "tool_name": "read_file", "arguments": {"path": "src/api.py"}, "output": "import os\n", "status": "ok",
        "duration_ms": 12.5, "retries": 0, "approval": "not_required",
    }  # fmt: skip
    assert call1 == {
        "type": "tool_call", "id": f"{sid}:c1", "session_id": sid, "turn_index": 1, "tool_name": "bash",
        "arguments": {"command": "pytest"}, "output": '{"exit": 1}', "status": "error", "error": "exit status 1",
        "retries": 2, "approval": "approved",
    }  # fmt: skip
    assert call2["turn_index"] == 0


def test_a_definition_is_sent_in_full_once_per_client(server, client, make_client):
    with client.session() as first, client.session() as second:
        first.turn(tools=[BASH_ANTHROPIC])
        second.turn(tools=[BASH_ANTHROPIC])
        second.turn(tools=[{"name": "bash", "schema_hash": "abc"}])  # a reference passes through
    other = make_client(server.url)
    with other.session() as third:
        third.turn(tools=[BASH_ANTHROPIC])
    assert client.flush(timeout=5)
    assert other.flush(timeout=5)

    turns = {(e["session_id"], e["index"]): e["tools"] for e in server.events if e["type"] == "turn"}
    assert "input_schema" in turns[(first.id, 0)][0]
    assert turns[(second.id, 0)] == [{"name": "bash", "schema_hash": digest(BASH_ANTHROPIC)}]
    assert turns[(second.id, 1)] == [{"name": "bash", "schema_hash": "abc"}]
    assert "input_schema" in turns[(third.id, 0)][0], "a new client sends its definitions again"


def test_a_definition_whose_batch_failed_is_sent_again(server, client):
    server.then(Action(status=400, body={"detail": "nope"}))
    with client.session() as s:
        s.turn(tools=[BASH_ANTHROPIC])
        assert not client.flush(timeout=5), "the server refused the batch"
        s.turn(tools=[BASH_ANTHROPIC])
    assert client.flush(timeout=5)
    turns = [e for e in server.events if e["type"] == "turn"]
    assert [("input_schema" in t["tools"][0]) for t in turns] == [True, True]


def test_turn_indexes_and_chosen_session_ids(server, client):
    with client.session(session_id="conv-42") as s:
        assert s.turn() == 0
        assert s.turn(index=5) == 5
        call = s.tool_call("t")
        assert s.turn() == 6
    assert client.flush(timeout=5)
    assert re.fullmatch(r"conv-42:[0-9a-f]{8}:c0", call)
    ids = [e["id"] for e in server.events]
    assert ids == ["conv-42", "conv-42:t0", "conv-42:t5", call, "conv-42:t6", "conv-42:end"]
    assert by_id(server.events)[call]["turn_index"] == 5


def test_provider_messages_and_usage_are_normalised(server, client):
    anthropic_messages = [
        {"role": "user", "content": [{"type": "text", "text": "List the files"}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "tu_1", "name": "bash", "input": {"command": "ls"}},
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "a.py"}]},
    ]  # fmt: skip
    openai_messages = [
        {"role": "system", "content": "Be brief"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
    ]
    with client.session() as s:
        s.turn(
            messages=anthropic_messages,
            system_prompt=[{"type": "text", "text": "You are"}, {"type": "text", "text": "careful"}],
            usage={"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 100,
                   "cache_creation_input_tokens": 20,
                   "cache_creation": {"ephemeral_5m_input_tokens": 12, "ephemeral_1h_input_tokens": 8}},
        )  # fmt: skip
        s.turn(
            messages=openai_messages,
            usage={"prompt_tokens": 130, "completion_tokens": 7,
                   "prompt_tokens_details": {"cached_tokens": 64, "cache_write_tokens": 32}},
        )
    assert client.flush(timeout=5)
    first, second = (e for e in server.events if e["type"] == "turn")
    assert first["messages"] == [
        {"role": "user", "content": "List the files"},
        {"role": "assistant", "content": "Let me look."},
    ]
    assert first["system_prompt"] == "You are\ncareful"
    # Cache reads and writes stay apart (billed apart); the 1-hour writes are told from the rest.
    assert first["usage"] == {"input_tokens": 130, "output_tokens": 5, "cached_tokens": 100,
                              "cache_write_tokens": 20, "cache_write_1h_tokens": 8}
    assert second["messages"] == [{"role": "system", "content": "Be brief"}, {"role": "assistant", "content": ""}]
    # OpenAI reports its cache writes in the details too (openai 3.x), of the prompt's tokens.
    assert second["usage"] == {"input_tokens": 130, "output_tokens": 7, "cached_tokens": 64, "cache_write_tokens": 32}


def test_decorator_records_sync_calls(server, client):
    @client.tool()
    def read_file(path: str, limit: int = 10) -> dict[str, object]:
        time.sleep(0.02)
        return {"path": path, "lines": limit}

    @client.tool(name="shell")
    def run(command, *args, **env):
        raise RuntimeError("boom")

    @client.tool
    def count(text: str) -> int:
        return len(text)

    assert read_file("outside.py") == {"path": "outside.py", "lines": 10}, "no session: just called"
    assert read_file.__name__ == "read_file"
    with client.session() as s:
        s.turn()
        s.turn()
        assert read_file("src/api.py", limit=3) == {"path": "src/api.py", "lines": 3}
        with pytest.raises(RuntimeError, match="boom"):
            run("ls", "-l", TERM="xterm")
        assert count(text="abc") == 3
    assert client.flush(timeout=5)

    calls = [e for e in server.events if e["type"] == "tool_call"]
    assert [c["tool_name"] for c in calls] == ["read_file", "shell", "count"]
    ok, failed, counted = calls
    assert ok["arguments"] == {"path": "src/api.py", "limit": 3}
    assert json.loads(ok["output"]) == {"path": "src/api.py", "lines": 3}
    assert ok["status"] == "ok"
    assert ok["turn_index"] == 1
    assert 20 <= ok["duration_ms"] < 1000
    assert failed["arguments"] == {"command": "ls", "args": ["-l"], "TERM": "xterm"}
    assert failed["status"] == "error"
    assert failed["error"] == "RuntimeError: boom"
    assert "output" not in failed
    assert failed["duration_ms"] >= 0
    assert counted["output"] == "3"


def test_decorator_on_methods_leaves_self_out(server, client):
    class Tools:
        @client.tool()
        def grep(self, pattern: str) -> str:
            return f"found {pattern}"

    with client.session():
        assert Tools().grep("TODO") == "found TODO"
    assert client.flush(timeout=5)
    (call,) = (e for e in server.events if e["type"] == "tool_call")
    assert call["arguments"] == {"pattern": "TODO"}
    assert call["output"] == "found TODO"


def test_decorator_records_async_calls(server, client):
    @client.tool()
    async def fetch(url: str) -> str:
        await asyncio.sleep(0.02)
        return f"body of {url}"

    @client.tool(name="broken")
    async def fails() -> None:
        await asyncio.sleep(0)
        raise ValueError("bad input")

    assert inspect.iscoroutinefunction(fetch)

    async def agent() -> None:
        assert await fetch("outside") == "body of outside"
        with client.session() as s:
            s.turn()
            assert await fetch("http://a") == "body of http://a"
            with pytest.raises(ValueError, match="bad input"):
                await fails()
            # Tasks copy the context, so concurrent calls land in the session too.
            await asyncio.gather(fetch("http://b"), fetch("http://c"))

    asyncio.run(agent())
    assert client.flush(timeout=5)
    calls = [e for e in server.events if e["type"] == "tool_call"]
    assert [(c["tool_name"], c["status"]) for c in calls] == [
        ("fetch", "ok"), ("broken", "error"), ("fetch", "ok"), ("fetch", "ok"),
    ]  # fmt: skip
    assert calls[0]["arguments"] == {"url": "http://a"}
    assert calls[0]["output"] == "body of http://a"
    assert calls[0]["duration_ms"] >= 20
    assert calls[1]["error"] == "ValueError: bad input"
    assert sorted(c["arguments"]["url"] for c in calls[2:]) == ["http://b", "http://c"]
    assert len({c["id"] for c in calls}) == 4


def test_nested_sessions_restore_the_outer_one(client):
    with client.session() as outer:
        with client.session() as inner:
            assert current_session() is inner
        assert current_session() is outer
    assert current_session() is None


class FakeModel:
    """Quacks like a pydantic v2 model of a provider SDK."""

    def __init__(self, **fields):
        self.fields = fields

    def model_dump(self, exclude_none=False):
        return {k: v for k, v in self.fields.items() if not (exclude_none and v is None)}


def test_provider_sdk_objects_are_accepted(server, client):
    reply = FakeModel(
        role="assistant",
        content=[FakeModel(type="text", text="Checking."), FakeModel(type="tool_use", id="tu_1", name="ls", input={})],
    )
    tool = FakeModel(name="ls", description="List", input_schema={"type": "object"})
    usage = FakeModel(input_tokens=12, output_tokens=3, cache_read_input_tokens=None, cache_creation_input_tokens=None)
    with client.session() as s:
        s.turn(tools=[tool], usage=usage, messages=[reply])
        s.tool_call("ls", FakeModel(path="."), output=FakeModel(files=["a.py"]))
    assert client.flush(timeout=5)
    turn, call = (e for e in server.events if e["type"] in ("turn", "tool_call"))
    assert turn["messages"] == [{"role": "assistant", "content": "Checking."}]
    assert turn["tools"] == [{"name": "ls", "description": "List", "input_schema": {"type": "object"}}]
    assert turn["usage"] == {"input_tokens": 12, "output_tokens": 3}
    assert call["arguments"] == {"path": "."}
    assert json.loads(call["output"]) == {"files": ["a.py"]}
