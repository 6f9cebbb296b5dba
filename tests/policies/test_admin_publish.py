"""Publishing from the admin: the draft's Publish page shows problems and changes, then publishes."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.admin.conftest import change_url
from tests.policies.builders import make_rule
from toolscope.policies.models import PolicyAuditEntry, PolicyLabel, PolicyVersion


def publish_url(policy) -> str:
    return reverse("admin:policies_policy_publish", args=[policy.pk])


@pytest.fixture
def post_publish(root_client, django_capture_on_commit_callbacks):
    def _post(policy, **data):
        with django_capture_on_commit_callbacks(execute=True):
            return root_client.post(publish_url(policy), {"label": "production", "comment": "", **data})

    return _post


def test_the_draft_page_links_to_its_publish_page(root_client, policy):
    assert publish_url(policy) in root_client.get(change_url(policy)).content.decode()


def test_the_publish_page_says_when_nothing_is_published_yet(root_client, policy):
    content = root_client.get(publish_url(policy)).content.decode()
    assert "Nothing is published under production yet." in content
    assert 'name="_publish"' in content
    assert "disabled" not in content.split('name="_publish"')[1].split(">")[0]


def test_the_publish_page_shows_the_changes_against_production(root_client, policy, tools, publish):
    publish(policy)
    policy.always_on.add(tools["git_diff"])
    policy.always_on.remove(tools["bash"])
    response = root_client.get(publish_url(policy))
    assert response.context["changes"] == ["selection.always_on: + git_diff, - bash"]
    content = response.content.decode()
    assert "Changes against production (v1)" in content
    assert "selection.always_on: + git_diff, - bash" in content


def test_the_publish_page_lists_every_problem_and_disables_the_button(root_client, policy):
    policy.search_top_k, policy.search_max_top_k = 9, 3
    policy.save()
    make_rule(policy, "slow", regex="(a+)+")
    response = root_client.get(publish_url(policy))
    fields = [problem.field for problem in response.context["problems"]]
    assert fields == ["context_rules.slow.regex", "search_top_k"]
    content = response.content.decode()
    assert "9 is above search_max_top_k (3)" in content
    assert "disabled" in content.split('name="_publish"')[1].split(">")[0]


def test_the_publish_page_names_rules_with_a_polynomial_or_re2_refused_regex(root_client, policy):
    make_rule(policy, "greedy", regex=r"\w*\w*\w*\w*\w*!")
    make_rule(policy, "lookbehind", regex=r"(?<=git )push")
    response = root_client.get(publish_url(policy))
    fields = [problem.field for problem in response.context["problems"]]
    assert fields == ["context_rules.greedy.regex", "context_rules.lookbehind.regex"]
    content = response.content.decode()
    assert "can take polynomial time" in content
    assert "RE2, which matches rules, cannot compile it (invalid perl operator: (?&lt;=)" in content
    assert "disabled" in content.split('name="_publish"')[1].split(">")[0]


def test_posting_publishes_and_opens_the_new_version(root_client, policy, post_publish, superuser):
    response = post_publish(policy, comment="first cut")
    version = PolicyVersion.objects.get()
    assert response.status_code == 302
    assert response["Location"] == change_url(version)
    assert (version.number, version.comment, version.published_by) == (1, "first cut", superuser)
    assert PolicyLabel.objects.get(name="production").version == version
    assert PolicyAuditEntry.objects.filter(action="published", user=superuser).count() == 1
    page = root_client.get(response["Location"]).content.decode()
    assert "Published v1 to production." in page


def test_posting_to_staging_moves_only_staging(policy, tools, post_publish, publish):
    production = publish(policy)
    policy.always_on.add(tools["git_diff"])
    post_publish(policy, label="staging")
    assert PolicyLabel.objects.get(name="production").version == production
    assert PolicyLabel.objects.get(name="staging").version.number == 2


def test_posting_an_invalid_draft_publishes_nothing_and_shows_why(policy, post_publish):
    policy.search_top_k, policy.search_max_top_k = 30, 20
    policy.save()
    response = post_publish(policy)
    assert response.status_code == 200
    assert "30 is above search_max_top_k (20)" in response.content.decode()
    assert not PolicyVersion.objects.exists()


def test_an_unknown_label_choice_is_refused(policy, post_publish):
    response = post_publish(policy, label="no such label")
    assert response.status_code == 200
    assert response.context["form"].errors["label"]
    assert not PolicyVersion.objects.exists()


def test_a_version_page_shows_its_changes_from_the_previous_version(root_client, policy, tools, publish):
    first = publish(policy)
    policy.mode = "context_rules"
    policy.save()
    second = publish(policy)
    assert "first version: nothing to compare with" in root_client.get(change_url(first)).content.decode()
    assert "selection.mode: all → context_rules" in root_client.get(change_url(second)).content.decode()


def test_the_publish_page_requires_a_staff_login(client, policy):
    response = client.get(publish_url(policy))
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_an_unchanged_draft_is_not_published_again(policy, post_publish, publish):
    """As on the dashboard (issue 28, item 2): a copy of a version is refused, naming it."""
    publish(policy)
    for label in ("production", "staging"):
        response = post_publish(policy, label=label)
        assert response.status_code == 200
        assert "The draft is identical to v1: nothing new to publish." in response.content.decode()
    assert PolicyVersion.objects.count() == 1 and not PolicyLabel.objects.filter(name="staging").exists()
