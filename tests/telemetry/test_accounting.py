"""Token accounting of a hand-built session: every figure is recomputed here from the counts of
the individual texts, the way an operator would check it by hand."""

from __future__ import annotations

import pytest
from django.forms.models import model_to_dict
from toolscope_agent.engine.schemas import canonical_json, schema_hash

from tests.factories import make_key
from toolscope.policies.models import CompactionRule, Policy, Tool
from toolscope.telemetry.models import Artifact, IngestBatch, ProjectHourly, ToolCall, ToolHourly, Turn
from toolscope.telemetry.services.ingest import ingest_events
from toolscope.telemetry.services.processing import BatchResult, batch_process
from toolscope.tokenizer import count_tokens, schema_tokens

SYSTEM = "You are a coding agent. Use the tools."
TASK = "Fix the failing test in tests/test_api.py"
FILE_A = "def add(a, b):\n    return a + b\n"
LOG = "".join(f"tests/test_api.py::test_case_{n} PASSED [{n}%]\n" for n in range(100))
FILE_B = "import os\nprint(os.getcwd())\n"
TOOLS = [
    {"name": "read_file", "description": "Read a file", "input_schema": {
        "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    {"name": "bash", "description": "Run a shell command", "input_schema": {
        "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}},
]


def tok(text: str) -> int:
    return count_tokens(text, "o200k_base")


def call(n: int, turn: int, tool: str, output: str, **arguments) -> dict:
    return {"type": "tool_call", "id": f"s1:c{n}", "call_id": f"call_{n}", "session_id": "s1", "turn_index": turn,
            "tool_name": tool, "arguments": arguments, "output": output,
            "timestamp": f"2026-11-22T10:0{turn}:{n:02d}+00:00"}


def turn(index: int, **extra) -> dict:
    return {"type": "turn", "id": f"s1:t{index}", "session_id": "s1", "index": index,
            "timestamp": f"2026-11-22T10:0{index}:00+00:00", "usage": {"input_tokens": 100 * (index + 1)}, **extra}


EVENTS = [
    {"type": "session", "id": "s1", "agent_name": "coder", "timestamp": "2026-11-22T10:00:00+00:00"},
    turn(0, tools=TOOLS, system_prompt=SYSTEM, task_message=TASK, messages=[{"role": "user", "content": TASK}]),
    call(1, 0, "read_file", FILE_A, path="a.py"),
    call(2, 0, "bash", LOG, command="pytest"),
    # Definitions sent before travel as their hash.
    turn(1, tools=[{"name": t["name"], "schema_hash": schema_hash(t["name"], t["description"], t["input_schema"])}
                   for t in TOOLS], system_prompt=SYSTEM),
    call(3, 1, "read_file", FILE_A + "   \n\n", path="a.py"),  # the same file again, trailing blanks aside
    turn(2, system_prompt=SYSTEM, messages=[{"role": "assistant", "content": "Reading b.py next."}]),
    call(4, 2, "read_file", FILE_B, path="b.py"),
    call(5, 2, "bash", "ok\n", command="ls"),
    turn(3, system_prompt=SYSTEM),
]


@pytest.fixture
def processed(project):
    project.context_window = 2000
    project.save()
    policy = Policy.objects.create(project=project, suppress_duplicates=True)
    CompactionRule.objects.create(policy=policy, tools="bash*", max_tokens=60, strategy="head_tail")
    outcome = ingest_events(api_key=make_key(project).api_key, raw_events=EVENTS)
    assert outcome.counts["rejected"] == 0, outcome.results
    batch_process(batch_id=outcome.batch_id)
    return project


def calls_by_id() -> dict[str, ToolCall]:
    return {c.call_id: c for c in ToolCall.objects.select_related("artifact", "duplicate_of")}


def test_outputs_arguments_and_schemas_are_counted_exactly(processed):
    calls = calls_by_id()
    assert calls["call_1"].output_tokens == tok(FILE_A)
    assert calls["call_1"].argument_tokens == tok('{"path":"a.py"}')
    read_file = Tool.objects.get(name="read_file")
    assert read_file.schema_tokens == schema_tokens(
        name="read_file", description="Read a file", input_schema=TOOLS[0]["input_schema"],
        schema_hash=read_file.schema_hash, encoding="o200k_base")


def test_a_repeated_output_links_to_its_first_occurrence(processed):
    calls = calls_by_id()
    duplicate = calls["call_3"]
    assert duplicate.duplicate_of == calls["call_1"]
    assert duplicate.duplicate_tokens == tok(FILE_A + "   \n\n")
    assert duplicate.placeholder and "call_1" in duplicate.placeholder
    assert duplicate.placeholder_tokens == tok(duplicate.placeholder)
    assert calls["call_4"].duplicate_of is None and calls["call_1"].duplicate_of is None


def test_a_long_output_gets_a_compaction_artifact_within_its_rule(processed):
    calls = calls_by_id()
    artifact = calls["call_2"].artifact
    assert artifact.original == LOG
    assert artifact.tokens_before == tok(LOG)
    assert artifact.tokens_after == tok(artifact.compacted) <= 60
    assert calls["call_2"].output == artifact.compacted
    assert calls["call_5"].artifact is None  # "ok\n" fits the rule
    assert Artifact.objects.count() == 1


def test_each_turn_budget_is_the_sum_of_its_components(processed):
    calls = calls_by_id()
    schemas = sum(Tool.objects.values_list("schema_tokens", flat=True))
    compacted = calls["call_2"].artifact.tokens_after
    placeholder = calls["call_3"].placeholder_tokens
    messages_0 = tok(TASK)
    messages_2 = messages_0 + tok("Reading b.py next.")
    expected = {
        0: (tok(SYSTEM), schemas, messages_0, 0),
        1: (tok(SYSTEM), schemas, messages_0, tok(FILE_A) + compacted),
        2: (tok(SYSTEM), 0, messages_2, tok(FILE_A) + compacted + placeholder),
        3: (tok(SYSTEM), 0, messages_2, tok(FILE_A) + compacted + placeholder + tok(FILE_B) + tok("ok\n")),
    }
    for stored in Turn.objects.order_by("index"):
        parts = (stored.system_prompt_tokens, stored.schema_tokens, stored.message_tokens, stored.tool_output_tokens)
        assert parts == expected[stored.index], stored.index
        # The model's earlier calls are in the history too: their arguments, as the provider counts them.
        arguments = sum(tok(canonical_json(c.arguments)) for c in calls.values()
                        if c.turn_index < stored.index and c.arguments)
        assert stored.call_tokens == arguments
        assert stored.estimated_input_tokens == sum(parts) + arguments
        assert stored.window_share == round(max(sum(parts) + arguments, stored.input_tokens) / 2000, 4)
        assert stored.near_window == (stored.window_share > 0.8)


def test_rollups_of_the_hour_hold_the_session(processed):
    from toolscope.telemetry.services.rollups import rollups_refresh

    rollups_refresh()
    hour = ProjectHourly.objects.get()
    assert (hour.sessions, hour.turns, hour.tool_calls) == (1, 4, 5)
    assert hour.duplicate_tokens == tok(FILE_A + "   \n\n")
    bash = ToolHourly.objects.get(tool_name="bash")
    artifact = calls_by_id()["call_2"].artifact
    savings = artifact.tokens_before - artifact.tokens_after
    assert (bash.calls, bash.compactions, bash.compaction_savings) == (2, 1, savings)
    assert ToolHourly.objects.get(tool_name="read_file").times_advertised == 2


def snapshot() -> list[dict]:
    rows = []
    for model in (ToolCall, Turn, Artifact):
        rows += [model_to_dict(row) for row in model.objects.order_by("pk")]
    return rows


def test_processing_the_batch_again_changes_nothing(processed):
    before = snapshot()
    batch = IngestBatch.objects.get()
    IngestBatch.objects.filter(pk=batch.pk).update(status="pending")
    assert batch_process(batch_id=batch.pk) is BatchResult.DONE
    assert snapshot() == before


def test_the_session_summary_counts_what_the_lists_filter_on(processed):
    from toolscope.telemetry.models import Session

    session = Session.objects.get()
    turns = list(Turn.objects.order_by("index"))
    assert (session.turn_count, session.tool_call_count, session.error_count) == (4, 5, 0)
    assert session.duplicate_tokens == tok(FILE_A + "   \n\n")
    assert session.max_window_share == max(t.window_share for t in turns)
    assert session.near_window == any(t.near_window for t in turns)


def test_a_bill_of_exactly_what_the_agent_sent_leaves_nothing_unattributed(project):
    """A hand-built session whose provider bills each request for exactly what it held (system
    prompt, tool schemas, messages, the model's earlier calls and their outputs, counted here
    text by text): every token is attributed to a component, turn by turn. Without the tool calls'
    arguments in the budget, each later turn left them unexplained."""
    from dashboard.selectors import COMPONENTS, session_turns

    schemas = sum(schema_tokens(name=t["name"], description=t["description"], input_schema=t["input_schema"],
                                schema_hash=schema_hash(t["name"], t["description"], t["input_schema"]),
                                encoding="o200k_base") for t in TOOLS)
    first = [{"role": "user", "content": TASK}]
    history = tok(SYSTEM) + schemas + tok(TASK)
    after_first = history + tok(canonical_json({"path": "a.py"})) + tok(FILE_A)
    events = [
        {**turn(0, tools=TOOLS, system_prompt=SYSTEM, task_message=TASK, messages=first), "usage": {
            "input_tokens": history}},
        call(1, 0, "read_file", FILE_A, path="a.py"),
        {**turn(1, tools=TOOLS, system_prompt=SYSTEM), "usage": {"input_tokens": after_first}},
        call(2, 1, "bash", "ok\n", command="ls"),
        {**turn(2, tools=TOOLS, system_prompt=SYSTEM), "usage": {
            "input_tokens": after_first + tok(canonical_json({"command": "ls"})) + tok("ok\n")}},
    ]
    outcome = ingest_events(api_key=make_key(project).api_key, raw_events=events)
    batch_process(batch_id=outcome.batch_id)
    session = project.sessions.get()
    turns = session_turns(session=session)
    assert [t["unattributed_tokens"] for t in turns] == [0, 0, 0]
    for t in turns:
        assert sum(t[key] or 0 for key, _ in COMPONENTS) + t["unattributed_tokens"] == t["input_tokens"]
    assert [t["call_tokens"] for t in turns] == [0, tok('{"path":"a.py"}'), tok('{"path":"a.py"}') + tok(
        '{"command":"ls"}')]
