"""GET /api/v1/policy: the document under a label, its ETag, and cheap revalidation."""

from __future__ import annotations

import json

import pytest

from tests.api.conftest import KeyClient
from tests.factories import make_key

URL = "/api/v1/policy"


def test_the_production_document_is_served_with_its_etag(agent, policy, publish):
    version = publish(policy)
    response = agent.get(URL)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["ETag"] == version.etag
    assert response["Cache-Control"] == "private, max-age=0, must-revalidate"
    assert response["Vary"] == "Authorization"
    assert json.loads(response.content) == version.document


def test_the_document_reads_in_the_documented_key_order(agent, policy, publish):
    publish(policy)
    keys = list(json.loads(agent.get(URL).content))
    assert keys == [
        "schema_version", "project", "label", "version", "etag", "published_at", "encoding",
        "context_window", "selection", "outputs", "tools",
    ]


def test_the_current_etag_gets_a_304_without_a_body(agent, policy, publish):
    version = publish(policy)
    response = agent.get(URL, HTTP_IF_NONE_MATCH=version.etag)
    assert response.status_code == 304
    assert response.content == b""
    assert response["ETag"] == version.etag
    assert response["Cache-Control"] == "private, max-age=0, must-revalidate"


@pytest.mark.parametrize("header", ['W/{etag}', '"other", {etag}', "*"])
def test_if_none_match_compares_weakly_and_accepts_lists(agent, policy, publish, header):
    version = publish(policy)
    assert agent.get(URL, HTTP_IF_NONE_MATCH=header.format(etag=version.etag)).status_code == 304


def test_publishing_changes_the_etag_and_the_old_one_gets_the_new_document(agent, policy, tools, publish):
    old = publish(policy)
    agent.get(URL)  # warm the cache with the old version
    policy.always_on.add(tools["git_diff"])
    new = publish(policy)
    response = agent.get(URL, HTTP_IF_NONE_MATCH=old.etag)
    assert new.etag != old.etag
    assert response.status_code == 200
    assert response["ETag"] == new.etag
    assert json.loads(response.content)["selection"]["always_on"] == ["bash", "git_diff", "read_file"]


def test_another_label_is_served_by_name(agent, policy, tools, publish):
    production = publish(policy)
    policy.always_on.add(tools["web_fetch"])
    staging = publish(policy, label="staging")
    assert agent.get(URL, {"label": "staging"})["ETag"] == staging.etag
    assert agent.get(URL)["ETag"] == production.etag
    assert json.loads(agent.get(URL, {"label": "staging"}).content)["label"] == "staging"


def test_a_version_under_two_labels_names_the_label_asked_for(agent, policy, publish, move):
    version = publish(policy)
    move(version, "canary")
    canary = agent.get(URL, {"label": "canary"})
    assert json.loads(canary.content)["label"] == "canary"
    assert canary["ETag"] == version.etag


def test_an_unknown_label_is_a_404_naming_the_labels_there_are(agent, policy, publish):
    publish(policy)
    response = agent.get(URL, {"label": "staging"})
    assert response.status_code == 404
    assert response.json() == {
        "detail": "Project 'acme' has no label 'staging'; its labels: production.", "code": "not_found",
    }


def test_nothing_published_yet_is_a_404_saying_so(agent, policy):
    response = agent.get(URL)
    assert response.status_code == 404
    assert response.json()["detail"] == "No policy version of project 'acme' has been published yet."


def test_the_first_publish_replaces_a_cached_404(agent, policy, publish):
    assert agent.get(URL).status_code == 404
    version = publish(policy)
    assert agent.get(URL)["ETag"] == version.etag


@pytest.mark.parametrize("label", ["../production", "production\n"])
def test_a_label_that_is_not_a_slug_is_a_400(agent, policy, publish, label):
    publish(policy)
    response = agent.get(URL, {"label": label})
    assert response.status_code == 400
    assert response.json()["field"] == "label"


def test_no_key_is_a_401(policy, publish):
    publish(policy)
    assert KeyClient(None).get(URL).status_code == 401


def test_an_unknown_key_is_a_401(policy, publish):
    publish(policy)
    assert KeyClient("ts_00000000_not-a-real-secret").get(URL).status_code == 401


def test_an_ingest_only_key_is_a_403(project, policy, publish):
    publish(policy)
    response = KeyClient(make_key(project, scopes=["ingest"]).secret).get(URL)
    assert response.status_code == 403
    assert response.json()["detail"] == (
        f"This API key lacks the 'policy:read' scope. A project admin makes a key with it on the dashboard's "
        f"Keys page (/p/{project.slug}/keys/).")


def test_an_admin_key_reads_the_policy(project, policy, publish):
    publish(policy)
    assert KeyClient(make_key(project, scopes=["admin"]).secret).get(URL).status_code == 200
