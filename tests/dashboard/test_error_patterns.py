"""The policy pages' Tool errors tab: a project's error patterns, read by every member, edited by
editors, refused when RE2 cannot run them safely (issue 12, item 1)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from toolscope.policies.models import PolicyAuditEntry
from toolscope.telemetry.error_patterns import default_error_patterns
from toolscope.telemetry.models import Project

pytestmark = pytest.mark.django_db
URL = "dashboard:policy_errors"


def _post(client, project, patterns, deleted=()):
    data = {"patterns-TOTAL_FORMS": str(len(patterns)), "patterns-INITIAL_FORMS": "0",
            "patterns-MIN_NUM_FORMS": "0", "patterns-MAX_NUM_FORMS": "50"}
    for n, pattern in enumerate(patterns):
        data.update({f"patterns-{n}-{key}": value for key, value in pattern.items()})
        if n in deleted:
            data[f"patterns-{n}-DELETE"] = "on"
    return client.post(reverse(URL, args=[project.slug]), data)


def test_every_member_sees_the_defaults_and_only_editors_get_a_form(viewer_client, editor_client, project):
    page = viewer_client.get(reverse(URL, args=[project.slug])).content.decode()
    assert "MCP tool error" in page and "Error executing tool" in page
    assert "Save patterns" not in page
    assert "Save patterns" in editor_client.get(reverse(URL, args=[project.slug])).content.decode()


def test_an_editor_saves_patterns_in_order_and_the_change_is_audited(editor_client, project):
    mine = {"name": "sqlite", "regex": r"^\s*Database error:", "kind": "error"}
    patterns = [*default_error_patterns(), mine]
    response = _post(editor_client, project, patterns, deleted={2})
    assert response.status_code == 302
    project.refresh_from_db()
    assert project.tool_error_patterns == [*default_error_patterns()[:2], mine]
    entry = PolicyAuditEntry.objects.get(project=project)
    assert "MCP tool error, MCP error, sqlite" in entry.summary


@pytest.mark.parametrize("regex", [r"(?=Error)", r"(\w+)+!", r"\w*\w*!", "(unclosed"])
def test_a_pattern_re2_cannot_run_safely_is_refused_and_nothing_changes(editor_client, project, regex):
    response = _post(editor_client, project, [{"name": "bad one", "regex": regex, "kind": "error"}])
    assert response.status_code == 400
    assert "bad one" in response.content.decode()
    assert Project.objects.get(pk=project.pk).tool_error_patterns == default_error_patterns()
    assert not PolicyAuditEntry.objects.exists()


def test_viewers_cannot_post_and_outsiders_see_nothing(viewer_client, outsider_client, project):
    assert _post(viewer_client, project, []).status_code == 403
    assert outsider_client.get(reverse(URL, args=[project.slug])).status_code == 404
    assert Project.objects.get(pk=project.pk).tool_error_patterns == default_error_patterns()
