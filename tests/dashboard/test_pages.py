"""Every page renders for a viewer, within a fixed query budget, with plotly.js from our static files."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests import factories
from tests.dashboard.builders import Activity, add_session, recent
from tests.dashboard.urls import get_urls, page_urls

MAX_QUERIES_PER_PAGE = 20


def _body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


@pytest.mark.django_db
def test_every_page_and_export_renders_for_a_viewer(viewer_client, activity):
    for url in get_urls(activity):
        response = viewer_client.get(url)
        assert response.status_code == 200, url
        assert _body(response), url


@pytest.mark.django_db
def test_every_page_stays_within_the_query_budget(viewer_client, activity, django_assert_max_num_queries):
    for url in get_urls(activity):
        with django_assert_max_num_queries(MAX_QUERIES_PER_PAGE):
            _body(viewer_client.get(url))


@pytest.mark.django_db
def test_pages_with_charts_load_plotly_from_our_static_files(viewer_client, activity):
    for url in page_urls(activity):
        html = viewer_client.get(url).content.decode()
        # A CSRF token is random letters: one spelt "cdn" once (a fresh-clone CI run, 2026-12-06).
        page = re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", html)
        assert "cdn" not in page.lower(), url
        if "data-chart" in html:
            assert "/static/plotly/plotly.min.js" in html, url


def test_plotly_js_is_a_static_file():
    from django.contrib.staticfiles import finders

    assert finders.find("plotly/plotly.min.js")
    assert finders.find("dashboard/charts.js")


@pytest.mark.django_db
def test_anonymous_visitors_are_sent_to_the_login_page(client, activity):
    for url in get_urls(activity):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("dashboard:login")), url


@pytest.mark.django_db
def test_login_page_logs_in_and_goes_home(client, member):
    response = client.post(reverse("dashboard:login"), {"username": "member", "password": "pw-member"})
    assert response.status_code == 302
    assert response["Location"] == reverse("dashboard:home")


@pytest.mark.django_db
def test_logout_is_a_post(viewer_client):
    response = viewer_client.post(reverse("dashboard:logout"))
    assert response.status_code == 302
    assert viewer_client.get(reverse("dashboard:home")).status_code == 302


@pytest.mark.django_db
def test_home_redirects_a_member_of_one_project_to_its_overview(viewer_client, project):
    response = viewer_client.get(reverse("dashboard:home"))
    assert response.status_code == 302
    assert response["Location"] == reverse("dashboard:overview", args=[project.slug])


@pytest.mark.django_db
def test_home_lists_the_projects_of_a_member_of_several(viewer_client, member, other_project):
    factories.make_member(other_project, member)
    response = viewer_client.get(reverse("dashboard:home"))
    assert response.status_code == 200
    assert [p.slug for p in response.context["projects"]] == ["acme", "globex"]


@pytest.mark.django_db
def test_home_of_a_user_without_projects_says_so(client):
    client.force_login(factories.make_user())
    response = client.get(reverse("dashboard:home"))
    assert response.status_code == 200
    assert b"not a member of any project" in response.content


@pytest.mark.django_db
def test_project_switcher_lists_only_the_members_projects(viewer_client, activity, other_project):
    response = viewer_client.get(reverse("dashboard:overview", args=["acme"]))
    assert [p.slug for p in response.context["projects"]] == ["acme"]


@pytest.mark.django_db
def test_superuser_sees_every_project_in_the_switcher(root_client, activity, other_project):
    response = root_client.get(reverse("dashboard:overview", args=["acme"]))
    assert {p.slug for p in response.context["projects"]} == {"acme", "globex"}


@pytest.mark.django_db
def test_pages_link_to_the_policy_page(viewer_client, activity):
    html = viewer_client.get(reverse("dashboard:overview", args=["acme"])).content.decode()
    assert 'href="/p/acme/policy/"' in html


@pytest.mark.django_db
def test_pages_render_before_any_rollup(viewer_client, project):
    session = add_session(project, at=recent())
    for url in get_urls(Activity(project=project, sessions=[session])):
        if "/tools/read_file/" in url:
            continue  # neither in the catalog nor rolled up yet: 404, see test_tools
        assert viewer_client.get(url).status_code == 200, url
