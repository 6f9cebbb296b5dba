"""A corpus of bad inputs, mixed with good events in the same batches, sent over HTTP to a live
stack (web server, Celery worker, private Redis): every bad event is a rejection naming its
field, every bad body a JSON 4xx, nothing answers 5xx, and every good event is stored
(issue 11: "202, then lost", "500s with HTML bodies")."""

from __future__ import annotations

import gzip
import json
import uuid
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import wait_for
from tests.factories import make_key, make_project
from tests.ingest_strategies import deep
from toolscope.telemetry.models import BatchStatus, IngestBatch, QuarantinedEvent, ToolCall, Turn

pytestmark = pytest.mark.slow

T = "2026-11-22T10:00:00Z"


def turn(**fields: Any) -> dict[str, Any]:
    return {"type": "turn", "id": f"t-{uuid.uuid4().hex}", "session_id": "bad", "index": 0, **fields}


def call(**fields: Any) -> dict[str, Any]:
    return {"type": "tool_call", "id": f"c-{uuid.uuid4().hex}", "session_id": "bad", "turn_index": 0,
            "tool_name": "bash", **fields}


def session(**fields: Any) -> dict[str, Any]:
    return {"type": "session", "id": f"s-{uuid.uuid4().hex}", **fields}


# (event, the JSON path the rejection must name), the path relative to the event.
BAD_EVENTS: list[tuple[Any, str]] = [
    (session(id="a\x00b"), ".id"), (call(tool_name="read\x00file"), ".tool_name"),
    (call(session_id="s\x00"), ".session_id"), (call(call_id="call_\x00"), ".call_id"),
    (session(agent_name="x\x00"), ".agent_name"), (session(model="\x00"), ".model"),
    (turn(messages=[{"role": "us\x00er", "content": "hi"}]), ".messages[0].role"),
    (turn(tools=[{"name": "t", "schema_hash": "h\x00"}]), ".tools[0].schema_hash"),
    ({**session(), "type": {}}, ".type"), ({**session(), "type": []}, ".type"), ({**session(), "type": 1}, ".type"),
    ({**session(), "type": "Session"}, ".type"), ({"type": "session"}, ".id"), ({"id": "no-type"}, ".type"),
    (turn(index=2**31), ".index"), (turn(index=2_000_000_000_000), ".index"), (turn(index=-1), ".index"),
    (turn(index=1.5), ".index"), (turn(index="3"), ".index"), (turn(index=True), ".index"),
    (call(turn_index=2**31), ".turn_index"), (call(retries=32768), ".retries"), (call(retries=-1), ".retries"),
    (turn(usage={"input_tokens": 2**31}), ".usage.input_tokens"),
    (turn(usage={"output_tokens": 2**63}), ".usage.output_tokens"),
    (turn(usage={"cached_tokens": -5}), ".usage.cached_tokens"), (turn(usage="lots"), ".usage"),
    (turn(latency_ms=2**31), ".latency_ms"), (turn(latency_ms=-1), ".latency_ms"),
    (turn(latency_ms="fast"), ".latency_ms"), (turn(system_prompt_chars=2**31), ".system_prompt_chars"),
    (call(duration_ms=-0.5), ".duration_ms"), (call(duration_ms=1e300), ".duration_ms"),
    (session(timestamp="0001-01-01T00:00:00+05:00"), ".timestamp"),
    (session(timestamp="9999-12-31T23:59:59-05:00"), ".timestamp"),
    (session(timestamp="1969-12-31T23:59:59Z"), ".timestamp"), (session(timestamp=1e12), ".timestamp"),
    (session(timestamp=-1), ".timestamp"), (session(timestamp="yesterday"), ".timestamp"),
    (session(timestamp="2026-11-22T10:00:00"), ".timestamp"), (session(timestamp={}), ".timestamp"),
    (call(arguments=deep(70)), ".arguments" + ".a" * 64), (session(metadata=deep(65)), ".metadata" + ".a" * 64),
    ({"type": "catalog", "id": f"k-{uuid.uuid4().hex}", "tools": [{"name": "t", "input_schema": deep(80)}]},
     ".tools[0].input_schema" + ".a" * 64),
    (session(id="x" * 201), ".id"), (call(tool_name="t" * 201), ".tool_name"), (session(id="   "), ".id"),
    ({"type": "turn", "id": "no-session", "index": 0}, ".session_id"), (call(tool_name=None), ".tool_name"),
    ({"type": "turn", "id": "no-index", "session_id": "s"}, ".index"),
    (call(arguments=["a"]), ".arguments"), (session(metadata="m"), ".metadata"), (turn(tools="all"), ".tools"),
    (turn(tools=[{"description": "no name"}]), ".tools[0].name"),
    (turn(messages=[{"role": "user"}]), ".messages[0].content"), (call(status="weird"), ".status"),
    (call(approval="maybe"), ".approval"), (session(action="pause"), ".action"), (call(output=5), ".output"),
    ({"type": "catalog", "id": "k-none"}, ".tools"), ("a string", ""), (5, ""), ([], ""), ({}, ".id"),
]


def good_events(batch: int) -> list[dict[str, Any]]:
    sid = f"good-{batch}"
    return [
        {"type": "session", "id": sid, "agent_name": "coder", "timestamp": T},
        {"type": "turn", "id": f"{sid}:t0", "session_id": sid, "index": 0, "timestamp": T,
         "usage": {"input_tokens": 2**31 - 1}, "task_message": "fix\x00it"},
        *({"type": "tool_call", "id": f"{sid}:c{n}", "session_id": sid, "turn_index": 0, "tool_name": "bash",
           "arguments": {"cmd\x00": "ls", "n": 2**64 - 1}, "output": f"out {n}\x00", "retries": 32767,
           "timestamp": T} for n in range(4)),
    ]


def send(client: httpx.Client, body: bytes, **headers: str) -> httpx.Response:
    return client.post("/api/v1/ingest", content=body, headers={"Content-Type": "application/json", **headers})


def test_bad_events_mixed_with_good_ones_lose_no_good_event_and_answer_no_5xx(stack):
    project = make_project("corpus")
    key = make_key(project, scopes=["ingest", "policy:read"]).secret
    client = httpx.Client(base_url=stack.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
    statuses: list[int] = []
    good_sent = 0
    # Each batch: good events with a slice of the corpus spread between them.
    for batch, start in enumerate(range(0, len(BAD_EVENTS), 8)):
        bad = BAD_EVENTS[start:start + 8]
        good = good_events(batch)
        events: list[Any] = []
        for n in range(max(len(good), len(bad))):
            events += good[n:n + 1] + [event for event, _ in bad[n:n + 1]]
        body = json.dumps({"events": events}).encode()
        gzipped = batch % 2 == 1
        response = send(client, gzip.compress(body), **{"Content-Encoding": "gzip"}) if gzipped else send(client, body)
        statuses.append(response.status_code)
        assert response.status_code == 202, response.text[:500]
        results = response.json()["results"]
        assert [r["status"] for r in results].count("accepted") == len(good)
        for event, suffix in bad:
            position = next(i for i, e in enumerate(events) if e is event)
            assert results[position]["status"] == "rejected"
            assert results[position]["path"] == f"events[{position}]{suffix}", (event, results[position])
            assert results[position]["reason"]
        good_sent += len(good)
    batches = len(statuses)

    # Whole bodies that are bad: a JSON 4xx each, never a 5xx or an HTML page.
    nested = b'{"events": ' + b"[" * 300 + b"]" * 300 + b"}"
    gzip_trailing = gzip.compress(json.dumps({"events": good_events(99)}).encode()) + b"garbage"
    bodies = [
        (send(client, nested), 400), (send(client, b'{"events": [}'), 400),
        (send(client, gzip_trailing, **{"Content-Encoding": "gzip"}), 400),
        (send(client, b"\x1f\x8b not gzip", **{"Content-Encoding": "gzip"}), 400),
        (send(client, b'{"events": "\\ud800"}'), 400), (send(client, b"[]"), 400),
        (send(client, json.dumps({"events": [session()] * 1001}).encode()), 413),
        (send(client, b'{"events": []}', **{"Content-Encoding": "br"}), 415),
        (client.post("/api/v1/ingest", content=b"events=1", headers={"Content-Type": "text/plain"}), 415),
        (client.get("/api/v1/ingest"), 405), (client.get("/api/v1/no-such-thing"), 404),
        (client.put("/api/v1/tools", json={"tools": [{"name": "t\x00", "input_schema": {}}]}), 400),
        (client.post("/api/v1/ingest", json={"events": [session()]}, headers={"Authorization": "Bearer nope"}), 401),
    ]
    for response, expected in bodies:
        statuses.append(response.status_code)
        assert response.status_code == expected, (response.request.url, response.text[:300])
        assert response.headers["content-type"].startswith("application/json")
        assert response.json()["detail"]

    # Free text with NUL in a tool schema and in transcript arguments is kept, not a 500.
    tools = client.put("/api/v1/tools", json={"tools": [{"name": "sql", "input_schema": {
        "type": "object", "properties": {"q\x00": {"type": "string", "description": "\x00"}}}}]})
    transcript = client.post("/api/v1/transcripts", content=(
        b'{"session_id": "tr", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": null,'
        b' "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments":'
        b' "{\\"n\\": 1' + b"0" * 5000 + b', \\"x\\": NaN, \\"s\\": \\"\\\\ud800\\"}"}}]},'
        b' {"role": "tool", "tool_call_id": "call_1", "content": "ok\\u0000"}]}'),
        headers={"Content-Type": "application/json"})
    statuses += [tools.status_code, transcript.status_code]
    assert tools.status_code == 200, tools.text[:300]
    assert transcript.status_code == 202, transcript.text[:300]

    assert not [code for code in statuses if code >= 500]
    wait_for(lambda: not IngestBatch.objects.exclude(status=BatchStatus.DONE).exists(), 90, "every batch processed")
    assert not QuarantinedEvent.objects.exists()
    good_calls = ToolCall.objects.filter(project=project, session__client_id__startswith="good-")
    assert good_calls.count() == 4 * batches  # every good event of every batch
    assert all(c.altered and "\ufffd" in c.output and c.retries == 32767 for c in good_calls)
    assert Turn.objects.filter(project=project, session__client_id__startswith="good-").count() == batches
    assert ToolCall.objects.get(project=project, session__client_id="tr").output == "ok\ufffd"
    print(f"\n{len(statuses)} requests, {len(BAD_EVENTS)} bad events and {good_sent} good ones;"  # noqa: T201
          f" 5xx: {sum(code >= 500 for code in statuses)}; good tool calls stored: {good_calls.count()}")
