"""Policy forms offer only the edited project's tools, groups and versions."""

from __future__ import annotations

import pytest

from tests.admin.builders import (
    make_context_rule,
    make_group,
    make_label,
    make_policy,
    make_tool,
    make_version,
)
from tests.admin.conftest import admin_url, change_url
from toolscope.policies.models import PolicyLabel, ToolGroup


@pytest.fixture
def ours(project):
    tools = [make_tool(project, "read_file"), make_tool(project, "bash")]
    policy = make_policy(project, always_on=tools[:1])
    group = make_group(policy, "shell", tools=tools[1:])
    make_context_rule(policy, groups=[group])
    return {"tools": set(tools), "policy": policy, "group": group}


@pytest.fixture
def theirs(other_project):
    tool = make_tool(other_project, "globex_deploy")
    policy = make_policy(other_project, always_on=[tool])
    group = make_group(policy, "globex-release", tools=[tool])
    return {"tool": tool, "policy": policy, "group": group}


def _inline_forms(response, model):
    for inline in response.context["inline_admin_formsets"]:
        if inline.formset.model is model:
            return [*inline.formset.forms, inline.formset.empty_form]
    raise AssertionError(f"no {model.__name__} inline on the page")


def _form_data(response) -> dict:
    """What a browser would post back from the page as it was rendered."""
    forms = [response.context["adminform"].form]
    for inline in response.context["inline_admin_formsets"]:
        forms += [inline.formset.management_form, *inline.formset.forms]
    data = {}
    for form in forms:
        for field in form:
            value = field.value()
            if value is not None and value is not False:  # an unchecked box posts nothing
                data[field.html_name] = value
    return data


def test_the_always_on_picker_offers_only_the_projects_tools(root_client, ours, theirs):
    response = root_client.get(change_url(ours["policy"]))
    assert set(response.context["adminform"].form.fields["always_on"].queryset) == ours["tools"]
    assert "globex_deploy" not in response.content.decode()


def test_group_tool_pickers_on_the_policy_page_offer_only_the_projects_tools(root_client, ours, theirs):
    response = root_client.get(change_url(ours["policy"]))
    forms = _inline_forms(response, ToolGroup)
    assert len(forms) == 2  # the saved group and the blank one "add another" copies
    assert all(set(form.fields["tools"].queryset) == ours["tools"] for form in forms)


def test_context_rule_group_pickers_offer_only_the_projects_groups(root_client, ours, theirs):
    response = root_client.get(change_url(ours["policy"]))
    forms = _inline_forms(response, ours["policy"].context_rules.model)
    assert all(list(form.fields["groups"].queryset) == [ours["group"]] for form in forms)
    assert "globex-release" not in response.content.decode()


def test_the_group_page_offers_only_the_projects_tools(root_client, ours, theirs):
    response = root_client.get(change_url(ours["group"]))
    assert set(response.context["adminform"].form.fields["tools"].queryset) == ours["tools"]


def test_another_projects_tool_posted_into_the_always_on_set_is_refused(root_client, ours, theirs):
    page = root_client.get(change_url(ours["policy"]))
    data = {**_form_data(page), "always_on": [theirs["tool"].pk]}
    response = root_client.post(change_url(ours["policy"]), data)
    assert response.status_code == 200
    assert "always_on" in response.context["adminform"].form.errors
    assert theirs["tool"] not in ours["policy"].always_on.all()


def test_the_policy_page_saves_when_it_stays_inside_the_project(root_client, ours, theirs):
    page = root_client.get(change_url(ours["policy"]))
    data = {**_form_data(page), "always_on": [tool.pk for tool in ours["tools"]]}
    response = root_client.post(change_url(ours["policy"]), data)
    assert response.status_code == 302
    assert set(ours["policy"].always_on.all()) == ours["tools"]


def test_a_new_policy_form_leaves_the_pickers_out_until_the_policy_exists(root_client, other_project):
    response = root_client.get(admin_url(type(make_policy(other_project)), "add"))
    assert "always_on" not in response.context["adminform"].form.fields
    assert response.context["inline_admin_formsets"] == []


def test_a_label_pointing_at_another_projects_version_is_refused(root_client, project, other_project):
    foreign = make_version(other_project, 1)
    data = {"project": project.pk, "name": "production", "version": foreign.pk}
    response = root_client.post(admin_url(PolicyLabel, "add"), data)
    assert response.status_code == 200
    assert "another project" in str(response.context["adminform"].form.errors["version"])
    assert not PolicyLabel.objects.exists()


def test_the_label_page_offers_only_the_projects_versions(root_client, project, other_project):
    label = make_label(make_version(project, 1))
    ours_v2 = make_version(project, 2)
    make_version(other_project, 1)
    response = root_client.get(change_url(label))
    choices = set(response.context["adminform"].form.fields["version"].queryset)
    assert choices == {label.version, ours_v2}

