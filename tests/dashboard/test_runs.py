"""The Runs page: a project's simulations and recommendations, newest first, with who started
each, its progress or headline, each opening its own page; members read it, another project's
runs never show; keyset pages; a bounded number of queries however many runs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from dashboard.selectors.runs import run_cursor_parse, run_list
from tests.dashboard.test_recommendations import record_sessions
from toolscope.policies.models import Recommendation, Simulation
from toolscope.policies.services.recommendations import recommendation_run, recommendation_start

pytestmark = pytest.mark.django_db
SELECTION = {"start": "2026-01-01T00:00:00+00:00", "end": "2026-01-15T00:00:00+00:00", "agent_name": None,
             "model": None, "limit": 500}


def simulation(project, *, user=None, status="done", at=None, **extra) -> Simulation:
    run = Simulation.objects.create(project=project, key=f"s{Simulation.objects.count()}", document={},
                                    source="draft", selection=SELECTION, created_by=user, status=status, **extra)
    if at is not None:
        Simulation.objects.filter(pk=run.pk).update(created_at=at)
    return run


def recommendation(project, *, user=None, status="pending", at=None, **extra) -> Recommendation:
    run = Recommendation.objects.create(project=project, key=f"r{Recommendation.objects.count()}", days=14,
                                        limit=2000, created_by=user, status=status, **extra)
    if at is not None:
        Recommendation.objects.filter(pk=run.pk).update(created_at=at)
    return run


def runs_page(client, project, **params):
    return client.get(reverse("dashboard:policy_runs", args=[project.slug]), params)


def test_a_viewer_sees_both_kinds_newest_first_with_who_started_each(viewer_client, project, editor):
    now = timezone.now()
    older = simulation(project, user=editor, at=now - timedelta(hours=2), sessions_total=300, sessions_done=300,
                       headline={"sessions": 300, "saved_share": 0.42, "net_saved_share": 0.4, "miss_rate": 0.01,
                                 "hard_miss_rate": 0.005, "dollars_saved": 1.25})
    newer = recommendation(project, status="running", at=now - timedelta(minutes=5), candidates_total=40,
                           candidates_done=10, started_at=now - timedelta(minutes=4))
    response = runs_page(viewer_client, project)
    assert response.status_code == 200
    rows = response.context["runs"]
    assert [(row.kind, row.pk) for row in rows] == [("recommendation", newer.pk), ("simulation", older.pk)]
    assert (rows[0].started_by, rows[1].started_by) == (None, "editor")  # None: started with an API key
    html = response.content.decode()
    assert "an API key" in html and ">editor<" in html
    assert "42.0% of schema tokens saved, $1.25" in html
    assert "10 of 40 candidates" in html and "data-runs-live" in html  # a run in progress: the page refreshes
    # Each row opens its run's own page (the running recommendation's: its progress bar).
    for kind, run in (("simulation", older), ("recommendation", newer)):
        assert f'href="{reverse(f"dashboard:policy_{kind}", args=[project.slug, run.pk])}"' in html
    opened = viewer_client.get(reverse("dashboard:policy_recommendation", args=[project.slug, newer.pk]))
    assert opened.status_code == 200 and b"data-progress" in opened.content


def test_a_done_recommendation_is_listed_with_its_recommended_policy(editor_client, viewer_client, project,
                                                                     editor, django_capture_on_commit_callbacks):
    record_sessions(project)
    with django_capture_on_commit_callbacks(execute=False):
        run, _ = recommendation_start(project=project, days=7, limit=100, user=editor)
    recommendation_run(recommendation_id=run.pk)
    run.refresh_from_db()
    assert run.headline["recommended"] == run.result["recommended"] and run.headline["candidates"] > 10
    html = runs_page(viewer_client, project).content.decode()
    assert f"<strong>{run.result['recommended']}</strong>" in html and "hard misses" in html
    page = viewer_client.get(reverse("dashboard:policy_recommendation", args=[project.slug, run.pk]))
    assert page.status_code == 200 and page.context["recommendations"]["recommended"] == run.result["recommended"]
    assert b"asked" in page.content and b"by editor" in page.content


def test_another_projects_runs_never_show(viewer_client, outsider_client, project, other_project):
    mine, theirs = simulation(project), recommendation(other_project)
    rows = runs_page(viewer_client, project).context["runs"]
    assert [(row.kind, row.pk) for row in rows] == [("simulation", mine.pk)]
    assert viewer_client.get(reverse("dashboard:policy_recommendation",
                                     args=[project.slug, theirs.pk])).status_code == 404
    assert runs_page(outsider_client, project).status_code == 404
    assert outsider_client.get(reverse("dashboard:policy_simulation", args=[project.slug, mine.pk])).status_code == 404


def test_pages_follow_each_other_without_gaps_or_repeats_across_kinds(project):
    moment = timezone.now() - timedelta(hours=1)
    # Five runs of both kinds created at one instant, and three later: ties broken by kind, then id.
    made = [simulation(project, at=moment) for _ in range(3)] + [recommendation(project, at=moment) for _ in range(2)]
    made += [recommendation(project, at=moment + timedelta(minutes=n)) for n in range(1, 4)]
    seen, after = [], None
    for _ in range(10):
        page = run_list(project_id=project.pk, after=after, limit=3)
        seen += [(row.kind, row.pk) for row in page.rows]
        if page.next_after is None:
            break
        after = run_cursor_parse(page.next_after)
    assert sorted(seen) == sorted((type(run).__name__.lower(), run.pk) for run in made) and len(seen) == 8
    assert seen[:3] == [("recommendation", run.pk) for run in reversed(made[5:])]


def test_the_page_links_the_next_page_and_ignores_a_bad_cursor(viewer_client, project):
    for _ in range(26):
        simulation(project)
    first = runs_page(viewer_client, project)
    assert len(first.context["runs"]) == 25 and first.context["next_after"]
    second = runs_page(viewer_client, project, after=first.context["next_after"])
    assert len(second.context["runs"]) == 1 and second.context["next_after"] is None
    assert len(runs_page(viewer_client, project, after="nonsense|x|1").context["runs"]) == 25


def test_two_queries_list_the_runs_and_the_page_costs_the_same_for_3_or_30(viewer_client, project,
                                                                           django_assert_num_queries, editor):
    for n in range(3):
        simulation(project, user=editor)
        recommendation(project, user=editor if n else None)
    with django_assert_num_queries(2):
        run_list(project_id=project.pk)
    with CaptureQueriesContext(connection) as few:
        runs_page(viewer_client, project)
    for n in range(27):
        simulation(project, user=editor)
        recommendation(project, user=editor if n % 2 else None)
    with CaptureQueriesContext(connection) as many:
        assert len(runs_page(viewer_client, project).context["runs"]) == 25
    assert len(many) == len(few)
