"""The catalog in the admin: per-tool settings are edited, what agents advertised is not."""

from __future__ import annotations

import pytest

from tests import factories
from tests.admin.builders import make_tool
from tests.admin.conftest import admin_url, change_url
from toolscope.policies.models import Tool
from toolscope.telemetry.models import ToolCall


@pytest.fixture
def bash(project):
    return make_tool(project, "bash", source="local")


def test_per_tool_settings_are_saved_and_catalog_fields_are_not(root_client, bash):
    data = {
        "scope": "write", "requires_approval": "on", "redact": '["env"]', "max_result_tokens": 4000,
        "on_schema_error": "raise", "retry_policy": '{"max_attempts": 3}',
        "name": "renamed", "input_schema": "{}", "versions-TOTAL_FORMS": 0, "versions-INITIAL_FORMS": 0,
    }
    response = root_client.post(change_url(bash), data)
    assert response.status_code == 302
    stored = Tool.objects.get(pk=bash.pk)
    assert (stored.scope, stored.requires_approval, stored.redact) == ("write", True, ["env"])
    assert (stored.max_result_tokens, stored.retry_policy) == (4000, {"max_attempts": 3})
    assert (stored.name, stored.input_schema) == ("bash", bash.input_schema)


def test_the_tool_call_filter_offers_the_filtered_projects_catalog(root_client, project, other_project, bash):
    make_tool(other_project, "globex_deploy")
    response = root_client.get(admin_url(ToolCall, "changelist"), {"project__id__exact": project.pk})
    content = response.content.decode()
    assert "tool_name=bash" in content
    assert "tool_name=globex_deploy" not in content


def test_a_tools_calls_link_lists_only_calls_to_it(root_client, project, bash):
    turn = factories.make_turn(factories.make_session(project))
    to_bash, to_other = factories.make_tool_call(turn, "bash"), factories.make_tool_call(turn, "read_file")
    page = root_client.get(change_url(bash)).content.decode()
    link = f"{admin_url(ToolCall, 'changelist')}?project__id__exact={project.pk}&amp;tool_name=bash"
    assert link in page
    content = root_client.get(link.replace("&amp;", "&")).content.decode()
    assert change_url(to_bash) in content
    assert change_url(to_other) not in content
