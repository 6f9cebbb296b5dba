"""Replaying stored sessions (policies/services/simulation.py): the rows become the engine's
sessions in a fixed number of queries, and the figures equal hand-computed ones."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from toolscope_agent.engine.render import SEARCH_TOOL
from toolscope_agent.engine.schemas import schema_hash

from tests.admin.builders import make_tool
from tests.factories import make_session, make_tool_call, make_turn
from toolscope.policies.services.simulation import PLACEHOLDER_TOKENS, policy_simulate, simulation_sessions
from toolscope.tokenizer import schema_tokens

NOW = timezone.now()
COSTS = {"read_file": 100, "edit_file": 200, "run_tests": 300, "tool_search": 50}


@pytest.fixture
def recorded(project, other_project):
    for name, tokens in COSTS.items():
        make_tool(project, name, schema_tokens=tokens, description=f"The {name.replace('_', ' ')} tool.")
    sessions = []
    for n in range(3):
        session = make_session(project, started_at=NOW - timedelta(hours=3 - n))
        first = make_turn(session, 0, advertised=list(COSTS), task_message="fix the failing tests", schema_tokens=650)
        make_tool_call(first, "read_file", started_at=session.started_at)
        make_tool_call(first, "run_tests", started_at=session.started_at + timedelta(seconds=1))
        second = make_turn(session, 1, advertised=list(COSTS), task_message="fix the failing tests", schema_tokens=650)
        make_tool_call(second, "edit_file", started_at=session.started_at + timedelta(seconds=2))
        sessions.append(session)
    make_turn(make_session(other_project), 0, task_message="another tenant")
    return sessions


def window(**extra):
    return {"start": NOW - timedelta(days=1), "end": NOW + timedelta(minutes=1), **extra}


def test_sessions_are_read_in_four_queries_whatever_their_number(project, recorded, django_assert_num_queries):
    with django_assert_num_queries(4):
        sessions = simulation_sessions(project=project, **window())
    assert [s.key for s in sessions] == [s.client_id for s in recorded]
    first = sessions[0].turns
    assert [t.message for t in first] == ["fix the failing tests"] * 2
    assert [[c.name for c in t.calls] for t in first] == [["read_file", "run_tests"], ["edit_file"]]
    assert list(first[0].advertised) == list(COSTS) and first[0].advertised_tokens == 650


def test_a_selection_filters_and_limits(project, recorded):
    assert simulation_sessions(project=project, **window(limit=2))[-1].key == recorded[1].client_id
    assert simulation_sessions(project=project, **window(agent_name="nobody")) == []


def test_the_figures_equal_hand_computed_ones(project, recorded, django_assert_num_queries):
    sessions = simulation_sessions(project=project, **window())
    document = {"selection": {"mode": "context_rules", "always_on": ["read_file"],
                              "groups": {"testing": ["run_tests"]},
                              "context_rules": [{"name": "t", "keywords": ["tests"], "groups": ["testing"]}]}}
    with django_assert_num_queries(3):  # the catalog, its costs, the project's own prices
        result = policy_simulate(project=project, document=document, sessions=sessions)
    # Per session: two turns advertised at 650 each; the policy sends read_file + run_tests (400)
    # on both; edit_file on turn 1 is a hard miss. Three sessions: 3,900 advertised, 2,400 sent.
    assert (result.advertised_tokens, result.sent_tokens, result.saved_tokens) == (3900, 2400, 1500)
    assert result.calls == 9 and result.hard_misses == 3 and result.recoverable_misses == 0
    assert {miss.tool for miss in result.misses} == {"edit_file"}


def test_stored_outputs_are_priced_by_the_output_rules(project, recorded):
    turn = make_turn(make_session(project, started_at=NOW - timedelta(minutes=5)), 0, advertised=list(COSTS),
                     task_message="look", schema_tokens=650)
    make_tool_call(turn, "read_file", output_tokens=3000)
    make_tool_call(turn, "read_file", output_tokens=3000, duplicate_tokens=3000)  # unsuppressed: no placeholder
    sessions = simulation_sessions(project=project, **window())
    document = {"selection": {"mode": "all"}, "outputs": {"duplicates": {"suppress": True},
                                                          "compaction": [{"tools": "read_*", "max_tokens": 1000,
                                                                          "strategy": "head"}]}}
    result = policy_simulate(project=project, document=document, sessions=sessions)
    # The repeat saves its 3,000 tokens less an estimated placeholder; the first output 2,000.
    assert (result.duplicate_tokens_saved, result.compaction_tokens_saved) == (3000 - PLACEHOLDER_TOKENS, 2000)


def test_a_tool_search_policy_on_a_catalog_without_the_tool_is_replayed_with_toolscopes(project):
    for name in ("read_file", "git_diff"):
        make_tool(project, name, schema_tokens=100, description=f"The {name.replace('_', ' ')} tool.")
    turn = make_turn(make_session(project, started_at=NOW - timedelta(minutes=5)), 0,
                     advertised=["read_file", "git_diff"], task_message="show the git diff", schema_tokens=200)
    make_tool_call(turn, "git_diff")
    sessions = simulation_sessions(project=project, **window())
    document = {"selection": {"mode": "tool_search", "always_on": ["read_file", "tool_search"],
                              "tool_search": {"top_k": 1, "ranker": "bm25f-2"}}}
    result = policy_simulate(project=project, document=document, sessions=sessions)
    search_tokens = schema_tokens(name="tool_search", description=SEARCH_TOOL["description"],
                                  input_schema=SEARCH_TOOL["input_schema"], encoding=project.encoding,
                                  schema_hash=schema_hash("tool_search", SEARCH_TOOL["description"],
                                                          SEARCH_TOOL["input_schema"]))
    # read_file (100) and the added search tool are sent; git_diff is found by searching the task.
    assert 20 < search_tokens < 100 and result.sent_tokens == 100 + search_tokens
    assert [(miss.tool, miss.kind, miss.path) for miss in result.misses] == [("git_diff", "recoverable", "search")]
    # Context rules with tool_search always on search too, as /policy/resolve and the SDK send it.
    document["selection"]["mode"] = "context_rules"
    result = policy_simulate(project=project, document=document, sessions=sessions)
    assert result.sent_tokens == 100 + search_tokens
    assert [(miss.tool, miss.kind, miss.path) for miss in result.misses] == [("git_diff", "recoverable", "search")]
    # Without it in the always-on set, no search tool and no search: the miss is hard.
    document["selection"]["always_on"] = ["read_file"]
    result = policy_simulate(project=project, document=document, sessions=sessions)
    assert result.sent_tokens == 100 and [miss.kind for miss in result.misses] == ["hard"]


def test_a_replay_is_priced_in_dollars_under_the_models_prompt_cache(project):
    """Two stored sessions of claude-sonnet-4-5 ($3 input, $0.30 cache read, $3.75 5-minute write
    per million), two requests 30 s apart, 650 schema tokens advertised over a conversation of
    1,000 then 1,400 tokens. As recorded: 1,650 written, then 1,650 read and 400 written. A
    policy sending read_file alone (100): 1,100 written, then 1,100 read and 400 written."""
    for name, tokens in COSTS.items():
        make_tool(project, name, schema_tokens=tokens, description=f"The {name.replace('_', ' ')} tool.")
    for n in range(2):
        session = make_session(project, started_at=NOW - timedelta(hours=2 - n))
        for index, size in enumerate((1650, 2050)):
            make_turn(session, index, advertised=list(COSTS), task_message="read it", schema_tokens=650,
                      estimated_input_tokens=size, model="claude-sonnet-4-5",
                      started_at=session.started_at + timedelta(seconds=30 * index))
    result = policy_simulate(project=project, document={"selection": {"mode": "context_rules",
                                                                      "always_on": ["read_file"]}},
                             sessions=simulation_sessions(project=project, **window()))
    per_million = 1_000_000
    recorded = (1650 * 3.75 + 1650 * 0.30 + 400 * 3.75) / per_million
    policy = (1100 * 3.75 + 1100 * 0.30 + 400 * 3.75) / per_million
    assert result.priced_sessions == 2
    assert result.recorded_dollars == pytest.approx(2 * recorded)
    assert result.policy_dollars == pytest.approx(2 * policy)
    assert result.cache_breaks == 0
