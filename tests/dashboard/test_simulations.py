"""The simulation pages: start a replay of the draft, follow its progress, read its figures, the
misses linked to their session and turn, the per-tool CSV; roles and tenancy as everywhere."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.admin.builders import make_policy, make_tool
from tests.factories import make_session, make_tool_call, make_turn
from toolscope.policies.models import Simulation
from toolscope.policies.services.simulation_runs import simulation_run

COSTS = {"read_file": 100, "edit_file": 200, "run_tests": 300}


@pytest.fixture
def recorded(project):
    tools = {name: make_tool(project, name, schema_tokens=tokens) for name, tokens in COSTS.items()}
    policy = make_policy(project, always_on=[tools["read_file"]])
    policy.mode = "context_rules"
    policy.save()
    for n in range(2):
        session = make_session(project, client_id=f"sess-{n}", started_at=timezone.now() - timedelta(hours=2 - n))
        turn = make_turn(session, 0, advertised=list(COSTS), task_message="fix it", schema_tokens=600)
        make_tool_call(turn, "read_file")
        make_tool_call(turn, "edit_file")
    return policy


def url(project, name: str, *args) -> str:
    return reverse(f"dashboard:{name}", args=[project.slug, *args])


def simulate_draft(client, project, capture) -> Simulation:
    with capture(execute=False):
        response = client.post(url(project, "policy_simulations"), {"policy": "draft", "days": 7, "limit": 100})
    simulation = Simulation.objects.get(project=project)
    assert response.status_code == 302 and response["Location"] == url(project, "policy_simulation", simulation.pk)
    return simulation


def test_an_editor_simulates_the_draft_and_reads_its_figures(editor_client, project, recorded,
                                                             django_capture_on_commit_callbacks):
    simulation = simulate_draft(editor_client, project, django_capture_on_commit_callbacks)
    running = editor_client.get(url(project, "policy_simulation", simulation.pk))
    assert b"data-progress" in running.content and b"Cancel" in running.content
    assert editor_client.get(url(project, "policy_simulation_status", simulation.pk)).json() == {
        "status": "pending", "progress": 0.0, "done": 0, "total": 0, "sessions_done": 0, "sessions_total": 0,
        "eta_seconds": None, "queued_behind": 0}
    simulation_run(simulation_id=simulation.pk)
    page = editor_client.get(url(project, "policy_simulation", simulation.pk))
    content = page.content.decode()
    # Two sessions of one turn: 1,200 advertised, 200 sent (read_file); edit_file missed twice.
    assert page.context["result"]["saved_tokens"] == 1000 and page.context["result"]["hard_misses"] == 2
    assert "83.3%" in content and "50.0%" in content
    assert f'{url(project, "session", "sess-0")}#turn-0' in content
    assert set(page.context["charts"]) == {"days", "misses"}
    assert [row["session"] for row in page.context["worst_sessions"]] == ["sess-0", "sess-1"]
    sessions_csv = b"".join(editor_client.get(url(project, "policy_simulation_sessions_csv", simulation.pk))
                            .streaming_content).decode().splitlines()
    assert sessions_csv == ["session,turns,calls,misses,advertised_tokens,sent_tokens", "sess-0,1,2,1,600,100",
                            "sess-1,1,2,1,600,100"]
    turns_csv = b"".join(editor_client.get(url(project, "policy_simulation_turns_csv", simulation.pk))
                         .streaming_content).decode().splitlines()
    assert turns_csv == ["session,turn,calls,misses,advertised_tokens,sent_tokens,sent_tools",
                         "sess-0,0,2,1,600,100,1", "sess-1,0,2,1,600,100,1"]
    csv = b"".join(editor_client.get(url(project, "policy_simulation_csv", simulation.pk)).streaming_content)
    assert csv.decode().splitlines() == ["tool,calls,hard,recoverable,output_tokens_saved", "edit_file,2,2,0,0",
                                         "read_file,2,0,0,0"]


def test_a_simulation_waiting_for_its_turn_says_how_many_runs_are_ahead(
        editor_client, project, recorded, django_capture_on_commit_callbacks):
    # Issue 24, item 6: a project runs SIMULATIONS_PER_PROJECT at once; the others wait, visibly.
    ahead = simulate_draft(editor_client, project, django_capture_on_commit_callbacks)
    Simulation.objects.filter(pk=ahead.pk).update(status="running", started_at=timezone.now())
    with django_capture_on_commit_callbacks(execute=False):
        editor_client.post(url(project, "policy_simulations"), {"policy": "draft", "days": 14, "limit": 100})
    waiting = Simulation.objects.exclude(pk=ahead.pk).get(project=project)
    page = editor_client.get(url(project, "policy_simulation", waiting.pk)).content.decode()
    assert "Waiting for its turn" in page and "Queued behind 1 run of this project" in page
    assert editor_client.get(url(project, "policy_simulation_status", waiting.pk)).json()["queued_behind"] == 1
    running = editor_client.get(url(project, "policy_simulation", ahead.pk)).content.decode()
    assert "Replaying" in running and "Queued" not in running
    assert editor_client.get(url(project, "policy_simulation_status", ahead.pk)).json()["queued_behind"] is None


def test_simulating_again_reopens_the_same_simulation(editor_client, project, recorded,
                                                      django_capture_on_commit_callbacks):
    first = simulate_draft(editor_client, project, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=False) as queued:
        again = editor_client.post(url(project, "policy_simulations"), {"policy": "draft", "days": 7, "limit": 100})
    assert again["Location"] == url(project, "policy_simulation", first.pk) and queued == []


def test_viewers_read_but_do_not_start_or_cancel(viewer_client, editor_client, project, recorded,
                                                  django_capture_on_commit_callbacks):
    page = viewer_client.get(url(project, "policy_simulations"))
    assert page.status_code == 200 and b"data-simulate" not in page.content
    assert viewer_client.post(url(project, "policy_simulations"), {"policy": "draft", "days": 7,
                                                                    "limit": 10}).status_code == 403
    simulation = simulate_draft(editor_client, project, django_capture_on_commit_callbacks)
    assert viewer_client.post(url(project, "policy_simulation_cancel", simulation.pk)).status_code == 403
    assert editor_client.post(url(project, "policy_simulation_cancel", simulation.pk)).status_code == 302
    assert Simulation.objects.get(pk=simulation.pk).status == "cancelled"


def test_production_without_a_published_version_says_so(editor_client, project, recorded):
    page = editor_client.post(url(project, "policy_simulations"), {"policy": "production", "days": 7, "limit": 10})
    assert page.status_code == 200 and b"No policy version carries the label" in page.content


def test_an_outsider_gets_404_everywhere(outsider_client, editor_client, project, recorded,
                                         django_capture_on_commit_callbacks):
    simulation = simulate_draft(editor_client, project, django_capture_on_commit_callbacks)
    for name in ("policy_simulation", "policy_simulation_status", "policy_simulation_csv"):
        assert outsider_client.get(url(project, name, simulation.pk)).status_code == 404
    assert outsider_client.get(url(project, "policy_simulations")).status_code == 404


def test_the_publish_page_shows_the_drafts_simulation_beside_productions(
        admin_client, editor_client, project, recorded, owner, django_capture_on_commit_callbacks):
    from toolscope.policies.services.publish import policy_publish

    page = admin_client.get(url(project, "policy_publish"))
    assert b"Not simulated yet" in page.content
    simulation = simulate_draft(editor_client, project, django_capture_on_commit_callbacks)
    simulation_run(simulation_id=simulation.pk)
    with django_capture_on_commit_callbacks(execute=True):
        policy_publish(policy=recorded, user=owner, label="production")  # the same document as the draft
    content = admin_client.get(url(project, "policy_publish")).content.decode()
    line = ("Saves <strong>83.3%</strong> of schema tokens, misses <strong>50.0%</strong> of calls: 2 hard misses, "
            f'<a href="{url(project, "policy_simulation", simulation.pk)}">see them</a>')
    assert content.count(line) == 2  # the draft, and v1 (production) published from it
    assert "v1 (production)" in content


def test_the_turns_csv_has_every_turn_or_those_with_a_miss(editor_client, project, recorded,
                                                          django_capture_on_commit_callbacks):
    # sess-1 goes on: edit_file, called (and missed) on turn 0, is sent on turn 1 (sticky).
    session = project.sessions.get(client_id="sess-1")
    make_tool_call(make_turn(session, 1, advertised=list(COSTS), task_message="", schema_tokens=600), "edit_file")
    simulation = simulate_draft(editor_client, project, django_capture_on_commit_callbacks)
    simulation_run(simulation_id=simulation.pk)

    def csv(**params) -> list[str]:
        response = editor_client.get(url(project, "policy_simulation_turns_csv", simulation.pk), params)
        return b"".join(response.streaming_content).decode().splitlines()

    assert csv() == ["session,turn,calls,misses,advertised_tokens,sent_tokens,sent_tools", "sess-0,0,2,1,600,100,1",
                     "sess-1,0,2,1,600,100,1", "sess-1,1,1,0,600,300,2"]
    assert csv(misses="1") == csv()[:3]
    page = editor_client.get(url(project, "policy_simulation", simulation.pk))
    assert page.context["result"]["turn_rows_stored"] == 3 and not page.context["result"]["turn_rows_truncated"]
    assert b"Every turn (CSV)" in page.content


def test_a_policy_that_churns_the_tool_list_is_shown_losing_dollars(editor_client, project,
                                                                    django_capture_on_commit_callbacks):
    """Sessions of claude-sonnet-4-5 whose requests each name another tool: rules sending only
    that tool save most schema tokens, but every request heads a new prefix, so the whole
    conversation is written again each time (1.25x input) instead of read (0.1x): the page says
    it costs more."""
    names = [f"tool_{n}" for n in range(10)]
    tools = {name: make_tool(project, name, schema_tokens=100) for name in names}
    policy = make_policy(project)
    policy.mode = "context_rules"
    policy.sticky_discovered = False
    policy.save()
    from toolscope.policies.models import ContextRule, ToolGroup

    for n, name in enumerate(names[:3]):
        group = ToolGroup.objects.create(policy=policy, name=f"g{n}")
        group.tools.set([tools[name]])
        rule = ContextRule.objects.create(policy=policy, position=n, name=f"r{n}", keywords=[f"word{n}"])
        rule.groups.set([group])
    for s in range(2):
        session = make_session(project, client_id=f"churn-{s}", started_at=timezone.now() - timedelta(hours=2 - s))
        for n in range(3):
            make_turn(session, n, advertised=names, task_message=f"word{n}", schema_tokens=1000,
                      estimated_input_tokens=3000 + 500 * n, model="claude-sonnet-4-5",
                      started_at=session.started_at + timedelta(seconds=30 * n))
    simulation = simulate_draft(editor_client, project, django_capture_on_commit_callbacks)
    simulation_run(simulation_id=simulation.pk)
    page = editor_client.get(url(project, "policy_simulation", simulation.pk))
    dollars = page.context["result"]["dollars"]
    assert page.context["result"]["saved_share"] == pytest.approx(0.9)
    assert dollars["priced_sessions"] == 2 and dollars["cache_breaks"] == 4 and dollars["recorded_cache_breaks"] == 0
    # As recorded: 3,000 written, then 3,000 read + 500 written, 3,500 read + 500 written; under the
    # rules: 2,100, 2,600 and 3,100 written. Per session, per million tokens.
    recorded = (3000 * 3.75 + 3000 * 0.30 + 500 * 3.75 + 3500 * 0.30 + 500 * 3.75) / 1e6
    assert dollars["recorded"] == pytest.approx(2 * recorded)
    assert dollars["policy"] == pytest.approx(2 * (2100 + 2600 + 3100) * 3.75 / 1e6)
    assert b"data-dollars-lost" in page.content and b"more than sending what was sent" in page.content
