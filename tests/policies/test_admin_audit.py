"""Draft edits, label moves and rollbacks in the admin are audited; the audit log is read-only."""

from __future__ import annotations

import pytest

from tests.admin.conftest import admin_url, change_url
from toolscope.policies.models import PolicyAuditEntry, PolicyLabel, ToolGroup

URL = "/api/v1/policy"


def _form_data(response) -> dict:
    """What a browser posts back from a change page as it was rendered."""
    forms = [response.context["adminform"].form]
    for inline in response.context["inline_admin_formsets"]:
        forms += [inline.formset.management_form, *inline.formset.forms]
    data = {}
    for form in forms:
        for field in form:
            value = field.value()
            if value is not None and value is not False:
                data[field.html_name] = value
    return data


def test_saving_the_draft_records_what_changed(root_client, policy, tools, superuser):
    data = _form_data(root_client.get(change_url(policy)))
    data.update(mode="context_rules", always_on=[tools["read_file"].pk, tools["git_diff"].pk])
    assert root_client.post(change_url(policy), data).status_code == 302
    entry = PolicyAuditEntry.objects.get()
    assert (entry.action, entry.user, entry.project) == ("draft_changed", superuser, policy.project)
    assert entry.detail["changes"] == ["selection.mode: all → context_rules", "selection.always_on: + git_diff, - bash"]
    assert entry.summary == "draft: selection.mode: all → context_rules; selection.always_on: + git_diff, - bash"


def test_saving_the_draft_unchanged_records_nothing(root_client, policy):
    data = _form_data(root_client.get(change_url(policy)))
    assert root_client.post(change_url(policy), data).status_code == 302
    assert not PolicyAuditEntry.objects.exists()


def test_restricting_the_allowed_set_in_the_admin_is_recorded(root_client, policy, tools):
    data = _form_data(root_client.get(change_url(policy)))
    data["allowed"] = [tools["read_file"].pk, tools["bash"].pk]
    assert root_client.post(change_url(policy), data).status_code == 302
    assert PolicyAuditEntry.objects.get().detail["changes"] == [
        "selection.allowed: every catalog tool → [bash, read_file]"
    ]


def test_adding_a_group_on_its_own_page_is_recorded(root_client, policy, tools):
    response = root_client.post(admin_url(ToolGroup, "add"), {"policy": policy.pk, "name": "git"})
    assert response.status_code == 302
    assert PolicyAuditEntry.objects.get().detail["changes"] == ["selection.groups.git: added []"]


@pytest.fixture
def two_versions(policy, tools, publish):
    first = publish(policy)
    policy.always_on.add(tools["web_fetch"])
    return first, publish(policy)


def test_moving_the_label_back_in_the_admin_is_a_rollback_agents_see(
    root_client, agent, two_versions, superuser, django_capture_on_commit_callbacks
):
    first, second = two_versions
    label = PolicyLabel.objects.get(name="production")
    assert agent.get(URL)["ETag"] == second.etag
    with django_capture_on_commit_callbacks(execute=True):
        response = root_client.post(change_url(label), {"version": first.pk})
    assert response.status_code == 302
    assert PolicyLabel.objects.get(pk=label.pk).version == first
    entry = PolicyAuditEntry.objects.first()
    assert (entry.action, entry.user, entry.summary) == ("rollback", superuser, "rolled back production: v2 → v1")
    assert agent.get(URL)["ETag"] == first.etag


def test_the_roll_back_action_moves_each_label_one_version_back(root_client, two_versions,
                                                                django_capture_on_commit_callbacks):
    first, _ = two_versions
    label = PolicyLabel.objects.get(name="production")
    with django_capture_on_commit_callbacks(execute=True):
        response = root_client.post(admin_url(PolicyLabel, "changelist"),
                                    {"action": "roll_back", "_selected_action": [label.pk]})
    assert response.status_code == 302
    assert PolicyLabel.objects.get(pk=label.pk).version == first


def test_a_label_cannot_be_renamed_on_its_page(root_client, two_versions):
    label = PolicyLabel.objects.get(name="production")
    form = root_client.get(change_url(label)).context["adminform"].form
    assert "name" not in form.fields


def test_adding_a_label_in_the_admin_goes_through_the_service(root_client, project, two_versions):
    first, _ = two_versions
    response = root_client.post(admin_url(PolicyLabel, "add"),
                                {"project": project.pk, "name": "canary", "version": first.pk})
    assert response.status_code == 302
    assert PolicyLabel.objects.get(name="canary").version == first
    assert PolicyAuditEntry.objects.first().summary == "moved canary: nothing → v1"


def test_deleting_a_label_in_the_admin_is_audited(root_client, two_versions):
    label = PolicyLabel.objects.get(name="production")
    response = root_client.post(admin_url(PolicyLabel, "delete", label.pk), {"post": "yes"})
    assert response.status_code == 302
    assert not PolicyLabel.objects.exists()
    assert PolicyAuditEntry.objects.first().summary == "deleted label production (was v2)"


def test_the_audit_log_lists_entries_newest_first_and_cannot_be_edited(root_client, two_versions):
    entries = list(PolicyAuditEntry.objects.all())
    content = root_client.get(admin_url(PolicyAuditEntry, "changelist")).content.decode()
    positions = [content.index(change_url(entry)) for entry in entries]
    assert positions == sorted(positions)
    entry = entries[0]
    assert root_client.post(change_url(entry), {"summary": "rewritten"}).status_code == 403
    assert root_client.post(admin_url(PolicyAuditEntry, "delete", entry.pk), {"post": "yes"}).status_code == 403
    assert PolicyAuditEntry.objects.get(pk=entry.pk).summary == entry.summary


def test_the_audit_log_runs_as_many_queries_for_30_entries_as_for_3(root_client, project, superuser):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def add(count: int) -> None:
        PolicyAuditEntry.objects.bulk_create(
            PolicyAuditEntry(project=project, user=superuser, action="published", summary=f"published v{n}")
            for n in range(count)
        )

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert root_client.get(admin_url(PolicyAuditEntry, "changelist")).status_code == 200
        return len(captured)

    add(3)
    queries()  # warm the per-process caches
    with_3 = queries()
    add(27)
    assert queries() == with_3
