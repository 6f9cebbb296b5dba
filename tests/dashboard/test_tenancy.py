"""A user who is not a member gets 404 for every page of another project, never 403."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests import factories
from tests.dashboard.urls import get_urls, post_urls
from toolscope.telemetry.models import ApiKey


@pytest.mark.django_db
def test_outsider_gets_404_for_every_page_and_export(outsider_client, activity):
    for url in get_urls(activity):
        assert outsider_client.get(url).status_code == 404, url


@pytest.mark.django_db
def test_outsider_gets_404_when_posting_to_key_actions(outsider_client, activity):
    key = factories.make_key(activity.project).api_key
    for url in post_urls(activity, key.pk):
        assert outsider_client.post(url, {"name": "x", "scopes": ["ingest"]}).status_code == 404, url
    key.refresh_from_db()
    assert key.revoked_at is None
    assert ApiKey.objects.filter(project=activity.project).count() == 1


@pytest.mark.django_db
def test_unknown_project_is_404_like_a_foreign_one(outsider_client):
    assert outsider_client.get(reverse("dashboard:overview", args=["no-such-project"])).status_code == 404


@pytest.mark.django_db
def test_outsider_still_reads_their_own_project(outsider_client, other_project):
    assert outsider_client.get(reverse("dashboard:overview", args=[other_project.slug])).status_code == 200


@pytest.mark.django_db
def test_superuser_reads_every_project_without_membership(root_client, activity):
    for url in get_urls(activity):
        assert root_client.get(url).status_code == 200, url


@pytest.mark.django_db
def test_a_key_of_another_project_cannot_be_revoked_through_this_one(admin_client, project, other_project):
    foreign = factories.make_key(other_project).api_key
    response = admin_client.post(reverse("dashboard:key_revoke", args=[project.slug, foreign.pk]))
    assert response.status_code == 404
    foreign.refresh_from_db()
    assert foreign.revoked_at is None


@pytest.mark.django_db
def test_an_inactive_member_gets_nothing(client, project, member):
    member.is_active = False
    member.save()
    client.force_login(member)
    assert client.get(reverse("dashboard:overview", args=[project.slug])).status_code in (302, 404)
