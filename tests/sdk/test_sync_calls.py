"""upload_transcript and register_tools: synchronous, retried like telemetry, and loud on refusal."""

from __future__ import annotations

import pytest
from toolscope_agent import ToolscopeError

from tests.sdk.conftest import API_KEY
from tests.sdk.server import Action, free_port

OPENAI_CHAT = {
    "messages": [
        {"role": "user", "content": "What is in src?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": '{"path": "src"}'}},
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "api.py"},
    ],
    "tools": [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}],
}  # fmt: skip


def test_upload_transcript_posts_the_payload_and_returns_the_answer(server, client):
    server.then(Action(status=202, body={"session_id": "conv-1", "events": 4}))
    answer = client.upload_transcript(
        OPENAI_CHAT, format="openai_chat", session_id="conv-1", agent_name="coder", model="gpt-4o"
    )
    assert answer == {"session_id": "conv-1", "events": 4}
    (request,) = server.requests
    assert (request.method, request.path) == ("POST", "/api/v1/transcripts")
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert request.json == {
        "format": "openai_chat",
        "session_id": "conv-1",
        "agent_name": "coder",
        "model": "gpt-4o",
        **OPENAI_CHAT,
    }


def test_upload_transcript_leaves_out_what_is_not_given(server, client):
    client.upload_transcript({"system": "Be brief", "messages": [], "tools": []})
    assert server.requests[0].json == {"system": "Be brief", "messages": [], "tools": []}


def test_upload_transcript_retries_5xx_and_429(server, client):
    server.then(Action(status=503), Action(status=429, headers={"Retry-After": "0"}))
    assert client.upload_transcript({"input": [], "tools": []})["ok"] is True
    assert len(server.requests) == 3


def test_upload_transcript_raises_on_a_400_without_retrying(server, client):
    server.then(Action(status=400, body={"detail": "messages[2].role: must be one of user, assistant"}))
    with pytest.raises(ToolscopeError) as raised:
        client.upload_transcript({"messages": [{"role": "robot"}]})
    assert raised.value.status == 400
    assert raised.value.message == "messages[2].role: must be one of user, assistant"
    assert raised.value.body == {"detail": "messages[2].role: must be one of user, assistant"}
    assert "HTTP 400" in str(raised.value)
    assert len(server.requests) == 1


def test_gives_up_with_the_last_status(server, make_client):
    client = make_client(server.url, max_attempts=2)
    server.then(Action(status=502), Action(status=503))
    with pytest.raises(ToolscopeError) as raised:
        client.upload_transcript({"messages": []})
    assert raised.value.status == 503
    assert "gave up after 2 attempts" in raised.value.message


def test_unreachable_server_raises_after_the_attempts(make_client):
    client = make_client(f"http://127.0.0.1:{free_port()}", max_attempts=2)
    with pytest.raises(ToolscopeError, match="failed after 2 attempts: ConnectError") as raised:
        client.register_tools([{"name": "ls", "input_schema": {}}])
    assert raised.value.status is None


def test_register_tools_puts_normalised_definitions(server, client):
    answer = client.register_tools(
        [
            {"type": "function", "function": {"name": "ls", "description": "List", "parameters": {"type": "object"}}},
            {"name": "search", "description": "Search", "inputSchema": {"type": "object"}, "source": "mcp:web"},
        ]
    )
    assert answer["ok"] is True
    (request,) = server.requests
    assert (request.method, request.path) == ("PUT", "/api/v1/tools")
    assert request.json == {
        "tools": [
            {"name": "ls", "description": "List", "input_schema": {"type": "object"}},
            {"name": "search", "description": "Search", "input_schema": {"type": "object"}, "source": "mcp:web"},
        ]
    }


def test_a_closed_client_refuses_synchronous_calls(client):
    client.close()
    with pytest.raises(ToolscopeError, match="closed"):
        client.register_tools([])
