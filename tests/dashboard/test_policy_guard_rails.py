"""Nothing destroyed, nothing published by mistake (issue 28, items 1 and 2): applying a
recommendation shows its diff first and keeps what the candidate does not decide; any draft edit
can be undone and any draft reset to a published version; publishing picks an existing label (a
new one is named explicitly) and refuses a copy of a version; a label moves only after a
confirmation that shows what changes for the agents polling it."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.urls import reverse

from tests.admin.builders import make_group, make_policy, make_tool
from tests.dashboard.test_recommendations import computed, record_sessions
from toolscope.policies.models import CompactionRule, PolicyAuditEntry, PolicyLabel, PolicyVersion, Tool
from toolscope.policies.services.documents import policy_document_build
from toolscope.policies.services.drafts import draft_snapshot
from toolscope.policies.services.publish import policy_publish

pytestmark = pytest.mark.django_db

CANDIDATE = "always-on top 2 + 1 rules"


@pytest.fixture(autouse=True)
def _clean_cache():
    cache.clear()
    yield
    cache.clear()


def url(project, name, *args):
    return reverse(f"dashboard:{name}", args=[project.slug, *args])


@pytest.fixture
def configured(project):
    """A draft someone built by hand: a compaction rule, a group no candidate knows, a disabled
    rule, a per-tool setting."""
    policy = record_sessions(project)
    tools = {tool.name: tool for tool in Tool.objects.filter(project=project)}
    CompactionRule.objects.create(policy=policy, position=0, tools="query_db", max_tokens=500, strategy="head_tail")
    ops = make_group(policy, "ops", [tools["deploy"]])
    rule = policy.context_rules.create(name="deploys", keywords=["deploy"], position=0, enabled=False)
    rule.groups.set([ops])
    Tool.objects.filter(project=project, name="deploy").update(requires_approval=True, redact=["token"])
    return policy


def test_applying_shows_the_diff_first_and_keeps_what_the_candidate_does_not_decide(
        editor_client, project, configured, django_capture_on_commit_callbacks):
    run = computed(editor_client, project, django_capture_on_commit_callbacks)
    before = policy_document_build(policy=configured)
    preview = editor_client.get(url(project, "policy_recommendation_apply"),
                                {"recommendation": run.pk, "name": CANDIDATE})
    assert preview.status_code == 200
    changes = preview.context["changes"]
    assert any(line.startswith("selection.mode") for line in changes)
    assert not any("compaction" in line for line in changes)  # kept unless asked
    assert policy_document_build(policy=configured) == before  # a preview changes nothing
    # Asking for the candidate's output rules shows them in the diff.
    replacing = editor_client.get(url(project, "policy_recommendation_apply"),
                                  {"recommendation": run.pk, "name": CANDIDATE, "outputs": "1"})
    assert any("compaction" in line for line in replacing.context["changes"])

    response = editor_client.post(url(project, "policy_recommendation_apply"), {"recommendation": run.pk,
                                                                                "name": CANDIDATE})
    assert response.status_code == 302
    after = policy_document_build(policy=configured)
    assert after["selection"]["mode"] == "context_rules"
    assert after["outputs"] == before["outputs"]  # compaction and duplicates kept
    assert after["selection"]["groups"]["ops"] == ["deploy"]  # a group the candidate does not use
    assert after["tools"]["deploy"] == before["tools"]["deploy"]  # per-tool settings
    assert {rule["name"] for rule in after["selection"]["context_rules"]} != set()
    # The draft page offers to undo it, and undoing puts back every part, the disabled rule too.
    page = editor_client.get(url(project, "policy"))
    entry = page.context["undoable"]
    assert entry is not None and b"data-undo" in page.content
    undone = editor_client.post(url(project, "policy_draft_undo"), {"entry": entry.pk})
    assert undone.status_code == 302
    assert policy_document_build(policy=configured) == before
    disabled = configured.context_rules.get(name="deploys")
    assert not disabled.enabled and [g.name for g in disabled.groups.all()] == ["ops"]


def test_applying_the_candidates_outputs_when_asked(editor_client, project, configured,
                                                    django_capture_on_commit_callbacks):
    run = computed(editor_client, project, django_capture_on_commit_callbacks)
    editor_client.post(url(project, "policy_recommendation_apply"), {"recommendation": run.pk, "name": CANDIDATE,
                                                                     "outputs": "1"})
    assert list(configured.compaction_rules.values_list("tools", "max_tokens")) == [("edit_file", 2000)]


def test_an_undo_of_a_change_that_is_no_longer_the_last_is_refused(editor_client, project, configured, owner):
    before = draft_snapshot(policy=configured)
    form_edit = editor_client.get(url(project, "policy"))
    assert form_edit.context["undoable"] is None  # nothing audited yet
    from toolscope.policies.services.drafts import policy_draft_restore

    first = policy_draft_restore(policy=configured, snapshot={"document": {
        **before["document"], "outputs": {"duplicates": {"suppress": False}, "compaction": []}}}, user=owner)
    policy_publish(policy=configured, user=owner)  # a publish ends what Undo can reach
    response = editor_client.post(url(project, "policy_draft_undo"), {"entry": first.pk}, follow=True)
    assert "no longer the last one" in response.content.decode()
    assert policy_document_build(policy=configured)["outputs"]["compaction"] == []


def test_a_draft_is_reset_to_a_published_version_after_a_confirmation(editor_client, project, configured, owner):
    published = policy_publish(policy=configured, user=owner)
    configured.compaction_rules.all().delete()
    configured.groups.all().delete()
    confirm = editor_client.get(url(project, "policy_draft_reset", published.number))
    assert confirm.status_code == 200 and confirm.context["changes"]
    assert not configured.compaction_rules.exists()  # the confirmation changes nothing
    assert editor_client.post(url(project, "policy_draft_reset", published.number)).status_code == 302
    document = policy_document_build(policy=configured)
    assert document == {key: value for key, value in published.document.items()
                        if key not in ("label", "version", "etag", "published_at")}
    assert editor_client.get(url(project, "policy_draft_reset", 99)).status_code == 404


def test_a_viewer_can_neither_reset_nor_undo(viewer_client, project, configured, owner):
    published = policy_publish(policy=configured, user=owner)
    assert viewer_client.post(url(project, "policy_draft_reset", published.number)).status_code == 403
    assert viewer_client.post(url(project, "policy_draft_undo"), {"entry": 1}).status_code == 403


# --- publishing -----------------------------------------------------------------------------------


@pytest.fixture
def draft(project):
    return make_policy(project, always_on=[make_tool(project, "read_file"), make_tool(project, "bash")])


def test_an_unchanged_draft_is_not_published_again(admin_client, project, draft, owner,
                                                   django_capture_on_commit_callbacks):
    policy_publish(policy=draft, user=owner)
    page = admin_client.get(url(project, "policy_publish"))
    assert page.context["preview"].identical == 1
    assert b"data-identical" in page.content and b"disabled" in page.content
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(url(project, "policy_publish"), {"label": "production", "comment": "again"})
    assert response.status_code == 400 and "identical to v1" in response.content.decode()
    assert PolicyVersion.objects.filter(project=project).count() == 1
    # To serve it under another label, the page points at moving that label.
    policy_publish(policy=draft, user=owner, label="staging")  # the service itself still may
    draft.always_on.add(make_tool(project, "git_diff"))
    policy_publish(policy=draft, user=owner, label="staging")
    staging = admin_client.get(url(project, "policy_publish"), {"label": "staging"})
    assert staging.context["preview"].identical == 3
    assert f"{url(project, 'policy_label_move', 3)}?label=staging" not in staging.content.decode()  # serves it


def test_a_label_is_picked_and_a_new_one_is_named_explicitly(admin_client, project, draft, owner,
                                                             django_capture_on_commit_callbacks):
    policy_publish(policy=draft, user=owner)
    draft.always_on.add(make_tool(project, "git_diff"))
    with django_capture_on_commit_callbacks(execute=True):
        typo = admin_client.post(url(project, "policy_publish"), {"label": "prodution", "comment": ""})
        assert typo.status_code == 400
        assert not PolicyLabel.objects.filter(name="prodution").exists()
        unnamed = admin_client.post(url(project, "policy_publish"), {"label": "__new__", "new_label": ""})
        assert unnamed.status_code == 400
        taken = admin_client.post(url(project, "policy_publish"), {"label": "__new__", "new_label": "production"})
        assert taken.status_code == 400 and "exists already" in taken.content.decode()
        assert PolicyVersion.objects.filter(project=project).count() == 1
        created = admin_client.post(url(project, "policy_publish"), {"label": "__new__", "new_label": "canary"})
    assert created.status_code == 302
    assert PolicyLabel.objects.get(project=project, name="canary").version.number == 2
    assert PolicyLabel.objects.get(project=project, name="production").version.number == 1
    # The preview of a new label says publishing creates it.
    page = admin_client.get(url(project, "policy_publish"), {"label": "__new__", "new_label": "beta"})
    assert page.context["new"] and "creates it" in page.content.decode()


def test_a_label_moves_only_after_a_confirmation_that_shows_the_change(admin_client, project, draft, owner,
                                                                       django_capture_on_commit_callbacks):
    first = policy_publish(policy=draft, user=owner)
    draft.always_on.add(make_tool(project, "git_diff"))
    policy_publish(policy=draft, user=owner)
    versions = admin_client.get(url(project, "policy_versions")).content.decode()
    assert '<option value="" selected>Choose a label…</option>' in versions  # no label is preselected
    confirm = admin_client.get(url(project, "policy_label_move", first.number), {"label": "production"})
    assert confirm.status_code == 200
    assert "selection.always_on: - git_diff" in confirm.context["changes"]
    assert "This is a rollback." in confirm.context["intro"]
    assert PolicyLabel.objects.get(name="production").version.number == 2  # not moved by looking
    # Only the project's labels move: a new name is refused, nothing created.
    assert admin_client.post(url(project, "policy_label_move", first.number), {"label": "prodution"}).status_code == 302
    assert not PolicyLabel.objects.filter(name="prodution").exists()
    with django_capture_on_commit_callbacks(execute=True):
        admin_client.post(url(project, "policy_label_move", first.number), {"label": "production"})
    assert PolicyLabel.objects.get(name="production").version == first
    assert PolicyAuditEntry.objects.filter(project=project, action="rollback").count() == 1


def test_the_keys_that_poll_a_label_are_shown_before_it_moves(admin_client, project, draft, owner,
                                                              django_capture_on_commit_callbacks):
    from tests.api.conftest import KeyClient
    from tests.factories import make_key
    from toolscope.policies.services.polls import polls

    polls.forget()
    first = policy_publish(policy=draft, user=owner)
    agent = make_key(project, scopes=["policy:read"], name="ci agent")
    assert KeyClient(agent.secret).get("/api/v1/policy", {"label": "production"}).status_code == 200
    draft.always_on.add(make_tool(project, "git_diff"))
    policy_publish(policy=draft, user=owner, label="staging")
    versions = admin_client.get(url(project, "policy_versions")).content.decode()
    assert 'data-pollers="production"><span class="small"' in versions and "ci agent" in versions
    confirm = admin_client.get(url(project, "policy_label_move", 2), {"label": "production"})
    assert confirm.context["pollers"][0].key_name == "ci agent"
    assert f"ci agent ({agent.api_key.prefix}…, v{first.number} at" in " ".join(confirm.context["notes"])
    publish_page = admin_client.get(url(project, "policy_publish"), {"label": "staging"})
    assert "No API key has fetched staging lately." in publish_page.content.decode()
    polls.forget()
