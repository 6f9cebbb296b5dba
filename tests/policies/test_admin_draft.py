"""The draft's allowed set in the admin, and the audit entry a new draft gets."""

from __future__ import annotations

from tests.admin.builders import make_tool
from tests.admin.conftest import admin_url, change_url
from toolscope.policies.models import Policy, PolicyAuditEntry


def test_the_allowed_picker_offers_only_the_projects_tools(root_client, policy, tools, other_project):
    make_tool(other_project, "globex_deploy")
    response = root_client.get(change_url(policy))
    assert set(response.context["adminform"].form.fields["allowed"].queryset) == set(tools.values())
    assert "globex_deploy" not in response.content.decode()


def test_creating_a_draft_in_the_admin_is_recorded(root_client, other_project, superuser):
    response = root_client.post(admin_url(Policy, "add"), {"project": other_project.pk, "mode": "all"})
    assert response.status_code == 302
    entry = PolicyAuditEntry.objects.get()
    assert (entry.project, entry.action, entry.summary, entry.user) == (
        other_project, "draft_changed", "draft created", superuser,
    )
