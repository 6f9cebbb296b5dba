"""A key reads its own project's policy only; label names belong to a project."""

from __future__ import annotations

import json

import pytest

from tests.admin.builders import make_policy
from tests.api.conftest import KeyClient
from tests.factories import make_key
from tests.policies.builders import make_catalog

URL = "/api/v1/policy"


@pytest.fixture
def theirs(other_project, publish):
    make_catalog(other_project, ["globex_deploy"])
    policy = make_policy(other_project)
    policy.mode = "all"
    policy.save()
    return publish(policy, label="production")


@pytest.fixture
def outsider_agent(other_project):
    return KeyClient(make_key(other_project, scopes=["policy:read"]).secret)


def test_each_key_reads_its_own_projects_production_label(agent, outsider_agent, policy, publish, theirs):
    ours = publish(policy)
    assert json.loads(agent.get(URL).content)["project"] == "acme"
    assert json.loads(outsider_agent.get(URL).content)["project"] == "globex"
    assert agent.get(URL)["ETag"] == ours.etag
    assert outsider_agent.get(URL)["ETag"] == theirs.etag


def test_a_label_of_another_project_does_not_exist_here(agent, policy, publish, theirs, move):
    publish(policy)
    move(theirs, "globex-only")
    assert agent.get(URL, {"label": "globex-only"}).status_code == 404


def test_nothing_published_here_is_a_404_even_when_another_project_published(agent, policy, theirs):
    response = agent.get(URL)
    assert response.status_code == 404
    assert "'acme'" in response.json()["detail"]


def test_another_projects_etag_is_never_answered_with_a_304(agent, policy, publish, theirs):
    publish(policy)
    assert agent.get(URL, HTTP_IF_NONE_MATCH=theirs.etag).status_code == 200


def test_publishing_in_one_project_leaves_the_others_cache_alone(agent, outsider_agent, policy, publish, theirs,
                                                                   django_assert_num_queries):
    outsider_agent.get(URL)
    agent.get(URL)
    publish(policy)
    with django_assert_num_queries(0):
        assert outsider_agent.get(URL, HTTP_IF_NONE_MATCH=theirs.etag).status_code == 304
