"""OpenTelemetry GenAI spans (the semantic conventions as the openai-v2, anthropic and
google-genai instrumentations emit them today) as toolscope's session, turn and tool_call events.

The attribute table is in docs/otlp.md ("OpenTelemetry GenAI").

Ids: the session is the conversation (or trace); a turn is its span id; a tool call is
`<session>:<call id>` when the call has an id, so the call read from a later request's history and
the `execute_tool` span of the same call are one event (the first stored wins; re-sent exports
create nothing twice). Ids and names longer than 200 characters are fitted after their secrets
are replaced (services/redact.identifier_fit).

A turn's index is its place in the conversation: how many assistant messages its input holds
(0 for the first request); two requests of one export with the same count (parallel requests,
or an instrumentation that cut the history) fall back to the start time below. Two requests of
one history in different exports (a retry, two branches) share the index: they are two turns all
the same, since a turn is its span id. Without captured
content (the conventions make it opt-in) there are no messages: the index falls back to the
span's start in milliseconds modulo 2^31 (ordered, rarely equal within a session), and the
session's metadata says `content_captured: false`: tool definitions and messages are not known,
so schema and message tokens are partial (the session page says so). A tool call whose request
did not come with its turn's span is attached to the last inference span of its session started
before it in the same export, else to that same fallback index.

A turn's task is the latest user text of its input history (the instruction that request works
on, as an agent passes its current one to `tools()`); tool results are no instruction.
"""

from __future__ import annotations

import copy
import json
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from toolscope_agent.engine.bytecache import byte_lru_cache
from toolscope_agent.engine.schemas import schema_hash

from toolscope.telemetry.otlp.decode import Span
from toolscope.telemetry.otlp.indexed import as_current
from toolscope.telemetry.otlp.jsontext import read_json
from toolscope.telemetry.otlp.openinference import as_genai
from toolscope.telemetry.services.redact import identifier_fit, text_fit

INFERENCE = {"chat", "text_completion", "generate_content"}
EXECUTE_TOOL = "execute_tool"
MAX_INDEX = 2**31 - 1
MAX_ERROR_LENGTH = 2000
CONVENTIONS = "toolscope.conventions"  # set on spans read from another convention (openinference.py)


def is_genai(span: Span) -> bool:
    operation = span.attributes.get("gen_ai.operation.name")
    return operation in INFERENCE or operation == EXECUTE_TOOL


def genai_events(spans: Iterable[Span]) -> list[dict[str, Any]]:
    """The events of the GenAI spans among `spans` (OpenInference spans and the older indexed
    shape read as current GenAI ones, see openinference.py and indexed.py; others are ignored),
    sessions first."""
    spans = [span for span in (as_current(as_genai(span)) for span in spans) if is_genai(span)]
    sessions: dict[str, dict[str, Any]] = {}
    turns: list[dict[str, Any]] = []
    calls: dict[str, dict[str, Any]] = {}
    # Per session: (start ns, turn index) of each inference span, and call id -> turn index.
    started: dict[str, list[tuple[int, int]]] = defaultdict(list)
    asked_in: dict[tuple[str, str], int] = {}
    used: set[tuple[str, int]] = set()
    definitions_sent: set[str] = set()
    for span in sorted(spans, key=lambda span: span.start_ns):
        session = _session_id(span)
        event = sessions.setdefault(session, {"type": "session", "id": session, "timestamp": _time(span.start_ns),
                                              "metadata": {"source": "otlp",
                                                           "conventions": span.attributes.get(CONVENTIONS, "gen_ai"),
                                                           "content_captured": True}})
        agent = span.attributes.get("gen_ai.agent.name") or span.resource.get("service.name")
        if isinstance(agent, str) and agent and "agent_name" not in event:
            event["agent_name"] = identifier_fit(agent)
        if span.attributes.get("gen_ai.operation.name") in INFERENCE:
            turn, history = _turn(span, session)
            if (session, turn["index"]) in used:  # two requests with one history: parallel, or truncated
                turn["index"] = _fallback_index(span)
            used.add((session, turn["index"]))
            if "tools" in turn:
                turn["tools"] = _once(turn["tools"], definitions_sent)
            turns.append(turn)
            if "gen_ai.input.messages" not in span.attributes:
                event["metadata"]["content_captured"] = False
            started[session].append((span.start_ns, turn["index"]))
            for call in _answered_calls(history, session, span):
                asked_in[(session, call["call_id"])] = call["turn_index"]
                calls.setdefault(call["id"], call)
            if "model" not in event and turn.get("model"):
                event["model"] = turn["model"]
    for span in spans:
        if span.attributes.get("gen_ai.operation.name") == EXECUTE_TOOL:
            session = _session_id(span)
            call = _executed(span, session)
            before = [index for start, index in started[session] if start <= span.start_ns]
            call["turn_index"] = asked_in.get((session, call.get("call_id", "")),
                                              before[-1] if before else _fallback_index(span))
            existing = calls.get(call["id"])
            calls[call["id"]] = {**existing, **call} if existing else call  # the span knows duration, status
    return [*sessions.values(), *turns, *calls.values()]


def _once(tools: list[tuple[dict[str, Any], str]], sent: set[str]) -> list[dict[str, Any]]:
    """Each definition in full the first time this export carries it, then by its hash (as the
    SDK sends them): an agent's 6 KB of tools is stored once per export, not once per request."""
    out = []
    for tool, digest in tools:
        out.append({"name": tool["name"], "schema_hash": digest} if digest in sent else copy.deepcopy(tool))
        sent.add(digest)
    return out


def _session_id(span: Span) -> str:
    conversation = span.attributes.get("gen_ai.conversation.id")
    return identifier_fit(str(conversation)) if conversation else span.trace_id


def _time(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC).isoformat().replace("+00:00", "Z")


def _fallback_index(span: Span) -> int:
    return (span.start_ns // 1_000_000) % (MAX_INDEX + 1)


def _messages(span: Span, key: str) -> list[dict[str, Any]] | None:
    raw = span.attributes.get(key)
    if isinstance(raw, str):
        try:
            raw = read_json(raw)
        except ValueError:
            return None
    return [message for message in raw if isinstance(message, dict)] if isinstance(raw, list) else None


def _parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    parts = message.get("parts")
    return [part for part in parts if isinstance(part, dict)] if isinstance(parts, list) else []


def _text(message: dict[str, Any]) -> str:
    return "\n".join(str(part.get("content", "")) for part in _parts(message) if part.get("type") == "text")


def _turn(span: Span, session: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    attributes = span.attributes
    history = _messages(span, "gen_ai.input.messages")
    turn: dict[str, Any] = {"type": "turn", "id": span.span_id, "session_id": session,
                            "timestamp": _time(span.start_ns),
                            "latency_ms": round(max(0, span.end_ns - span.start_ns) / 1e6, 3)}
    if history is not None:
        turn["index"] = min(MAX_INDEX, sum(message.get("role") == "assistant" for message in history))
        # The latest instruction: a user message of tool results only (Anthropic) has no text.
        task = next((text for message in reversed(history)
                     if message.get("role") == "user" and (text := _text(message))), None)
        if task:
            turn["task_message"] = task
        # New at this request: the user's words after the model's last answer (a request that only
        # brings tool results brings none), as a transcript's turn lists them; not the task again.
        last_answer = max((i for i, message in enumerate(history) if message.get("role") == "assistant"), default=-1)
        turn["messages"] = [{"role": "user", "content": text} for message in history[last_answer + 1:]
                            if message.get("role") == "user" and (text := _text(message))]
        system = "\n".join(_text(message) for message in history if message.get("role") == "system")
        instructions = attributes.get("gen_ai.system_instructions")
        if isinstance(instructions, str):
            system = "\n".join(filter(None, [instructions, system]))
        if system:
            turn["system_prompt"] = system
    else:
        turn["index"] = _fallback_index(span)
    model = attributes.get("gen_ai.response.model") or attributes.get("gen_ai.request.model")
    if isinstance(model, str) and model:
        turn["model"] = identifier_fit(model)
    usage = {name: attributes[key] for name, key in (
        ("input_tokens", "gen_ai.usage.input_tokens"), ("output_tokens", "gen_ai.usage.output_tokens"),
        ("cached_tokens", "gen_ai.usage.cache_read.input_tokens"),
        ("cache_write_tokens", "gen_ai.usage.cache_creation.input_tokens"))
        if isinstance(attributes.get(key), int) and attributes[key] >= 0}
    if usage:
        turn["usage"] = usage
    raw = attributes.get("gen_ai.tool.definitions")
    hashed = _definitions_text(raw) if isinstance(raw, str) else _hashed(_definitions(raw))
    if hashed is not None:
        turn["tools"] = list(hashed)
    else:  # no (readable) definitions: which tools the request carried is not known
        turn["tools_known"] = False
    return turn, history or []


# Bytes of definition texts and what was parsed from them one process keeps (issue 24, item 6:
# 256 entries of 3 MB each held web processes at 600-990 MB).
DEFINITIONS_CACHE_BYTES = 32 * 1024 * 1024


@byte_lru_cache(DEFINITIONS_CACHE_BYTES)
def _definitions_text(raw: str) -> tuple[tuple[dict[str, Any], str], ...] | None:
    """(definition, schema hash) of each tool of a `gen_ai.tool.definitions` string: an agent
    sends the same text on every request, so it is parsed and hashed once (kept while the texts
    and their definitions weigh at most DEFINITIONS_CACHE_BYTES)."""
    try:
        parsed = read_json(raw)
    except ValueError:
        return None
    return _hashed(_definitions(parsed))


def _hashed(tools: list[dict[str, Any]] | None) -> tuple[tuple[dict[str, Any], str], ...] | None:
    if tools is None:
        return None
    return tuple((tool, schema_hash(tool["name"], tool["description"], tool["input_schema"])) for tool in tools)


def _definitions(raw: Any) -> list[dict[str, Any]] | None:
    if not isinstance(raw, list):
        return None
    tools = []
    for tool in raw:
        if not isinstance(tool, dict):
            continue
        body = tool.get("function") if isinstance(tool.get("function"), dict) else tool
        name = body.get("name")
        if isinstance(name, str) and name:
            schema = body.get("parameters", body.get("input_schema", body.get("inputSchema", {})))
            tools.append({"name": name, "description": str(body.get("description") or ""),
                          "input_schema": schema if isinstance(schema, dict) else {}})
    return tools


def _answered_calls(history: list[dict[str, Any]], session: str, span: Span) -> list[dict[str, Any]]:
    """Tool calls of the history's assistant messages that a later tool message answered."""
    answers = {str(part.get("id")): part.get("response") for message in history for part in _parts(message)
               if part.get("type") == "tool_call_response" and part.get("id")}
    calls, assistant_turn = [], -1
    for message in history:
        if message.get("role") != "assistant":
            continue
        assistant_turn += 1
        for part in _parts(message):
            call_id = str(part.get("id") or "")
            if part.get("type") != "tool_call" or not call_id or call_id not in answers:
                continue
            arguments = _arguments(part.get("arguments"))
            response = answers[call_id]
            calls.append({"type": "tool_call", "id": identifier_fit(f"{session}:{call_id}"), "session_id": session,
                          "turn_index": assistant_turn, "call_id": identifier_fit(call_id),
                          "tool_name": identifier_fit(str(part.get("name") or "unknown")),
                          "arguments": arguments if isinstance(arguments, dict) else {},
                          "output": response if isinstance(response, str) else json.dumps(response),
                          "status": "ok", "timestamp": _time(span.start_ns)})
    return calls


def _executed(span: Span, session: str) -> dict[str, Any]:
    attributes = span.attributes
    call_id = attributes.get("gen_ai.tool.call.id")
    call: dict[str, Any] = {
        "type": "tool_call", "id": identifier_fit(f"{session}:{call_id}" if call_id else f"{session}:{span.span_id}"),
        "session_id": session, "tool_name": identifier_fit(str(attributes.get("gen_ai.tool.name") or span.name)),
        "status": "error" if span.failed else "ok", "timestamp": _time(span.start_ns),
        "duration_ms": round(max(0, span.end_ns - span.start_ns) / 1e6, 3)}
    if call_id:
        call["call_id"] = identifier_fit(str(call_id))
    arguments = _arguments(attributes.get("gen_ai.tool.call.arguments"))
    if isinstance(arguments, dict):
        call["arguments"] = arguments
    result = attributes.get("gen_ai.tool.call.result")
    if result is not None:
        call["output"] = result if isinstance(result, str) else json.dumps(result)
    if span.failed and span.status_message:
        call["error"] = text_fit(span.status_message, MAX_ERROR_LENGTH)
    return call


def _arguments(value: Any) -> Any:
    """Arguments as the conventions give them: an object, or its JSON text (text that is no JSON
    is kept under "arguments")."""
    if not isinstance(value, str):
        return value
    try:
        return read_json(value)
    except ValueError:
        return {"arguments": value}
