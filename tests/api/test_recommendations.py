"""/api/v1/recommendations (issue 25, item 5): start the recommendations of a time range in a
worker (the dashboard's service and fairness), read their progress and candidates, reopen them
for the same request, apply a candidate to the draft as the dashboard does; per project only."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.api.conftest import KeyClient
from tests.dashboard.test_recommendations import record_sessions
from tests.factories import make_key
from toolscope.policies.models import PolicyAuditEntry, Recommendation, SimulationStatus
from toolscope.policies.services.recommendations import recommendation_run

URL = "/api/v1/recommendations"
BEST = "always-on top 2 + 1 rules"


@pytest.fixture
def recorded(project):
    return record_sessions(project)


@pytest.fixture
def reader(project):
    return KeyClient(make_key(project, scopes=["policy:read"]).secret)


@pytest.fixture
def admin(project):
    return KeyClient(make_key(project, scopes=["admin"]).secret)


WINDOW = {"start": (timezone.now() - timedelta(days=7)).isoformat(), "end": "2099-01-01T00:00:00Z", "limit": 100}


def start(client, body, capture) -> tuple[int, dict]:
    with capture(execute=False) as callbacks:
        response = client.post(URL, body, format="json")
    return response.status_code, response.json() | {"queued": len(callbacks)}


def computed(client, capture, body=WINDOW) -> dict:
    code, started = start(client, body, capture)
    assert code == 202 and started["queued"] == 1
    recommendation_run(recommendation_id=started["id"])
    return client.get(f"{URL}/{started['id']}").json()


def test_a_run_starts_shows_its_progress_and_is_reopened(reader, recorded, django_capture_on_commit_callbacks):
    code, started = start(reader, WINDOW, django_capture_on_commit_callbacks)
    assert code == 202 and started["status"] == "pending" and started["queued"] == 1
    assert started["selection"]["limit"] == 100 and started["selection"]["agent_name"] == ""
    pending = reader.get(f"{URL}/{started['id']}").json()
    assert (pending["status"], pending["progress"], pending["queued_behind"], pending["result"]) == (
        "pending", 0.0, 0, None)
    assert (pending["candidates_done"], pending["candidates_total"]) == (0, 0)
    code, again = start(reader, WINDOW, django_capture_on_commit_callbacks)
    assert code == 200 and again["id"] == started["id"] and again["queued"] == 0
    code, other = start(reader, {**WINDOW, "limit": 50}, django_capture_on_commit_callbacks)
    assert code == 202 and other["id"] != started["id"]
    # The project's fairness, as for the dashboard's runs: the second waits behind the first.
    assert reader.get(f"{URL}/{other['id']}").json()["queued_behind"] == 1
    assert Recommendation.objects.get(pk=started["id"]).days == 0


def test_a_done_run_has_its_candidates_figures_and_recommended_document(
        reader, recorded, django_capture_on_commit_callbacks):
    done = computed(reader, django_capture_on_commit_callbacks)
    assert done["status"] == "done" and done["progress"] == 1.0 and done["queued_behind"] is None
    result = done["result"]
    assert (result["sessions"], result["fit"], result["held_out"], result["scored"]) == (24, 12, 12, 12)
    assert result["recommended"] == BEST and BEST in result["front"]
    best = next(row for row in result["candidates"] if row["name"] == BEST)
    # As on the dashboard (tests/dashboard/test_recommendations.py): 12 x 800 advertised held out.
    assert (best["schema_tokens_saved"], best["round_trip_tokens"], best["net_saved_tokens"]) == (6000, 0, 6000)
    assert (best["hard_miss_rate"], best["recoverable_miss_rate"]) == (0.0, 0.0)
    search = next(row for row in result["candidates"] if row["name"] == "tool_search + top 2")
    # Its search answers its top 8 whatever the scores: the 7 other tools, so every miss is found,
    # one search (one round trip) for each of the 4 sessions that miss, its answer loaded whole.
    assert search["hard_miss_rate"] == 0.0 and search["round_trip_tokens"] == 4 * 2300
    assert result["recommended_document"] == {"selection": best["selection"], "outputs": best["outputs"]}
    assert result["recommended_document"]["selection"]["mode"] == "context_rules"


def test_the_agent_and_model_select_the_sessions(reader, recorded, django_capture_on_commit_callbacks):
    done = computed(reader, django_capture_on_commit_callbacks, {**WINDOW, "agent_name": "nobody"})
    assert done["selection"]["agent_name"] == "nobody"
    assert done["result"]["sessions"] == 0 and done["result"]["recommended"] is None


@pytest.mark.parametrize("candidate", [BEST, "index"])
def test_applying_a_candidate_changes_the_draft_as_the_dashboard_does(
        reader, admin, project, recorded, django_capture_on_commit_callbacks, candidate):
    done = computed(reader, django_capture_on_commit_callbacks)
    if candidate == "index":
        candidate = [row["name"] for row in done["result"]["candidates"]].index(BEST)
    recorded.hint_prefix, recorded.search_top_k = "#", 7  # not a candidate's to decide: kept
    recorded.save()
    response = admin.post(f"{URL}/{done['id']}/apply", {"candidate": candidate, "outputs": "replace"}, format="json")
    assert response.status_code == 200, response.json()
    document = response.json()
    recorded.refresh_from_db()
    assert recorded.mode == "context_rules"
    assert sorted(recorded.always_on.values_list("name", flat=True)) == ["edit_file", "read_file"]
    group = recorded.groups.get()
    assert sorted(group.tools.values_list("name", flat=True)) == ["git_commit", "git_diff", "git_status"]
    rule = recorded.context_rules.get()
    assert rule.keywords == ["commit"] and list(rule.groups.all()) == [group]
    assert list(recorded.compaction_rules.values_list("tools", "max_tokens")) == [("edit_file", 2000)]
    assert PolicyAuditEntry.objects.filter(project=project, action="draft_changed").count() == 1
    assert (recorded.hint_prefix, recorded.search_top_k) == ("#", 7)
    assert document["selection"]["mode"] == "context_rules"
    assert sorted(document["selection"]["always_on"]) == ["edit_file", "read_file"]


def test_applying_needs_the_admin_scope_a_done_run_and_a_known_candidate(
        reader, admin, recorded, django_capture_on_commit_callbacks):
    _, started = start(reader, WINDOW, django_capture_on_commit_callbacks)
    apply = f"{URL}/{started['id']}/apply"
    assert admin.post(apply, {"candidate": BEST}, format="json").status_code == 409  # not done yet
    recommendation_run(recommendation_id=started["id"])
    assert reader.post(apply, {"candidate": BEST}, format="json").status_code == 403
    unknown = admin.post(apply, {"candidate": "no such candidate"}, format="json")
    assert unknown.status_code == 404 and "no such candidate" in unknown.json()["detail"]
    assert admin.post(apply, {"candidate": 999}, format="json").status_code == 404
    for bad in ({}, {"candidate": True}, {"candidate": -1}, {"candidate": ""}, {"candidate": None}):
        response = admin.post(apply, bad, format="json")
        assert response.status_code == 400 and response.json()["field"] == "candidate", bad
    assert PolicyAuditEntry.objects.filter(action="draft_changed").count() == 0


@pytest.mark.parametrize(("body", "field"), [
    ({"limit": 10}, "limit"),
    ({"limit": 5001}, "limit"),
    ({"start": "yesterday"}, "start"),
    ({"agent_name": 3}, "agent_name"),
    ({"retry": "yes"}, "retry"),
])
def test_bad_input_is_a_400_naming_the_field(reader, recorded, body, field):
    response = reader.post(URL, body, format="json")
    assert response.status_code == 400 and response.json()["field"] == field
    assert not Recommendation.objects.exists()


def test_a_failed_run_is_reopened_unless_retried(reader, recorded, django_capture_on_commit_callbacks):
    _, started = start(reader, WINDOW, django_capture_on_commit_callbacks)
    Recommendation.objects.filter(pk=started["id"]).update(status=SimulationStatus.FAILED, error="MemoryError")
    code, again = start(reader, WINDOW, django_capture_on_commit_callbacks)
    assert code == 200 and again["id"] == started["id"] and again["error"] == "MemoryError"
    code, retried = start(reader, {**WINDOW, "retry": True}, django_capture_on_commit_callbacks)
    assert code == 202 and retried["id"] != started["id"] and retried["queued"] == 1


def test_another_projects_key_cannot_read_or_apply_it(reader, recorded, other_project,
                                                      django_capture_on_commit_callbacks):
    done = computed(reader, django_capture_on_commit_callbacks)
    other = KeyClient(make_key(other_project, scopes=["admin"]).secret)
    assert other.get(f"{URL}/{done['id']}").status_code == 404
    assert other.post(f"{URL}/{done['id']}/apply", {"candidate": BEST}, format="json").status_code == 404
    assert reader.get(f"{URL}/{done['id'] + 1000}").status_code == 404
    assert KeyClient(make_key(other_project, scopes=["ingest"]).secret).post(URL, WINDOW, format="json"
                                                                             ).status_code == 403


def test_the_answers_are_the_documented_ones(client, reader, admin, recorded, django_capture_on_commit_callbacks):
    from tests.api.test_openapi import assert_documented

    schema = client.get("/api/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    with django_capture_on_commit_callbacks(execute=False):
        started = reader.post(URL, WINDOW, format="json")
    assert_documented(schema, "/api/v1/recommendations", "post", started)
    run = f"{URL}/{started.json()['id']}"
    assert_documented(schema, "/api/v1/recommendations/{recommendation_id}", "get", reader.get(run))
    assert_documented(schema, "/api/v1/recommendations/{recommendation_id}/apply", "post",
                      admin.post(f"{run}/apply", {"candidate": BEST}, format="json"))
    recommendation_run(recommendation_id=started.json()["id"])
    assert_documented(schema, "/api/v1/recommendations/{recommendation_id}", "get", reader.get(run))
    assert_documented(schema, "/api/v1/recommendations/{recommendation_id}/apply", "post",
                      admin.post(f"{run}/apply", {"candidate": 0}, format="json"))
    assert_documented(schema, "/api/v1/recommendations", "post", reader.post(URL, {"limit": 1}, format="json"))


def test_a_run_stored_before_families_and_refits_still_reads(reader, recorded, django_capture_on_commit_callbacks):
    done = computed(reader, django_capture_on_commit_callbacks)
    run = Recommendation.objects.get(pk=done["id"])
    for row in run.result["candidates"]:
        del row["family"], row["refit"]
    run.save(update_fields=["result"])
    response = reader.get(f"{URL}/{done['id']}")
    assert response.status_code == 200
    rows = response.json()["result"]["candidates"]
    assert all(row["family"] == row["name"] and row["refit"] is False for row in rows)


def test_priced_sessions_give_every_candidate_its_dollars_and_a_native_candidate_applies(
        reader, admin, project, django_capture_on_commit_callbacks):
    """A 32-tool catalog (toolscope's search joins the candidates) and sessions of
    claude-sonnet-4-5 with their times: every candidate is priced under the provider's cache, and
    the provider's own deferred loading, applied, turns `provider_search` on in the draft."""
    from tests.admin.builders import make_policy, make_tool
    from tests.factories import make_session, make_tool_call, make_turn

    names = [f"tool_{n:02d}" for n in range(32)]
    tools = [make_tool(project, name, schema_tokens=150, description=f"Can {name} things.") for name in names]
    policy = make_policy(project, always_on=tools)
    begin = timezone.now() - timedelta(days=2)
    for n in range(24):
        session = make_session(project, started_at=begin + timedelta(minutes=10 * n))
        for k in range(3):
            name = names[(n + k) % 32]
            turn = make_turn(session, k, advertised=names, task_message=f"please {name} it", schema_tokens=4800,
                             estimated_input_tokens=4800 + 2000 + 400 * k, model="claude-sonnet-4-5",
                             started_at=session.started_at + timedelta(seconds=30 * k))
            make_tool_call(turn, name, output_tokens=200)
    done = computed(reader, django_capture_on_commit_callbacks)
    rows = {row["name"]: row for row in done["result"]["candidates"]}
    assert all(row["priced_sessions"] > 0 and row["recorded_dollars"] > 0 for row in rows.values())
    native = next(name for name in rows if name.startswith("provider's deferred loading + top 0"))
    assert rows[native]["cache_breaks"] == 0
    response = admin.post(f"{URL}/{done['id']}/apply", {"candidate": native}, format="json")
    assert response.status_code == 200, response.json()
    policy.refresh_from_db()
    assert policy.provider_search and policy.mode == "tool_search"
    assert response.json()["selection"]["tool_search"]["provider_search"] is True
    assert not policy.search_defer_loading and "defer_loading" not in response.json()["selection"]["tool_search"]
    # Deferred loading with toolscope's search: applied, the draft defers and searches as scored,
    # and /policy/resolve renders the catalog deferred behind toolscope's search tool.
    deferred = "deferred loading + top 0, toolscope's search top 20"
    assert rows[deferred]["cache_breaks"] == 0
    response = admin.post(f"{URL}/{done['id']}/apply", {"candidate": deferred}, format="json")
    assert response.status_code == 200, response.json()
    policy.refresh_from_db()
    assert policy.search_defer_loading and not policy.provider_search and policy.search_top_k == 20
    assert response.json()["selection"]["tool_search"]["defer_loading"] is True


def test_the_recommended_policy_is_shown_beside_every_tool_the_published_one_and_native_deferral(
        reader, project, django_capture_on_commit_callbacks):
    """Issue 26's Goal, on the page and in the API: the same held-out sessions, priced, under the
    recommended policy and the three alternatives a user would otherwise run."""
    from django.test import Client
    from django.urls import reverse

    from tests.admin.builders import make_policy, make_tool
    from tests.factories import make_member, make_session, make_tool_call, make_turn, make_user
    from toolscope.policies.services.publish import policy_publish
    from toolscope.telemetry.models import Role

    words = ["invoice", "ledger", "payroll", "refund", "shipment", "warehouse", "parcel", "courier", "tariff",
             "customs", "voucher", "coupon", "playlist", "podcast", "lyric", "concert", "ticket", "seating",
             "weather", "forecast", "pollen", "humidity", "recipe", "pantry", "calorie", "workout", "marathon",
             "stadium", "telescope", "galaxy", "orbit", "satellite"]
    names = [f"{word}_tool" for word in words]
    tools = [make_tool(project, name, schema_tokens=150, description=f"Works with a {word}.")
             for name, word in zip(names, words, strict=True)]
    policy_publish(policy=make_policy(project, always_on=tools), user=make_user("publisher"))
    begin = timezone.now() - timedelta(days=2)
    for n in range(24):
        session = make_session(project, started_at=begin + timedelta(minutes=10 * n))
        for k in range(3):
            word = words[(n + k) % 32]
            turn = make_turn(session, k, advertised=names, task_message=f"about the {word}, please",
                             schema_tokens=4800, estimated_input_tokens=4800 + 2000 + 400 * k,
                             model="claude-sonnet-4-5", started_at=session.started_at + timedelta(seconds=30 * k))
            make_tool_call(turn, f"{word}_tool", output_tokens=200)
    done = computed(reader, django_capture_on_commit_callbacks)
    baselines = {row["name"]: row for row in done["result"]["baselines"]}
    assert list(baselines) == ["every tool", "the published policy (v1)",
                               "provider's deferred loading of the whole catalog"]
    assert all(row["priced_sessions"] == done["result"]["held_out"] for row in baselines.values())
    # Every tool is what the sessions sent: nothing saved, nothing missed; the published policy
    # sends all 32 always on, alike; native deferral keeps one prefix for the whole session.
    every = baselines["every tool"]
    assert every["saved_share"] == 0 and every["hard_miss_rate"] == 0
    assert every["policy_dollars"] == pytest.approx(every["recorded_dollars"])
    assert baselines["the published policy (v1)"]["policy_dollars"] == pytest.approx(every["policy_dollars"])
    assert baselines["provider's deferred loading of the whole catalog"]["cache_breaks"] == 0
    best = next(row for row in done["result"]["candidates"] if row["name"] == done["result"]["recommended"])
    # Here deferring the whole catalog is what saves most: the recommendation is the provider's
    # own deferral (both searches find every tool, but toolscope's answer of 20 loads 20
    # definitions into the conversation against the provider's 8), and costs what that baseline
    # costs, and less than sending everything, as published.
    assert best["name"] == "provider's deferred loading + top 0" and best["hard_miss_rate"] <= 0.02
    assert best["selection"]["tool_search"]["provider_search"] is True
    ours = next(row for row in done["result"]["candidates"]
                if row["name"] == "deferred loading + top 0, toolscope's search top 20")
    assert ours["hard_miss_rate"] == best["hard_miss_rate"] and ours["policy_dollars"] > best["policy_dollars"]
    assert best["policy_dollars"] == pytest.approx(baselines["provider's deferred loading of the whole catalog"][
        "policy_dollars"])
    assert best["policy_dollars"] < baselines["the published policy (v1)"]["policy_dollars"]
    viewer = Client()
    viewer.force_login(make_member(project, make_user("viewer"), Role.VIEWER).user)
    response = viewer.get(reverse("dashboard:policy_simulations", args=[project.slug]))
    shown = [row["name"] for row in response.context["comparison"]]
    assert shown == [best["name"], *baselines]
    assert b"data-comparison" in response.content and b"the published policy (v1)" in response.content
