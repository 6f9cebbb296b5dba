"""Long agent sessions as the official SDKs send them, for tests and benchmarks.

`long_transcript(fmt, calls)` builds a `POST /api/v1/transcripts` body of `calls` tool calls in
the shape the openai and anthropic Python SDKs send (the `messages`/`input` and `tools` of the
last request of a run): a coding agent's system prompt, twenty tools, model requests that make
one to three calls each (parallel tool use), a sentence of assistant text on some requests, and
outputs drawn from the recorded fixtures (file contents, test logs, search results), each made
unique by its own first line except every twentieth call (`calls // 20` of them), which repeats
an earlier output of its tool exactly: a duplicate. Every fiftieth call (from the eighth) is
flagged an error where the format has a flag (Anthropic's `is_error`). Deterministic: the same
arguments give the same body.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "transcripts"
FORMATS = ("anthropic", "openai_chat", "openai_responses")
SYSTEM_PROMPT = (
    "You are a coding agent working in the repository acme/api (Python 3.12, pytest). Read code before "
    "changing it, keep changes minimal, and run the relevant tests after every edit. Use the tools "
    "provided; do not invent tools.\n"
) * 12


def _fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def _tools() -> list[dict[str, Any]]:
    """Twenty definitions in toolscope's neutral shape: the fixture's four and sixteen more."""
    tools = [{key: tool[key] for key in ("name", "description", "input_schema")}
             for tool in _fixture("anthropic")["tools"]]
    for i in range(16):
        tools.append({
            "name": f"mcp__workspace__action_{i:02d}",
            "description": f"Workspace action {i}: runs one step of the project's tooling and returns its "
                           "output as text. Paths are relative to the repository root.",
            "input_schema": {"type": "object", "properties": {
                "path": {"type": "string", "description": "A path relative to the repository root"},
                "args": {"type": "array", "items": {"type": "string"}},
                "timeout_s": {"type": "integer", "minimum": 1, "maximum": 600}}, "required": ["path"]},
        })
    return tools


def _outputs() -> list[str]:
    """The recorded fixture's tool outputs (0.1 to 3.4 KB)."""
    body = _fixture("openai_chat")
    return [m["content"] for m in body["messages"] if m.get("role") == "tool" and len(m["content"]) > 50]


def _plan(calls: int, seed: int, output_repeat: int = 1) -> list[list[dict[str, Any]]]:
    """Model requests, each a list of calls {id, name, arguments, output, is_error}."""
    rng = random.Random(seed)
    tools = _tools()
    outputs = _outputs()
    requests: list[list[dict[str, Any]]] = []
    made: list[tuple[str, str]] = []
    n = 0
    while n < calls:
        batch = []
        for _ in range(min(rng.choice((1, 1, 1, 2, 2, 3)), calls - n)):
            if n % 20 == 19:
                tool, output = made[rng.randrange(len(made))]  # a repeat of an earlier output of its tool
            else:
                tool = tools[rng.randrange(len(tools))]["name"]
                output = f"# {tool} #{n}\n" + outputs[rng.randrange(len(outputs))] * output_repeat
                made.append((tool, output))
            batch.append({"id": f"call_{seed}_{n:06d}", "name": tool,
                          "arguments": {"path": f"src/acme_api/module_{n % 97}.py"},
                          "output": output, "is_error": n % 50 == 7})
            n += 1
        requests.append(batch)
    return requests


def long_transcript(fmt: str, calls: int, *, session_id: str = "long-run", seed: int = 7,
                    output_repeat: int = 1) -> dict[str, Any]:
    """A transcript body of `calls` tool calls in `fmt` (anthropic, openai_chat, openai_responses),
    about 1.2 KB a call (each output `output_repeat` times as long: 4 makes ~4 KB a call)."""
    requests = _plan(calls, seed, output_repeat)
    tools = _tools()
    task = "Migrate every module of src/acme_api to the new pagination helpers; run the tests after each."
    head = {"session_id": session_id, "agent_name": "coder", "timestamp": "2026-11-22T10:00:00Z",
            "metadata": {"repo": "acme/api"}}
    if fmt == "anthropic":
        messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
        for i, batch in enumerate(requests):
            content: list[dict[str, Any]] = []
            if i % 7 == 0:
                content.append({"type": "text", "text": f"Step {i}: next module."})
            content += [{"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["arguments"]} for c in batch]
            messages.append({"role": "assistant", "content": content})
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": c["id"], "content": [{"type": "text", "text": c["output"]}],
                 "is_error": c["is_error"]} for c in batch]})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": "All modules migrated."}]})
        return {**head, "model": "claude-sonnet-4-5-20250929", "system": SYSTEM_PROMPT,
                "tools": tools, "messages": messages, "max_tokens": 8192}
    if fmt == "openai_chat":
        messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task}]
        for i, batch in enumerate(requests):
            messages.append({"role": "assistant", "content": f"Step {i}: next module." if i % 7 == 0 else None,
                             "tool_calls": [{"id": c["id"], "type": "function", "function": {
                                 "name": c["name"], "arguments": json.dumps(c["arguments"])}} for c in batch]})
            messages += [{"role": "tool", "tool_call_id": c["id"], "content": c["output"]} for c in batch]
        messages.append({"role": "assistant", "content": "All modules migrated."})
        return {**head, "model": "gpt-4o", "messages": messages, "tools": [
            {"type": "function", "function": {"name": t["name"], "description": t["description"],
                                              "parameters": t["input_schema"]}} for t in tools]}
    if fmt == "openai_responses":
        items: list[dict[str, Any]] = [{"type": "message", "role": "user",
                                        "content": [{"type": "input_text", "text": task}]}]
        for i, batch in enumerate(requests):
            if i % 7 == 0:
                items.append({"type": "message", "role": "assistant", "content": [
                    {"type": "output_text", "text": f"Step {i}: next module."}]})
            items += [{"type": "function_call", "call_id": c["id"], "name": c["name"],
                       "arguments": json.dumps(c["arguments"])} for c in batch]
            items += [{"type": "function_call_output", "call_id": c["id"], "output": c["output"]} for c in batch]
        return {**head, "format": "openai_responses", "model": "gpt-4.1", "instructions": SYSTEM_PROMPT,
                "input": items, "tools": [{"type": "function", "name": t["name"], "description": t["description"],
                                           "parameters": t["input_schema"]} for t in tools]}
    raise ValueError(f"unknown format {fmt!r}")


def bulk_session(project: Any, *, client_id: str = "long", turns: int = 1_000, calls_per_turn: int = 2,
                 crowded: tuple[int, int] | None = None, output_bytes: int = 300) -> Any:
    """A stored session of `turns` turns (index 0 on), each with `calls_per_turn` tool calls, and
    with `crowded` = (turn index, n) n more calls in that one turn; inserted in bulk with the
    figures processing would give them (tokens, budgets, a duplicate every tenth call) and the
    session's summary, so a page of it reads as a processed one. Needs Django."""
    from datetime import timedelta

    from django.utils import timezone

    from toolscope.telemetry.models import Session, ToolCall, Turn
    from toolscope.telemetry.retention import expiry_day

    start = timezone.now() - timedelta(hours=2)
    day = expiry_day(retention_days=project.retention_days, moment=start)
    session = Session.objects.create(project=project, client_id=client_id, agent_name="coder", model="gpt-4o",
                                     started_at=start, ended_at=start + timedelta(hours=1), expires_on=day,
                                     first_expires_on=day)
    turn_rows = Turn.objects.bulk_create([
        Turn(project=project, session=session, client_id=f"{client_id}:t{i}", index=i, expires_on=day,
             started_at=start + timedelta(seconds=i), messages=[{"role": "user", "content": f"step {i}"}],
             schema_tokens=3_000, message_tokens=10 * i, tool_output_tokens=100 * i,
             estimated_input_tokens=3_000 + 110 * i, input_tokens=3_100 + 110 * i,
             window_share=min(1.0, (3_100 + 110 * i) / 200_000))
        for i in range(turns)], batch_size=2_000)
    plan = [(turn, n) for turn in turn_rows for n in range(calls_per_turn)]
    if crowded:
        crowded_turn = next(turn for turn in turn_rows if turn.index == crowded[0])
        plan += [(crowded_turn, calls_per_turn + n) for n in range(crowded[1])]
    filler = ("x" * 79 + "\n") * (output_bytes // 80)
    calls = ToolCall.objects.bulk_create([
        ToolCall(project=project, session=session, turn=turn, turn_index=turn.index, expires_on=day,
                 client_id=f"{client_id}:c{turn.index}.{n}", call_id=f"call_{turn.index}_{n}",
                 tool_name="read_file" if n % 2 else "bash", arguments={"path": f"src/m{turn.index}.py"},
                 output=f"output of {turn.index}.{n}\n{filler}", output_tokens=90, argument_tokens=8,
                 started_at=turn.started_at + timedelta(milliseconds=n), duration_ms=12.5,
                 status="error" if (turn.index + n) % 97 == 0 else "ok")
        for turn, n in plan], batch_size=2_000)
    # Every tenth call repeats the first call's output: its duplicate, whatever page it is on.
    repeats = [call.pk for number, call in enumerate(calls) if number % 10 == 9]
    ToolCall.objects.filter(pk__in=repeats, expires_on=day).update(duplicate_of_id=calls[0].pk, duplicate_tokens=90)
    Session.objects.filter(pk=session.pk).update(
        turn_count=len(turn_rows), tool_call_count=len(calls), duplicate_tokens=90 * len(repeats),
        error_count=sum(call.status != "ok" for call in calls))
    session.refresh_from_db()
    return session
