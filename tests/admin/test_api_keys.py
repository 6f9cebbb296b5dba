"""API keys in the admin: created by the service, the secret shown once and stored nowhere."""

from __future__ import annotations

import hashlib
import re

from django.contrib.admin.models import LogEntry
from django.forms import CheckboxSelectMultiple

from tests.admin.conftest import admin_url, change_url
from tests.factories import make_key
from toolscope.telemetry.models import ApiKey, Project
from toolscope.telemetry.services.api_keys import api_key_verify

SECRET = re.compile(r"ts_[0-9a-f]+_[A-Za-z0-9_-]{20,}")


def _create_in_admin(client, project, **overrides):
    data = {"project": project.pk, "name": "ci runner", "scopes": ["ingest", "policy:read"], **overrides}
    return client.post(admin_url(ApiKey, "add"), data)


def _secret_part(secret: str) -> str:
    # ts_<prefix>_<secret>: the prefix is hex, the secret is urlsafe and may hold underscores.
    return secret.split("_", 2)[2]


def _secret_in(response) -> str:
    match = SECRET.search(response.content.decode())
    assert match is not None, "the response shows no key"
    return match.group(0)


def test_the_add_form_asks_for_project_name_and_scope_checkboxes_only(root_client, project):
    response = root_client.get(admin_url(ApiKey, "add"))
    form = response.context["adminform"].form
    assert list(form.fields) == ["project", "name", "scopes"]
    assert isinstance(form.fields["scopes"].widget, CheckboxSelectMultiple)
    assert [value for value, _ in form.fields["scopes"].choices] == ["ingest", "policy:read", "read", "admin"]
    assert 'name="prefix"' not in response.content.decode()
    assert 'name="secret_hash"' not in response.content.decode()


def test_creating_a_key_renders_its_secret_with_a_warning_instead_of_redirecting(root_client, project):
    response = _create_in_admin(root_client, project)
    assert response.status_code == 200
    assert "it will not be shown again" in response.content.decode()
    assert "no-store" in response["Cache-Control"]
    key = api_key_verify(raw=_secret_in(response))
    assert key == ApiKey.objects.get()
    assert key.project == project
    assert key.scopes == ["ingest", "policy:read"]
    assert key.created_by.username == "root"


def test_the_secret_is_shown_on_no_later_page(root_client, project):
    secret = _secret_in(_create_in_admin(root_client, project))
    key = ApiKey.objects.get()
    for url in [change_url(key), admin_url(ApiKey, "changelist"), change_url(project)]:
        assert secret not in root_client.get(url).content.decode()
    assert SECRET.search(root_client.get(change_url(key)).content.decode()) is None


def test_the_key_row_holds_the_hash_and_never_the_secret(root_client, project):
    secret = _secret_in(_create_in_admin(root_client, project))
    secret_part = _secret_part(secret)
    row = ApiKey.objects.values_list().get()
    assert all(secret_part not in str(value) for value in row)
    key = ApiKey.objects.get()
    assert key.secret_hash == hashlib.sha256(secret_part.encode()).hexdigest()
    assert secret.startswith(f"ts_{key.prefix}_")


def test_the_secret_stays_out_of_cookies_session_and_the_admin_log(root_client, project):
    response = _create_in_admin(root_client, project)
    secret_part = _secret_part(_secret_in(response))
    assert all(secret_part not in morsel.value for morsel in response.cookies.values())
    assert secret_part not in repr(dict(root_client.session.items()))
    log = LogEntry.objects.get(object_id=str(ApiKey.objects.get().pk))
    assert log.is_addition()
    assert secret_part not in repr(LogEntry.objects.values_list())


def test_a_key_without_scopes_is_refused_and_nothing_is_stored(root_client, project):
    response = _create_in_admin(root_client, project, scopes=[])
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["scopes"]
    assert SECRET.search(response.content.decode()) is None
    assert not ApiKey.objects.exists()


def test_the_add_form_preselects_the_project_from_the_link_on_its_page(root_client, project):
    response = root_client.get(admin_url(ApiKey, "add"), {"project": project.pk})
    assert str(response.context["adminform"].form["project"].value()) == str(project.pk)


def test_the_change_form_renames_but_cannot_rewrite_prefix_hash_or_scopes(root_client, project):
    key = make_key(project, scopes=["ingest"]).api_key
    data = {"name": "renamed", "prefix": "evil", "secret_hash": "0" * 64, "scopes": ["admin"], "project": 0}
    response = root_client.post(change_url(key), data)
    assert response.status_code == 302
    stored = ApiKey.objects.get(pk=key.pk)
    assert stored.name == "renamed"
    assert (stored.prefix, stored.secret_hash, stored.scopes) == (key.prefix, key.secret_hash, ["ingest"])


def test_the_revoke_action_stops_the_selected_keys_verifying(root_client, project):
    revoked, kept = make_key(project, name="leaked"), make_key(project, name="kept")
    data = {"action": "revoke_keys", "_selected_action": [revoked.api_key.pk]}
    response = root_client.post(admin_url(ApiKey, "changelist"), data)
    assert response.status_code == 302
    assert api_key_verify(raw=revoked.secret) is None
    assert api_key_verify(raw=kept.secret) is not None


def test_the_project_action_creates_an_ingest_key_and_shows_it_once(root_client, project):
    data = {"action": "create_ingest_key", "_selected_action": [project.pk]}
    response = root_client.post(admin_url(Project, "changelist"), data)
    assert response.status_code == 200
    assert "it will not be shown again" in response.content.decode()
    assert "no-store" in response["Cache-Control"]
    key = api_key_verify(raw=_secret_in(response))
    assert key is not None
    assert (key.project, key.scopes) == (project, ["ingest", "policy:read"])


def test_the_project_action_wants_exactly_one_project(root_client, project, other_project):
    data = {"action": "create_ingest_key", "_selected_action": [project.pk, other_project.pk]}
    response = root_client.post(admin_url(Project, "changelist"), data)
    assert response.status_code == 302
    assert not ApiKey.objects.exists()


def test_the_project_page_lists_its_keys_without_their_hash(root_client, project):
    key = make_key(project).api_key
    content = root_client.get(change_url(project)).content.decode()
    assert key.prefix in content
    assert key.secret_hash not in content
