"""Keys: every member sees the list; only admins create (the secret shown once) and revoke."""

from __future__ import annotations

import hashlib

import pytest
from django.urls import reverse

from tests import factories
from toolscope.telemetry.models import ApiKey
from toolscope.telemetry.services.api_keys import api_key_verify


def _create(client, project, **data):
    payload = {"name": "ci", "scopes": ["ingest"], **data}
    return client.post(reverse("dashboard:key_create", args=[project.slug]), payload)


@pytest.mark.django_db
def test_viewer_sees_the_list_without_the_create_form_or_revoke_buttons(viewer_client, project):
    factories.make_key(project, name="agent key")
    html = viewer_client.get(reverse("dashboard:keys", args=[project.slug])).content.decode()
    assert "agent key" in html
    assert "Create key" not in html
    assert "Revoke" not in html


@pytest.mark.django_db
@pytest.mark.parametrize("client_fixture", ["viewer_client", "editor_client"])
def test_viewers_and_editors_cannot_create_a_key(request, client_fixture, project):
    client = request.getfixturevalue(client_fixture)
    assert _create(client, project).status_code == 403
    assert not ApiKey.objects.filter(project=project).exists()


@pytest.mark.django_db
@pytest.mark.parametrize("client_fixture", ["viewer_client", "editor_client"])
def test_viewers_and_editors_cannot_revoke_a_key(request, client_fixture, project):
    client = request.getfixturevalue(client_fixture)
    key = factories.make_key(project).api_key
    assert client.post(reverse("dashboard:key_revoke", args=[project.slug, key.pk])).status_code == 403
    key.refresh_from_db()
    assert key.revoked_at is None


@pytest.mark.django_db
def test_admin_creates_a_key_and_sees_its_secret_once(admin_client, owner, project):
    response = _create(admin_client, project, name="ci", scopes=["ingest", "policy:read"])
    assert response.status_code == 200
    secret = response.context["created"].secret
    assert secret in response.content.decode()
    assert response["Cache-Control"].startswith("max-age=0")
    key = ApiKey.objects.get(project=project)
    assert (key.name, key.scopes, key.created_by) == ("ci", ["ingest", "policy:read"], owner)
    prefix, _, raw_secret = secret.removeprefix("ts_").partition("_")
    assert prefix == key.prefix
    assert key.secret_hash == hashlib.sha256(raw_secret.encode()).hexdigest()
    assert api_key_verify(raw=secret) == key
    assert secret not in str(ApiKey.objects.filter(pk=key.pk).values().get())
    # Never kept anywhere a later request could read it.
    assert secret not in str(dict(admin_client.session.items()))
    listing = admin_client.get(reverse("dashboard:keys", args=[project.slug])).content.decode()
    assert secret not in listing
    assert f"ts_{key.prefix}_" in listing


@pytest.mark.django_db
def test_admin_revokes_a_key(admin_client, project):
    key = factories.make_key(project).api_key
    response = admin_client.post(reverse("dashboard:key_revoke", args=[project.slug, key.pk]) + "?range=30d")
    assert response.status_code == 302
    assert response["Location"] == reverse("dashboard:keys", args=[project.slug]) + "?range=30d"
    key.refresh_from_db()
    assert key.revoked_at is not None


@pytest.mark.django_db
def test_revoking_needs_a_post(admin_client, project):
    key = factories.make_key(project).api_key
    assert admin_client.get(reverse("dashboard:key_revoke", args=[project.slug, key.pk])).status_code == 405


@pytest.mark.django_db
def test_key_actions_need_the_csrf_token(owner, project):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    assert _create(client, project).status_code == 403
    assert not ApiKey.objects.exists()


@pytest.mark.django_db
def test_a_key_without_scopes_is_refused_with_the_form(admin_client, project):
    response = _create(admin_client, project, scopes=[])
    assert response.status_code == 400
    assert response.context["form"].errors["scopes"]
    assert not ApiKey.objects.exists()


@pytest.mark.django_db
def test_superuser_manages_keys_without_membership(root_client, project):
    assert _create(root_client, project).status_code == 200
