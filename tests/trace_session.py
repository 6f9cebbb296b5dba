"""A long traced session as an agent's SDK sends it, through the real ingest path, for tests and
benchmarks of one session's page.

`trace_session(project, calls=1_000)` posts one batch of events (ingest_events) and processes it
(batch_process), as a worker would: a session start, then model requests (turns) that each make
one to three calls of twenty tools, with the provider's usage (input, output, cached and
cache-written tokens), the request's latency, the model's reply as the turn's new assistant
message, and tool outputs of 0.2 to 24 KB (every fifteenth a large log). Every 40th call fails,
every twentieth repeats an earlier output of its tool (a duplicate). Deterministic: the same
arguments give the same session. Needs Django.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

TOOLS = ["read_file", "bash", "grep", "edit_file", "run_tests", "list_dir", "git_diff", "git_log", "search_code",
         "write_file", *(f"mcp__workspace__action_{i:02d}" for i in range(10))]


def _definitions() -> list[dict[str, Any]]:
    return [{"name": name, "description": f"The {name} tool: runs one step of the project's tooling.",
             "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}
            for name in TOOLS]


def _output(rng: random.Random, tool: str, n: int) -> str:
    line = f"{tool} line of output for call {n}: src/acme_api/module_{n % 97}.py ok\n"
    lines = 300 if n % 15 == 0 else rng.randrange(3, 40)  # ~24 KB, else 0.2 to 3 KB
    return f"# {tool} #{n}\n" + line * lines


def trace_events(calls: int, *, start: datetime, session_id: str = "trace", seed: int = 3) -> list[dict[str, Any]]:
    """The events of a session of `calls` tool calls from `start` (see the module's docstring)."""
    rng = random.Random(seed)
    at = start
    events: list[dict[str, Any]] = [{"type": "session", "id": f"{session_id}:start", "session_id": session_id,
                                     "action": "start", "agent_name": "coder", "model": "gpt-4o",
                                     "timestamp": at.isoformat()}]
    made: dict[str, str] = {}
    n, index, context = 0, 0, 4_000
    while n < calls:
        latency = rng.randrange(400, 9_000)
        reply = f"Turn {index}: I will look at module_{index % 97}.py next and run its tests."
        turn = {"type": "turn", "id": f"{session_id}:t{index}", "session_id": session_id, "index": index,
                "timestamp": at.isoformat(), "model": "gpt-4o", "latency_ms": latency,
                "usage": {"input_tokens": context, "output_tokens": rng.randrange(20, 900),
                          "cached_tokens": max(context - 1_200, 0), "cache_write_tokens": 0},
                "messages": [{"role": "assistant", "content": reply}]}
        if index == 0:
            turn.update(tools=_definitions(), task_message="Migrate every module to the new pagination helpers.",
                        messages=[{"role": "user", "content": "Migrate every module to the new pagination helpers."}])
        events.append(turn)
        at += timedelta(milliseconds=latency)
        for _ in range(min(rng.choice((1, 1, 2, 2, 3)), calls - n)):
            tool = TOOLS[rng.randrange(len(TOOLS))]
            output = made[tool] if n % 20 == 19 and tool in made else _output(rng, tool, n)
            made[tool] = output
            duration = rng.randrange(5, 4_000)
            events.append({"type": "tool_call", "id": f"{session_id}:c{n}", "session_id": session_id,
                           "turn_index": index, "call_id": f"call_{n:05d}", "tool_name": tool,
                           "arguments": {"path": f"src/acme_api/module_{n % 97}.py"}, "output": output,
                           "status": "error" if n % 40 == 39 else "ok", "duration_ms": duration,
                           "timestamp": at.isoformat()})
            at += timedelta(milliseconds=duration)
            context += len(output) // 4
            n += 1
        index += 1
    events.append({"type": "session", "id": f"{session_id}:end", "session_id": session_id, "action": "end",
                   "timestamp": at.isoformat()})
    return events


def trace_session(project: Any, *, calls: int = 1_000, session_id: str = "trace", seed: int = 3,
                  start: datetime | None = None) -> Any:
    """The session of trace_events (from `start`, default three hours ago), ingested and processed:
    its Session row."""
    from django.utils import timezone

    from toolscope.telemetry.models import Session
    from toolscope.telemetry.services.api_keys import api_key_create
    from toolscope.telemetry.services.ingest import ingest_events
    from toolscope.telemetry.services.processing import batch_process

    api_key = api_key_create(project=project, name=f"trace {session_id}", scopes=["ingest"]).api_key
    events = trace_events(calls, session_id=session_id, seed=seed, start=start or timezone.now() - timedelta(hours=3))
    outcome = ingest_events(api_key=api_key, raw_events=events, batch_events=1_000)
    if outcome.counts["rejected"]:
        raise ValueError(f"events rejected: {[r for r in outcome.results if r['status'] != 'accepted'][:3]}")
    for batch_id in outcome.batch_ids:
        batch_process(batch_id=batch_id)
    return Session.objects.get(project=project, client_id=session_id)
