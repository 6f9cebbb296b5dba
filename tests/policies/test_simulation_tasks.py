"""The simulator replays each request with its own task (issue 25, item 1): a chat's later
instruction is the task of the requests after it, so a context rule keyed on a word of the
second instruction fires on those requests and not on the ones before it.

The chat goes the whole way: posted as a transcript, stored by the worker, read back by
`simulation_sessions` and replayed."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.api.conftest import KeyClient
from tests.factories import make_key
from toolscope.policies.services.search_history import search_history_refresh
from toolscope.policies.services.simulation import policy_simulate, simulation_sessions
from toolscope.telemetry.models import IngestBatch
from toolscope.telemetry.services.processing import batch_process

FIRST = "Find why the login test fails."
SECOND = "Now apply the migrations on staging."
THIRD = "Finally open a pull request."
TOOLS = ["read_file", "run_migrations", "create_pr"]


def _chat() -> dict[str, Any]:
    def call(call_id: str, name: str) -> list[dict[str, Any]]:
        return [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": call_id, "content": f"{name} done"},
        ]
    return {
        "model": "gpt-4o",
        "tools": [{"type": "function", "function": {"name": name, "description": f"The {name} tool.",
                                                    "parameters": {"type": "object", "properties": {}}}}
                  for name in TOOLS],
        "messages": [
            {"role": "user", "content": FIRST}, *call("call_1", "read_file"),
            {"role": "assistant", "content": "Found it."},
            {"role": "user", "content": SECOND}, *call("call_2", "run_migrations"),
            {"role": "assistant", "content": "Applied."},
            {"role": "user", "content": THIRD}, *call("call_3", "create_pr"),
            {"role": "assistant", "content": "Opened."},
        ],
    }


@pytest.fixture
def recorded(project):
    client = KeyClient(make_key(project, scopes=["ingest"]).secret)
    response = client.post_json("/api/v1/transcripts", _chat())
    assert response.status_code == 202, response.json()
    for batch_id in IngestBatch.objects.values_list("pk", flat=True):
        batch_process(batch_id=batch_id)


def test_a_rule_on_a_word_of_the_second_instruction_fires_on_the_turns_after_it_only(project, recorded):
    now = timezone.now()
    sessions = simulation_sessions(project=project, start=now - timedelta(days=1), end=now + timedelta(minutes=1))
    assert [turn.message for turn in sessions[0].turns] == [FIRST, FIRST, SECOND, SECOND, THIRD, THIRD]
    document = {"selection": {"mode": "context_rules", "always_on": ["read_file"], "sticky_discovered": False,
                              "groups": {"database": ["run_migrations"]},
                              "context_rules": [{"name": "db", "keywords": ["migrations"], "groups": ["database"]}]}}

    result = policy_simulate(project=project, document=document, sessions=sessions)

    # Turns 0-1 work on the first instruction, 2-3 on the second (the rule's), 4-5 on the third.
    assert [turn.sent_tools for turn in result.turns] == [1, 1, 2, 2, 1, 1]
    assert [(miss.turn, miss.tool) for miss in result.misses] == [(4, "create_pr")]


def test_search_history_links_each_call_to_the_instruction_it_answered(project, recorded):
    tools = search_history_refresh(project=project).tools

    assert tools == {"read_file": [FIRST], "run_migrations": [SECOND], "create_pr": [THIRD]}
