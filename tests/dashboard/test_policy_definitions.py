"""Issue 28, item 4: one agent's data never changes another's figures. Two agents advertise
`read_file` with different schemas; the draft page and the Test page count the same definition
of each tool, say whose, and count an agent's own when it is picked."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.factories import make_key
from toolscope.telemetry.models import Turn
from toolscope.telemetry.services.ingest import ingest_events
from toolscope.telemetry.services.processing import batch_process

LONG = {"name": "read_file", "description": "Read a file of the repository, whole or a range of its lines, "
        "with line numbers, as text; binary files are refused.", "input_schema": {
            "type": "object", "properties": {
                "path": {"type": "string", "description": "Path relative to the repository root."},
                "start_line": {"type": "integer", "description": "First line to read, 1-based."},
                "end_line": {"type": "integer", "description": "Last line to read, inclusive."}},
            "required": ["path"]}}
SHORT = {"name": "read_file", "description": "Read a file.",
         "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}
BASH = {"name": "bash", "description": "Run a shell command.",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}


def _agent(project, agent: str, tools: list[dict], at: str) -> None:
    outcome = ingest_events(api_key=make_key(project).api_key, raw_events=[
        {"type": "session", "id": f"{agent}-s", "session_id": f"{agent}-s", "action": "start", "agent_name": agent,
         "timestamp": at},
        {"type": "turn", "id": f"{agent}-t0", "session_id": f"{agent}-s", "index": 0, "timestamp": at,
         "tools": tools, "task_message": "Read the README"}])
    assert outcome.counts["rejected"] == 0, outcome.results
    batch_process(batch_id=outcome.batch_id)


@pytest.fixture
def two_agents(project):
    _agent(project, "coder", [LONG, BASH], "2026-11-20T09:00:00Z")
    _agent(project, "reviewer", [SHORT], "2026-11-20T10:00:00Z")  # seen last
    return project


def _draft_tokens(client, project, **params) -> tuple[dict[str, int], str]:
    page = client.get(reverse("dashboard:policy", args=[project.slug]), params)
    assert page.status_code == 200
    rows = {row["name"]: row["tokens"] for row in page.context["tool_rows"]}
    return rows, page.content.decode()


def _test_tokens(client, project, **params) -> tuple[dict[str, int], str]:
    page = client.get(reverse("dashboard:policy_test", args=[project.slug]), {"message": "read the README", **params})
    assert page.status_code == 200
    return {tool.name: tool.tokens for tool in page.context["result"].tools}, page.content.decode()


def test_each_agents_turns_count_its_own_definition(two_agents):
    coder, reviewer = (Turn.objects.get(session__agent_name=agent) for agent in ("coder", "reviewer"))
    assert coder.schema_tokens > reviewer.schema_tokens > 0


def test_the_draft_and_test_pages_count_the_same_definitions_and_say_whose(viewer_client, two_agents):
    draft, draft_html = _draft_tokens(viewer_client, two_agents)
    tested, test_html = _test_tokens(viewer_client, two_agents)  # no policy: every tool is sent
    assert draft == tested and set(draft) == {"read_file", "bash"}
    short = Turn.objects.get(session__agent_name="reviewer").schema_tokens
    assert draft["read_file"] == short  # the most recently seen definition
    for html in (draft_html, test_html):
        assert "the most recently seen definition of each tool (any agent&#x27;s)" in html
        assert re.search(r"1 tool had more than one definition \(read_file\)", html)


def test_picking_an_agent_counts_its_own_definitions_on_both_pages(viewer_client, two_agents):
    draft, draft_html = _draft_tokens(viewer_client, two_agents, agent="coder")
    tested, test_html = _test_tokens(viewer_client, two_agents, agent="coder")
    assert draft == tested
    coder = Turn.objects.get(session__agent_name="coder").schema_tokens
    assert draft["read_file"] + draft["bash"] == coder  # the turn's schema is its own definitions
    assert draft["read_file"] > _draft_tokens(viewer_client, two_agents, agent="reviewer")[0]["read_file"]
    for html in (draft_html, test_html):
        assert "coder&#x27;s last advertised set for 2 tools" in html
        assert '<option value="coder" selected>' in html


def test_an_unknown_agent_counts_as_none_picked(viewer_client, two_agents):
    assert _draft_tokens(viewer_client, two_agents, agent="nobody")[0] == _draft_tokens(viewer_client, two_agents)[0]


def test_a_reference_to_a_replaced_definition_is_that_definition(two_agents):
    """The catalog's read_file is the reviewer's now; the coder's {name, schema_hash} reference
    (as agents and /policy/resolve send them) still means the coder's own, from ToolVersion."""
    from toolscope_agent.engine.schemas import schema_hash

    from toolscope.policies.selectors import tool_catalog

    reference = {"name": "read_file", "schema_hash": schema_hash(LONG["name"], LONG["description"],
                                                                 LONG["input_schema"])}
    (chosen,) = tool_catalog(project=two_agents, advertised=[reference])
    assert (chosen["description"], chosen["input_schema"]) == (LONG["description"], LONG["input_schema"])
    (current,) = tool_catalog(project=two_agents, advertised=[{"name": "read_file"}])
    assert current["description"] == SHORT["description"]
