"""A fake model provider on 127.0.0.1 for the proxy's tests: OpenAI Chat Completions, OpenAI
Responses and Anthropic Messages, streamed and not, answering as the real APIs do (the official
`openai` and `anthropic` clients parse every answer), and recording each request it received.

The model's behaviour is fixed. When the latest message is the user's, it calls the tool the user
names if it was sent, else `tool_search` (query: the user's text) if that was sent, else the first
tool sent (arguments {"path": "README.md"}). After a result that names a compacted output's id it
calls `retrieve_tool_output` for it, if sent; after a `tool_search` result it calls the named tool
if it is sent now; after any other result it answers in text. The model name "rate-limited" gets
a 429 with the providers' rate-limit headers.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

RATE_LIMIT_HEADERS = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "7s",
                      "anthropic-ratelimit-requests-remaining": "0", "retry-after": "7", "x-request-id": "req_fake_1"}
USAGE = {"input": 1200, "output": 25, "cached": 1024, "written": 128}


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class Provider:
    url: str = ""
    received: list[Received] = field(default_factory=list)
    # Seconds between two streamed events: a client sees each event before the next is made.
    event_gap: float = 0.0


def _tool_names(body: dict[str, Any]) -> list[str]:
    names = []
    for tool in body.get("tools") or []:
        function = tool.get("function")
        names.append(function["name"] if isinstance(function, dict) else tool.get("name", ""))
    return [name for name in names if name]


SEARCH = "tool_search"
RETRIEVE = "retrieve_tool_output"


def _user_text(path: str, body: dict[str, Any]) -> str:
    items = body.get("input") if path == "/v1/responses" else body.get("messages")
    if isinstance(items, str):
        return items
    for item in items or []:
        if item.get("role") == "user":
            content = item.get("content")
            return content if isinstance(content, str) else " ".join(
                block.get("text", "") for block in content if isinstance(block, dict))
    return ""


def _last_result(path: str, body: dict[str, Any]) -> tuple[str, str] | None:
    """(call id, text) of the result the latest item holds, None when it is not a tool result."""
    items = body.get("input") if path == "/v1/responses" else body.get("messages")
    if isinstance(items, str) or not items:
        return None
    last = items[-1]
    if path == "/v1/chat/completions":
        return (last["tool_call_id"], str(last.get("content"))) if last.get("role") == "tool" else None
    if path == "/v1/responses":
        return (last["call_id"], str(last.get("output"))) if last.get("type") == "function_call_output" else None
    content = last.get("content")
    if last.get("role") == "user" and isinstance(content, list):
        results = [block for block in content if block.get("type") == "tool_result"]
        return (results[-1]["tool_use_id"], str(results[-1].get("content"))) if results else None
    return None


def _system_text(path: str, body: dict[str, Any]) -> str:
    if path == "/v1/messages":
        system = body.get("system")
        return system if isinstance(system, str) else " ".join(b.get("text", "") for b in system or [])
    if path == "/v1/responses":
        return body.get("instructions") or ""
    return " ".join(str(m.get("content")) for m in body.get("messages") or [] if m.get("role") == "system")


MENU = "Tools you can use (write $name"


def activation(path: str, body: dict[str, Any]) -> str | None:
    """Progressive mode: a menu in the system prompt lists the tool the user names, not sent: the
    model writes `$name` to load it."""
    system = _system_text(path, body)
    if MENU not in system or _last_result(path, body) is not None:
        return None
    listed = [line[2:].split(":")[0].split(" (")[0] for line in system.splitlines() if line[:2] in ("- ", "* ")]
    wanted = next((name for name in listed if name in _user_text(path, body)), None)
    return f"${wanted}" if wanted and wanted not in _tool_names(body) else None


def _next_call(path: str, body: dict[str, Any]) -> tuple[str, str, dict[str, Any]] | None:
    """(call id, tool, arguments) of the call the model makes, None for a text answer."""
    sent = _tool_names(body)
    if not sent or activation(path, body):
        return None
    named = next((name for name in sent if name in _user_text(path, body)), None)
    result = _last_result(path, body)
    answered = result[0] if result else None
    if result and RETRIEVE in sent and 'retrieve_tool_output(id="' in result[1]:
        return "call_retrieve", RETRIEVE, {"id": result[1].split('retrieve_tool_output(id="')[1].split('"')[0]}
    if answered is None:
        if named:
            return "call_1", named, {"path": "README.md"}
        if SEARCH in sent:
            return "call_search", SEARCH, {"query": _user_text(path, body)}
        return "call_1", sent[0], {"path": "README.md"}
    if answered.endswith("search") and named:
        return "call_1", named, {"path": "README.md"}
    return None


Next = tuple[str, str, dict[str, Any]] | None


def chat(body: dict[str, Any], tool: Next) -> dict[str, Any]:
    text = activation("/v1/chat/completions", body) or "Done: the file is read."
    message: dict[str, Any] = {"role": "assistant", "content": None if tool else text, "refusal": None}
    if tool:
        message["tool_calls"] = [{"id": tool[0], "type": "function",
                                  "function": {"name": tool[1], "arguments": json.dumps(tool[2])}}]
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1764000000, "model": body["model"],
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": "tool_calls" if tool else "stop"}],
            "usage": {"prompt_tokens": USAGE["input"], "completion_tokens": USAGE["output"],
                      "total_tokens": USAGE["input"] + USAGE["output"],
                      "prompt_tokens_details": {"cached_tokens": USAGE["cached"],
                                                "cache_write_tokens": USAGE["written"]}}}


def chat_events(body: dict[str, Any], tool: Next) -> list[dict[str, Any]]:
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1764000000, "model": body["model"]}
    events = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}]
    if tool:
        events.append({**base, "choices": [{"index": 0, "finish_reason": None, "delta": {"tool_calls": [
            {"index": 0, "id": tool[0], "type": "function", "function": {"name": tool[1], "arguments": ""}}]}}]})
        arguments = json.dumps(tool[2])
        for part in (arguments[:len(arguments) // 2], arguments[len(arguments) // 2:]):
            events.append({**base, "choices": [{"index": 0, "finish_reason": None, "delta": {"tool_calls": [
                {"index": 0, "function": {"arguments": part}}]}}]})
    else:
        for part in ("Done: ", "the file is read."):
            events.append({**base, "choices": [{"index": 0, "delta": {"content": part}, "finish_reason": None}]})
    events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls" if tool else "stop"}]})
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append({**base, "choices": [], "usage": chat(body, tool)["usage"]})
    return events


def responses(body: dict[str, Any], tool: Next) -> dict[str, Any]:
    if tool:
        output = [{"type": "function_call", "id": f"fc_{tool[0]}", "call_id": tool[0], "name": tool[1],
                   "arguments": json.dumps(tool[2]), "status": "completed"}]
    else:
        output = [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                   "content": [{"type": "output_text", "text": "Done: the file is read.", "annotations": []}]}]
    return {"id": "resp_1", "object": "response", "created_at": 1764000000, "model": body["model"],
            "status": "completed", "output": output, "parallel_tool_calls": True, "tool_choice": "auto",
            "tools": body.get("tools") or [], "error": None, "incomplete_details": None, "instructions": None,
            "metadata": {}, "temperature": 1.0, "top_p": 1.0,
            "usage": {"input_tokens": USAGE["input"], "output_tokens": USAGE["output"],
                      "total_tokens": USAGE["input"] + USAGE["output"],
                      "input_tokens_details": {"cached_tokens": USAGE["cached"],
                                               "cache_write_tokens": USAGE["written"]},
                      "output_tokens_details": {"reasoning_tokens": 0}}}


def responses_events(body: dict[str, Any], tool: Next) -> list[dict[str, Any]]:
    done = responses(body, tool)
    started = {**done, "status": "in_progress", "output": [], "usage": None}
    return [{"type": "response.created", "sequence_number": 0, "response": started},
            {"type": "response.in_progress", "sequence_number": 1, "response": started},
            {"type": "response.completed", "sequence_number": 2, "response": done}]


def messages(body: dict[str, Any], tool: Next) -> dict[str, Any]:
    content = ([{"type": "tool_use", "id": tool[0].replace("call", "toolu"), "name": tool[1], "input": tool[2]}]
               if tool else [{"type": "text", "text": "Done: the file is read."}])
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": body["model"], "content": content,
            "stop_reason": "tool_use" if tool else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": USAGE["input"] - USAGE["cached"] - USAGE["written"],
                      "output_tokens": USAGE["output"], "cache_read_input_tokens": USAGE["cached"],
                      "cache_creation_input_tokens": USAGE["written"]}}


def messages_events(body: dict[str, Any], tool: Next) -> list[dict[str, Any]]:
    done = messages(body, tool)
    start = {**done, "content": [], "stop_reason": None, "usage": {**done["usage"], "output_tokens": 1}}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    if tool:
        events.append({"type": "content_block_start", "index": 0, "content_block": {
            "type": "tool_use", "id": tool[0].replace("call", "toolu"), "name": tool[1], "input": {}}})
        arguments = json.dumps(tool[2])
        for part in (arguments[:len(arguments) // 2], arguments[len(arguments) // 2:]):
            events.append({"type": "content_block_delta", "index": 0,
                           "delta": {"type": "input_json_delta", "partial_json": part}})
    else:
        events.append({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
        for part in ("Done: ", "the file is read."):
            events.append({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": part}})
    events += [{"type": "content_block_stop", "index": 0},
               {"type": "message_delta", "delta": {"stop_reason": done["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": USAGE["output"]}},
               {"type": "message_stop"}]
    return events


ANSWERS = {"/v1/chat/completions": (chat, chat_events), "/v1/responses": (responses, responses_events),
           "/v1/messages": (messages, messages_events)}


def app(provider: Provider) -> Starlette:
    async def answer(request: Request) -> Response:
        body = await request.json()
        provider.received.append(Received(request.url.path, dict(request.headers), body))
        if body.get("model") == "rate-limited":
            return JSONResponse({"error": {"type": "rate_limit_error", "message": "Slow down."}}, status_code=429,
                                headers=RATE_LIMIT_HEADERS)
        whole, streamed = ANSWERS[request.url.path]
        tool = _next_call(request.url.path, body)
        if not body.get("stream"):
            return JSONResponse(whole(body, tool), headers={"x-request-id": "req_fake_1"})

        async def events() -> AsyncIterator[bytes]:
            for event in streamed(body, tool):
                name = f"event: {event['type']}\n" if "type" in event and "object" not in event else ""
                yield f"{name}data: {json.dumps(event)}\n\n".encode()
                if provider.event_gap:
                    await asyncio.sleep(provider.event_gap)
            if request.url.path == "/v1/chat/completions":
                yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream", headers={"x-request-id": "req_fake_1"})

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "gpt-4.1", "object": "model", "created": 0,
                                                          "owned_by": "fake"}]})

    return Starlette(routes=[Route(path, answer, methods=["POST"]) for path in ANSWERS]
                     + [Route("/v1/models", models)])


@contextmanager
def serving(asgi: Any) -> Iterator[str]:
    """`asgi` served by uvicorn on a free port of 127.0.0.1 in a thread; yields its base URL."""
    config = uvicorn.Config(asgi, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
