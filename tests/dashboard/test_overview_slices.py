"""The overview filtered by agent and model (issue 28, item 6), from events processed for real:
two agents, two models, one session whose agent is named after its turns and calls arrived."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.urls import reverse

from tests.dashboard.builders import recent
from tests.factories import make_key
from toolscope.telemetry.models import IngestBatch, ProjectHourly
from toolscope.telemetry.services.ingest import ingest_events
from toolscope.telemetry.services.processing import batch_process

TOOLS = [{"name": name, "description": f"The {name} tool", "input_schema": {"type": "object", "properties": {}}}
         for name in ("read_file", "bash")]


def process(project, events):
    outcome = ingest_events(api_key=make_key(project).api_key, raw_events=events)
    assert outcome.counts["rejected"] == 0, outcome.results
    batch_process(batch_id=outcome.batch_id)
    assert IngestBatch.objects.get(pk=outcome.batch_id).status == "done"


def session(sid, *, agent, model, calls, tool="read_file", start=None):
    at = start or recent(3)
    events = [{"type": "session", "id": sid, "timestamp": at.isoformat(), "model": model,
               **({"agent_name": agent} if agent else {})}]
    for index in range(2):
        events.append({"type": "turn", "id": f"{sid}:t{index}", "session_id": sid, "index": index, "model": model,
                       "timestamp": (at + timedelta(seconds=index)).isoformat(), "tools": TOOLS,
                       "messages": [{"role": "user", "content": "go"}],
                       "usage": {"input_tokens": 1000, "output_tokens": 10}})
    for n in range(calls):
        events.append({"type": "tool_call", "id": f"{sid}:c{n}", "session_id": sid, "turn_index": n % 2,
                       "tool_name": tool, "arguments": {}, "output": "x" * 40, "duration_ms": 100 + n,
                       "timestamp": (at + timedelta(seconds=2 + n)).isoformat(),
                       "status": "error" if n == 0 else "ok"})
    return events


@pytest.fixture
def two_agents(project):
    process(project, session("a1", agent="coder", model="gpt-4o", calls=3))
    process(project, session("a2", agent="coder", model="claude-sonnet-4-5", calls=1, tool="bash"))
    # The reviewer's session: calls and turns first, its agent named by a later session event.
    events = session("b1", agent="", model="gpt-4o", calls=5, tool="bash")
    process(project, events[1:])
    process(project, [{**events[0], "id": "b1", "agent_name": "reviewer"}])
    return project


def overview(client, project, **params):
    response = client.get(reverse("dashboard:overview", args=[project.slug]), params)
    assert response.status_code == 200
    return response


def text(response) -> str:
    return b"".join(response.streaming_content).decode()


def kpis(response):
    return {kpi.key: kpi.current for kpi in response.context["kpis"]}


@pytest.mark.django_db
def test_the_overview_filters_by_agent_model_or_both(viewer_client, two_agents):
    everything = kpis(overview(viewer_client, two_agents))
    assert (everything["sessions"], everything["turns"], everything["tool_calls"]) == (3, 6, 9)
    coder = kpis(overview(viewer_client, two_agents, agent="coder"))
    assert (coder["sessions"], coder["turns"], coder["tool_calls"], coder["error_rate"]) == (2, 4, 4, 2 / 4)
    reviewer = kpis(overview(viewer_client, two_agents, agent="reviewer"))
    # Named after its rows were counted: they moved to its slice, nothing left unnamed.
    assert (reviewer["sessions"], reviewer["turns"], reviewer["tool_calls"]) == (1, 2, 5)
    assert not ProjectHourly.objects.filter(project=two_agents, agent_name="").exists()
    gpt = kpis(overview(viewer_client, two_agents, model="gpt-4o"))
    assert (gpt["sessions"], gpt["turns"], gpt["tool_calls"]) == (2, 4, 8)
    both = kpis(overview(viewer_client, two_agents, agent="coder", model="claude-sonnet-4-5"))
    assert (both["sessions"], both["turns"], both["tool_calls"], both["provider_input_tokens"]) == (1, 2, 1, 2000)
    for key in ("sessions", "turns", "tool_calls", "provider_input_tokens"):
        assert coder[key] + reviewer[key] == everything[key], key


@pytest.mark.django_db
def test_tool_panels_and_durations_follow_the_filter(viewer_client, two_agents):
    context = overview(viewer_client, two_agents, agent="reviewer").context
    assert [(row["name"], row["calls"]) for row in context["by_calls"]] == [("bash", 5)]
    # read_file was advertised to the reviewer and never called: its dead weight, not the coder's.
    assert [row["name"] for row in context["dead"]] == ["read_file"]
    coder = {row["name"]: row for row in overview(viewer_client, two_agents, agent="coder").context["by_calls"]}
    assert (coder["read_file"]["calls"], coder["bash"]["calls"]) == (3, 1)
    assert coder["bash"]["p50_ms"] == pytest.approx(100, rel=0.02)  # the coder's one bash call, not the reviewer's


@pytest.mark.django_db
def test_the_filter_offers_the_ranges_agents_and_models_and_csvs_keep_it(viewer_client, two_agents):
    response = overview(viewer_client, two_agents, agent="coder")
    assert response.context["choices"] == {"agents": ["coder", "reviewer"],
                                           "models": ["claude-sonnet-4-5", "gpt-4o"]}
    html = response.content.decode()
    assert "Showing agent <strong>coder</strong> only" in html
    for name in ("kpis.csv", "tokens.csv", "dead-weight.csv", "top-tools.csv"):
        assert f"/p/acme/{name}?range=7d&amp;agent=coder" in html, name
    body = viewer_client.get(reverse("dashboard:kpis_csv", args=[two_agents.slug]), {"agent": "coder"})
    rows = {row["key"]: row for row in csv.DictReader(io.StringIO(text(body)))}
    assert rows["sessions"]["current"] == "2"
    tokens = text(viewer_client.get(reverse("dashboard:tokens_csv", args=[two_agents.slug]),
                                    {"agent": "coder", "model": "gpt-4o"}))
    assert sum(int(row["provider_input_tokens"]) for row in csv.DictReader(io.StringIO(tokens))) == 2000


@pytest.mark.django_db
def test_an_agent_without_data_in_the_range_reads_zero_and_stays_picked(viewer_client, two_agents):
    response = overview(viewer_client, two_agents, agent="nobody")
    assert kpis(response)["sessions"] == 0
    assert "nobody" in response.context["choices"]["agents"]
