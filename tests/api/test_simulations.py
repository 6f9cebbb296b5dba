"""/api/v1/simulations: start a replay of a policy on recorded sessions, read its progress and
result, reopen it for the same document and selection, cancel it; per project only."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.admin.builders import make_policy, make_tool
from tests.api.conftest import KeyClient
from tests.factories import make_key, make_session, make_tool_call, make_turn
from toolscope.policies.models import Simulation, SimulationStatus
from toolscope.policies.services import simulation_runs
from toolscope.policies.services.simulation_runs import simulation_run

URL = "/api/v1/simulations"
COSTS = {"read_file": 100, "edit_file": 200, "run_tests": 300}


@pytest.fixture
def recorded(project):
    for name, tokens in COSTS.items():
        make_tool(project, name, schema_tokens=tokens)
    policy = make_policy(project)
    policy.mode = "context_rules"
    policy.save()
    policy.always_on.set(policy.project.tools.filter(name="read_file"))
    for n in range(3):
        session = make_session(project, started_at=timezone.now() - timedelta(hours=3 - n))
        turn = make_turn(session, 0, advertised=list(COSTS), task_message="fix it", schema_tokens=600)
        make_tool_call(turn, "read_file")
        make_tool_call(turn, "edit_file")
    return policy


@pytest.fixture
def reader(project):
    return KeyClient(make_key(project, scopes=["policy:read"]).secret)


def start(reader, body, capture) -> tuple[int, dict]:
    with capture(execute=False) as callbacks:
        response = reader.post(URL, body, format="json")
    return response.status_code, response.json() | {"queued": len(callbacks)}


def test_a_simulation_of_the_draft_runs_and_reads_back_hand_computed_figures(
        reader, recorded, django_capture_on_commit_callbacks):
    code, started = start(reader, {"draft": True}, django_capture_on_commit_callbacks)
    assert code == 202 and started["status"] == "pending" and started["queued"] == 1
    assert started["source"] == "draft" and started["result"] is None
    simulation_run(simulation_id=started["id"])
    done = reader.get(f"{URL}/{started['id']}").json()
    assert done["status"] == "done" and done["progress"] == 1.0 and done["sessions_total"] == 3
    result = done["result"]
    # Three sessions of one turn: 600 advertised, read_file (100) sent; edit_file a hard miss.
    assert (result["advertised_tokens"], result["sent_tokens"], result["saved_tokens"]) == (1800, 300, 1500)
    assert (result["calls"], result["misses"], result["hard_misses"], result["miss_rate"]) == (6, 3, 3, 0.5)
    assert result["tools"]["edit_file"] == {"calls": 3, "hard": 3, "recoverable": 0, "output_tokens_saved": 0}
    assert (result["duplicate_tokens_saved"], result["compaction_tokens_saved"]) == (0, 0)
    assert [miss["tool"] for miss in result["miss_list"]] == ["edit_file"] * 3
    assert sum(day["sent_tokens"] for day in result["days"].values()) == 300
    assert [(row["turns"], row["calls"], row["misses"], row["advertised_tokens"], row["sent_tokens"])
            for row in result["session_rows"]] == [(1, 2, 1, 600, 100)] * 3


def test_round_trips_and_net_tokens_are_in_the_result_and_on_the_page(
        reader, recorded, django_capture_on_commit_callbacks, client):
    """A progressive menu recovers every miss: each costs a round trip re-sending the turn's
    context (what the policy sends, plus 2,000 tokens of history when the input is not known)."""
    document = {"selection": {"mode": "progressive", "always_on": ["read_file"]}}
    code, started = start(reader, {"document": document}, django_capture_on_commit_callbacks)
    assert code == 202
    simulation_run(simulation_id=started["id"])
    result = reader.get(f"{URL}/{started['id']}").json()["result"]
    sent_per_turn = result["sent_tokens"] // 3  # read_file and the menu
    assert (result["hard_misses"], result["recoverable_misses"]) == (0, 3)
    assert (result["hard_miss_rate"], result["recoverable_miss_rate"]) == (0.0, 0.5)
    assert result["round_trip_tokens"] == 3 * (sent_per_turn + 2000)
    assert result["net_saved_tokens"] == result["saved_tokens"] - result["round_trip_tokens"]
    assert result["net_saved_share"] == result["net_saved_tokens"] / result["advertised_tokens"]
    from tests.factories import make_user
    from toolscope.telemetry.models import Membership

    user = make_user("viewer-rt")
    Membership.objects.create(user=user, project=recorded.project, role="viewer")
    client.force_login(user)
    html = client.get(f"/p/{recorded.project.slug}/policy/simulations/{started['id']}/").content.decode()
    assert f'data-round-trip-tokens>{result["round_trip_tokens"]:,}<' in html and "data-net-saved" in html


def test_the_same_document_and_selection_reopen_the_same_simulation(
        reader, recorded, django_capture_on_commit_callbacks):
    body = {"draft": True, "start": "2026-01-01T00:00:00Z", "end": "2099-01-01T00:00:00Z"}
    _, first = start(reader, body, django_capture_on_commit_callbacks)
    simulation_run(simulation_id=first["id"])
    code, again = start(reader, body, django_capture_on_commit_callbacks)
    assert code == 200 and again["id"] == first["id"] and again["status"] == "done" and again["queued"] == 0
    code, other = start(reader, {**body, "limit": 1}, django_capture_on_commit_callbacks)
    assert code == 202 and other["id"] != first["id"]


def test_the_run_goes_in_chunks_and_counts_its_progress(
        reader, recorded, django_capture_on_commit_callbacks, monkeypatch):
    monkeypatch.setattr(simulation_runs, "CHUNK_SESSIONS", 2)
    _, started = start(reader, {"draft": True}, django_capture_on_commit_callbacks)
    simulation = simulation_run(simulation_id=started["id"])
    assert (simulation.sessions_done, simulation.sessions_total, simulation.result["turns"]) == (3, 3, 3)


def test_a_cancelled_simulation_is_not_run(reader, recorded, django_capture_on_commit_callbacks):
    _, started = start(reader, {"draft": True}, django_capture_on_commit_callbacks)
    cancelled = reader.delete(f"{URL}/{started['id']}").json()
    assert cancelled["status"] == "cancelled"
    assert simulation_run(simulation_id=started["id"]) is None
    assert Simulation.objects.get(pk=started["id"]).status == SimulationStatus.CANCELLED
    code, restarted = start(reader, {"draft": True}, django_capture_on_commit_callbacks)
    assert code == 202 and restarted["status"] == "pending"  # a cancelled run is started afresh


def test_a_second_delivery_of_the_task_does_nothing(reader, recorded, django_capture_on_commit_callbacks):
    _, started = start(reader, {"draft": True}, django_capture_on_commit_callbacks)
    assert simulation_run(simulation_id=started["id"]) is not None
    assert simulation_run(simulation_id=started["id"]) is None


@pytest.mark.parametrize(("body", "field"), [
    ({"limit": 0}, "limit"),
    ({"start": "yesterday"}, "start"),
])
def test_bad_input_is_a_400_naming_the_field(reader, recorded, body, field):
    response = reader.post(URL, body, format="json")
    assert response.status_code == 400 and response.json()["field"] == field


def test_an_unpublished_label_or_unknown_version_is_a_404(reader, recorded):
    assert reader.post(URL, {}, format="json").status_code == 404  # nothing published under production
    assert reader.post(URL, {"version": 9}, format="json").status_code == 404


def test_another_projects_key_cannot_read_or_cancel_it(reader, recorded, other_project,
                                                         django_capture_on_commit_callbacks):
    _, started = start(reader, {"draft": True}, django_capture_on_commit_callbacks)
    outsider = KeyClient(make_key(other_project, scopes=["policy:read"]).secret)
    assert outsider.get(f"{URL}/{started['id']}").status_code == 404
    assert outsider.delete(f"{URL}/{started['id']}").status_code == 404
    assert Simulation.objects.get(pk=started["id"]).status == SimulationStatus.PENDING


def test_an_ingest_only_key_is_refused(project, recorded):
    ingest = KeyClient(make_key(project, scopes=["ingest"]).secret)
    assert ingest.post(URL, {"draft": True}, format="json").status_code == 403


def test_the_first_given_of_document_version_draft_label_is_replayed(reader, recorded,
                                                                      django_capture_on_commit_callbacks):
    _, uploaded = start(reader, {"document": {"selection": {"mode": "all"}}, "version": 7, "draft": True},
                        django_capture_on_commit_callbacks)
    assert uploaded["source"] == "uploaded"
    _, draft = start(reader, {"draft": True, "label": "staging", "agent_name": "", "model": ""},
                     django_capture_on_commit_callbacks)
    assert draft["source"] == "draft" and draft["selection"]["agent_name"] == ""
