"""Publishing freezes the draft into the project's next numbered, immutable version."""

from __future__ import annotations

import hashlib
import json
import re

import pytest
from django.core.exceptions import ValidationError

from tests.admin.builders import make_group, make_policy
from tests.policies.builders import make_catalog, make_rule
from toolscope.policies.models import CompactionRule, PolicyAuditEntry, PolicyLabel, PolicyVersion
from toolscope.policies.services.publish import PolicyInvalid, policy_publish


def test_versions_are_numbered_from_one_per_project(policy, publish, other_project):
    other_policy = make_policy(other_project)
    make_catalog(other_project, ["bash"])
    assert [publish(policy).number for _ in range(3)] == [1, 2, 3]
    assert publish(other_policy).number == 1


def test_the_document_follows_schema_version_1(policy, tools, publish, project):
    make_rule(policy, "git", keywords=["git"], groups=[make_group(policy, "git", tools=[tools["git_status"]])])
    version = publish(policy, comment="first")
    document = version.document
    assert document["schema_version"] == 1
    assert (document["project"], document["label"], document["version"]) == ("acme", "production", 1)
    assert document["etag"] == version.etag
    assert document["published_at"] == version.published_at.isoformat()
    assert document["selection"]["allowed"] is None
    assert document["selection"]["always_on"] == ["bash", "read_file"]
    assert document["selection"]["groups"] == {"git": ["git_status"]}
    assert document["selection"]["context_rules"] == [
        {"name": "git", "keywords": ["git"], "regex": None, "groups": ["git"]}
    ]
    assert set(document["tools"]) == set(tools)


def test_a_restricted_allowed_set_is_listed(policy, tools, publish):
    policy.allowed.set([tools["read_file"], tools["bash"], tools["git_diff"]])
    assert publish(policy).document["selection"]["allowed"] == ["bash", "git_diff", "read_file"]


def test_the_etag_is_strong_and_hashes_the_canonical_document(policy, publish):
    version = publish(policy)
    assert re.fullmatch(r'"v1-[0-9a-f]{16}"', version.etag)
    content = {key: value for key, value in version.document.items() if key not in ("etag", "label")}
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert version.etag == f'"v1-{hashlib.sha256(canonical.encode()).hexdigest()[:16]}"'


def test_publishing_points_the_label_at_the_new_version_creating_it(policy, publish):
    first = publish(policy, label="staging")
    assert PolicyLabel.objects.get(name="staging").version == first
    second = publish(policy, label="staging")
    assert PolicyLabel.objects.get(name="staging").version == second
    assert not PolicyLabel.objects.filter(name="production").exists()


def test_a_published_version_cannot_be_changed(policy, publish):
    version = publish(policy)
    version.comment = "rewritten"
    with pytest.raises(ValidationError, match="immutable"):
        version.save()
    assert PolicyVersion.objects.get(pk=version.pk).comment == ""


def test_editing_the_draft_after_publishing_leaves_the_version_as_it_was(policy, tools, publish):
    version = publish(policy)
    policy.always_on.add(tools["web_fetch"])
    policy.mode = "all"
    policy.save()
    assert PolicyVersion.objects.get(pk=version.pk).document == version.document


def test_an_invalid_draft_publishes_nothing_and_carries_every_problem(policy, owner):
    policy.search_top_k, policy.search_max_top_k, policy.mode = 9, 3, "tool_search"
    policy.save()
    CompactionRule.objects.create(policy=policy, tools="nothing*", max_tokens=100)
    with pytest.raises(PolicyInvalid) as caught:
        policy_publish(policy=policy, user=owner, comment="")
    assert [problem.field for problem in caught.value.problems] == ["search_top_k", "compaction_rules[0].tools"]
    assert set(caught.value.message_dict) == {"search_top_k", "compaction_rules[0].tools"}
    assert not PolicyVersion.objects.exists()
    assert not PolicyAuditEntry.objects.exists()


def test_a_label_name_must_be_a_slug(policy, owner):
    with pytest.raises(ValidationError, match="label"):
        policy_publish(policy=policy, user=owner, label="prod uction")


def test_publishing_writes_a_published_entry_then_a_label_entry(policy, tools, publish, owner):
    publish(policy)
    policy.always_on.add(tools["git_diff"])
    publish(policy, comment="git diff always on")
    moved, published = PolicyAuditEntry.objects.filter(project=policy.project)[:2]  # newest first
    assert (moved.action, moved.summary, moved.user) == ("label_moved", "moved production: v1 → v2", owner)
    assert (published.action, published.user) == ("published", owner)
    assert published.summary == "published v2 to production: git diff always on"
    assert published.detail["changes"] == ["selection.always_on: + git_diff"]
    assert published.detail["etag"] == PolicyVersion.objects.get(number=2).etag


def test_the_first_version_says_it_has_nothing_to_compare_with(policy, publish):
    publish(policy)
    entry = PolicyAuditEntry.objects.get(action="published")
    assert entry.detail["changes"] == ["first version: nothing to compare with"]


def test_processing_accounts_under_the_published_outputs_not_the_draft(policy, tools, publish, project):
    from toolscope.policies.models import CompactionRule
    from toolscope.policies.services.documents import policy_outputs_for_processing

    CompactionRule.objects.create(policy=policy, tools="bash", max_tokens=300, strategy="tail")
    version = publish(policy)
    policy.suppress_duplicates = False
    policy.save()
    policy.compaction_rules.all().delete()
    outputs = policy_outputs_for_processing(project=project)
    assert outputs == version.document["outputs"]
    assert outputs["compaction"] == [{"tools": "bash", "max_tokens": 300, "strategy": "tail"}]
    assert outputs["duplicates"] == {"suppress": True}
