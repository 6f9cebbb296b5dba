"""Labels point at versions; moving one back is a rollback that agents see on their next fetch."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError

from tests.admin.builders import make_version
from toolscope.policies.models import PolicyAuditEntry, PolicyLabel
from toolscope.policies.services.publish import label_delete, label_move

URL = "/api/v1/policy"


@pytest.fixture
def versions(policy, tools, publish):
    first = publish(policy)
    policy.always_on.add(tools["web_fetch"])
    second = publish(policy)
    return first, second


def test_rolling_back_serves_the_old_version_again(agent, versions, move):
    first, second = versions
    assert agent.get(URL)["ETag"] == second.etag
    move(first)
    response = agent.get(URL, HTTP_IF_NONE_MATCH=second.etag)
    assert response.status_code == 200
    assert response["ETag"] == first.etag
    assert json.loads(response.content)["selection"]["always_on"] == ["bash", "read_file"]


def test_a_rollback_is_audited_as_one_with_its_changes(versions, move, owner):
    first, _ = versions
    move(first)
    entry = PolicyAuditEntry.objects.first()
    assert (entry.action, entry.summary, entry.user) == ("rollback", "rolled back production: v2 → v1", owner)
    assert entry.detail == {
        "label": "production", "from": 2, "to": 1, "changes": ["selection.always_on: - web_fetch"],
    }


def test_moving_forward_again_is_a_label_move(versions, move):
    first, second = versions
    move(first)
    move(second)
    assert PolicyAuditEntry.objects.first().action == "label_moved"


def test_moving_a_label_where_it_already_points_records_nothing(versions, move):
    _, second = versions
    before = PolicyAuditEntry.objects.count()
    move(second)
    assert PolicyAuditEntry.objects.count() == before


def test_moving_a_new_label_creates_it(agent, versions, move):
    first, _ = versions
    move(first, "canary")
    assert PolicyLabel.objects.get(name="canary").version == first
    assert agent.get(URL, {"label": "canary"})["ETag"] == first.etag


def test_a_label_cannot_point_at_another_projects_version(versions, other_project, owner):
    first, _ = versions
    with pytest.raises(ValidationError, match="another project"):
        label_move(project=other_project, name="production", version=first, user=owner)


def test_a_deleted_label_is_a_404_from_the_next_fetch(agent, versions, owner, django_capture_on_commit_callbacks):
    agent.get(URL, {"label": "production"})
    with django_capture_on_commit_callbacks(execute=True):
        label_delete(label=PolicyLabel.objects.get(name="production"), user=owner)
    assert agent.get(URL).status_code == 404
    assert PolicyAuditEntry.objects.first().summary == "deleted label production (was v2)"


def test_the_same_label_name_in_two_projects_is_two_labels(project, other_project, move):
    ours, theirs = make_version(project, 1), make_version(other_project, 1)
    move(ours)
    move(theirs)
    assert PolicyLabel.objects.filter(name="production").count() == 2
    assert PolicyLabel.objects.get(project=project, name="production").version == ours
