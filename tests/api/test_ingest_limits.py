"""Ingest validates to what the database can hold: an event the API accepts is stored; what a
column cannot hold is a 4xx naming the field, or, for free text, kept with U+FFFD in place of NUL
and lone surrogates. Inputs from a fuzz run and from careless clients (issue 11)."""

from __future__ import annotations

import threading

import pytest

from tests.api.test_ingest import URL, call_event, process_all, session_event, turn_event
from toolscope.telemetry.models import IngestBatch, QuarantinedEvent, Session, ToolCall, Turn
from toolscope.telemetry.services.events import Rejected, event_validate
from toolscope.telemetry.services.processing import BatchResult, batch_process

pytestmark = pytest.mark.django_db(transaction=True)


def deep(levels: int) -> dict:
    value: dict = {}
    for _ in range(levels):
        value = {"a": value}
    return value


@pytest.mark.parametrize(("event", "path", "reason"), [
    (session_event(sid="a\x00b"), "events[0].id", "NUL"),
    (session_event(agent_name="coder\x00"), "events[0].agent_name", "NUL"),
    (call_event(tool_name="read\x00file"), "events[0].tool_name", "NUL"),
    (call_event(call_id="call_\x00"), "events[0].call_id", "NUL"),
    ({**session_event(), "type": {}}, "events[0].type", "must be one of"),
    ({**session_event(), "type": ["session"]}, "events[0].type", "must be one of"),
    (turn_event(index=2**31), "events[0].index", "from 0 to 2147483647"),
    (turn_event(index=1e30), "events[0].index", "integer"),
    (call_event(turn_index=2**31), "events[0].turn_index", "from 0 to 2147483647"),
    (call_event(retries=32768), "events[0].retries", "from 0 to 32767"),
    (turn_event(usage={"input_tokens": 2**31}), "events[0].usage.input_tokens", "2147483647"),
    (turn_event(usage={"cached_tokens": 2**63}), "events[0].usage.cached_tokens", "2147483647"),
    (turn_event(latency_ms=2**31), "events[0].latency_ms", "from 0 to 2147483647"),
    (turn_event(system_prompt_chars=2**40), "events[0].system_prompt_chars", "2147483647"),
    (session_event(timestamp="0001-01-01T00:00:00+05:00"), "events[0].timestamp", "from 1970-01-01"),
    (session_event(timestamp="9999-12-31T23:59:59+00:00"), "events[0].timestamp", "to 3000-01-01"),
    (session_event(timestamp="1969-12-31T23:59:59Z"), "events[0].timestamp", "from 1970-01-01"),
    (session_event(timestamp=-1), "events[0].timestamp", "from 1970-01-01"),
    (session_event(timestamp=1e12), "events[0].timestamp", "epoch"),
    (call_event(arguments=deep(70)), "events[0].arguments" + ".a" * 64, "nested deeper than 64"),
    (session_event(metadata=deep(65)), "events[0].metadata" + ".a" * 64, "nested deeper than 64"),
])
def test_what_a_column_cannot_hold_is_refused_naming_the_field(api, event, path, reason):
    response = api.post_json(URL, {"events": [event]})
    assert response.status_code == 400, response.json()
    result = response.json()["results"][0]
    assert (result["status"], result["path"]) == ("rejected", path)
    assert reason in result["reason"]
    assert not IngestBatch.objects.exists()


@pytest.mark.parametrize(("arguments", "reason"), [
    ({"n": 2**64}, "64 bits"), ({"n": -(2**63) - 1}, "64 bits"), ({"n": float("nan")}, "not finite"),
    ({"n": [float("inf")]}, "not finite"),
])
def test_numbers_json_cannot_carry_are_refused(arguments, reason):
    """Transcripts read tool arguments with Python's json, which takes integers of any size and
    NaN: such values never reach a column."""
    with pytest.raises(Rejected) as refused:
        event_validate(call_event(arguments=arguments), path="events[0]", received_at="2026-11-22T10:00:00+00:00")
    assert refused.value.path.startswith("events[0].arguments.n")
    assert reason in refused.value.reason


def test_the_edges_of_every_range_are_accepted_and_stored(api):
    events = [
        session_event(timestamp="1970-01-01T00:00:00Z", metadata=deep(63)),
        turn_event(index=2**31 - 1, usage={"input_tokens": 2**31 - 1, "output_tokens": 0, "cached_tokens": 2**31 - 1,
                                           "cache_write_tokens": 2**31 - 1, "cache_write_1h_tokens": 0},
                   latency_ms=2**31 - 1, system_prompt_chars=2**31 - 1, timestamp="2999-12-31T23:59:59Z"),
        call_event(turn_index=2**31 - 1, retries=32767, duration_ms=2**31 - 1,
                   arguments={"n": 2**64 - 1, "m": -(2**63)}),
    ]
    response = api.post_json(URL, {"events": events})
    assert response.json()["accepted"] == 3, response.json()
    process_all()
    assert IngestBatch.objects.get().status == "done"
    assert not QuarantinedEvent.objects.exists()
    turn = Turn.objects.get()
    assert (turn.index, turn.input_tokens, turn.latency_ms) == (2**31 - 1, 2**31 - 1, 2**31 - 1)
    assert (turn.cached_tokens, turn.cache_write_tokens, turn.cache_write_1h_tokens) == (2**31 - 1, 2**31 - 1, 0)
    call = ToolCall.objects.get()
    assert (call.turn_index, call.retries, call.arguments) == (2**31 - 1, 32767, {"n": 2**64 - 1, "m": -(2**63)})
    assert Session.objects.get().started_at.year == 1970


def test_free_text_keeps_its_content_with_nul_replaced_and_the_call_marked_altered(api):
    events = [
        session_event(metadata={"note\x00": "a\x00b"}),
        turn_event(task_message="fix\x00it", messages=[{"role": "user", "content": "x\x00"}]),
        call_event(output="line 1\x00line 2", error="\x00", arguments={"path\x00": ["a\x00"]}),
        call_event(n=1, output="clean"),
    ]
    response = api.post_json(URL, {"events": events})
    assert response.json()["accepted"] == 4, response.json()
    process_all()
    altered = ToolCall.objects.get(client_id="s1:c0")
    assert altered.altered is True
    assert (altered.output, altered.error) == ("line 1\ufffdline 2", "\ufffd")
    assert altered.arguments == {"path\ufffd": ["a\ufffd"]}
    assert ToolCall.objects.get(client_id="s1:c1").altered is False
    assert Session.objects.get().metadata == {"note\ufffd": "a\ufffdb"}
    turn = Turn.objects.get()
    assert (turn.task_message, turn.messages) == ("fix\ufffdit", [{"role": "user", "content": "x\ufffd"}])


def test_bad_events_mixed_with_good_ones_cost_no_good_event(api):
    good = [session_event(), turn_event(), *(call_event(n=n) for n in range(5))]
    bad = [turn_event(index=2**31), call_event(n=9, retries=10**6), {"type": {}, "id": "x"},
           session_event(sid="s\x00"), call_event(n=8, arguments=deep(100))]
    events = [event for pair in zip(good, bad + [None] * len(good), strict=False) for event in pair if event]
    response = api.post_json(URL, {"events": events})
    body = response.json()
    assert response.status_code == 202
    assert (body["accepted"], body["rejected"]) == (len(good), len(bad))
    assert all(r["path"].startswith("events[") for r in body["results"] if r["status"] == "rejected")
    process_all()
    assert ToolCall.objects.count() == 5 and Turn.objects.count() == 1
    assert not QuarantinedEvent.objects.exists()


def test_a_turn_index_near_the_top_of_the_range_costs_no_more_than_any_other(project):
    """The budget walked every index between two turns: index 2,000,000,000 kept a worker busy
    until the time limit on every attempt. The walk now follows the calls' own indexes."""
    events = [
        {"type": "turn", "id": "t0", "session_id": "s", "index": 0, "timestamp": "2026-11-22T10:00:00Z"},
        {"type": "tool_call", "id": "c0", "session_id": "s", "turn_index": 0, "tool_name": "bash", "output": "x" * 40,
         "timestamp": "2026-11-22T10:00:01Z"},
        {"type": "turn", "id": "t1", "session_id": "s", "index": 2_000_000_000, "timestamp": "2026-11-22T10:00:02Z"},
    ]
    batch = IngestBatch.objects.create(project=project, payload={"events": events}, event_count=3)
    result: list[BatchResult] = []
    worker = threading.Thread(target=lambda: result.append(batch_process(batch_id=batch.pk)))
    worker.start()
    worker.join(timeout=60)  # the old loop needed minutes; a liveness bound, not a speed target
    assert result == [BatchResult.DONE]
    last = Turn.objects.get(client_id="t1")
    assert last.tool_output_tokens == ToolCall.objects.get().output_tokens > 0


# Each of these passed the API before this validation existed, then failed in the worker and took
# its batch down. Written straight into a batch (as a client of an older server would have left
# them), they are quarantined and the good events beside them commit.
POISON = [
    {"type": "tool_call", "id": "p-nul", "session_id": "s", "turn_index": 0, "tool_name": "bash",
     "output": "a\x00b", "timestamp": "2026-11-22T10:00:00+00:00"},
    {"type": "turn", "id": "p-index", "session_id": "s", "index": 2**40, "timestamp": "2026-11-22T10:00:00+00:00"},
    {"type": "tool_call", "id": "p-retries", "session_id": "s", "turn_index": 0, "tool_name": "bash",
     "retries": 40_000, "timestamp": "2026-11-22T10:00:00+00:00"},
    {"type": "tool_call", "id": "p-args", "session_id": "s", "turn_index": 0, "tool_name": "bash",
     "arguments": {"k": "v\x00 secret-value-77"}, "timestamp": "2026-11-22T10:00:00+00:00"},
]


def test_events_the_database_refuses_are_quarantined_and_their_batch_commits(project):
    good = [
        {"type": "session", "id": "s", "session_id": "s", "action": "start", "agent_name": "coder",
         "timestamp": "2026-11-22T10:00:00+00:00"},
        {"type": "tool_call", "id": "ok-1", "session_id": "s", "turn_index": 0, "tool_name": "bash", "output": "1",
         "timestamp": "2026-11-22T10:00:00+00:00"},
        {"type": "tool_call", "id": "ok-2", "session_id": "s", "turn_index": 0, "tool_name": "bash", "output": "2",
         "timestamp": "2026-11-22T10:00:00+00:00"},
    ]
    events = [good[0], POISON[0], good[1], POISON[1], POISON[2], good[2], POISON[3]]
    batch = IngestBatch.objects.create(project=project, payload={"events": events}, event_count=len(events))
    assert batch_process(batch_id=batch.pk) is BatchResult.DONE
    batch.refresh_from_db()
    assert (batch.status, batch.error) == ("done", "")
    assert set(ToolCall.objects.values_list("client_id", flat=True)) == {"ok-1", "ok-2"}
    assert Session.objects.get().agent_name == "coder"
    quarantined = {q.client_id: q for q in QuarantinedEvent.objects.all()}
    assert set(quarantined) == {"p-nul", "p-index", "p-retries", "p-args"}
    assert all(q.batch_id == batch.pk and q.project_id == project.pk for q in quarantined.values())
    assert quarantined["p-args"].event == POISON[3]  # kept whole, to retry
    for q in quarantined.values():
        assert "secret-value" not in q.reason and "2**40" not in q.reason and "40000" not in q.reason
    assert "out of range" in quarantined["p-index"].reason
