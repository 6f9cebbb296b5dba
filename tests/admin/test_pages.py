"""Every admin page an operator opens answers, and shows the data it is about."""

from __future__ import annotations

import re

import pytest
from django.apps import apps
from django.contrib import admin
from django.utils.html import escape

from tests import factories
from tests.admin.builders import make_everything
from tests.admin.conftest import admin_url, change_url
from toolscope.policies.models import PolicyAuditEntry, PolicyLabel, PolicyVersion, Tool, ToolGroup
from toolscope.telemetry.models import (
    AdvertisedSet,
    AgentTools,
    ApiKey,
    Artifact,
    IngestBatch,
    Membership,
    Project,
    QuarantinedEvent,
    Session,
    ToolCall,
    Turn,
)

OUR_APPS = {"telemetry", "policies"}
ADMIN_MODELS = sorted(
    (model for model in admin.site._registry if model._meta.app_label in OUR_APPS),
    key=lambda model: model._meta.label,
)
# Rows that ingest, processing or publishing write; the admin only shows them.
NOT_ADDABLE = {
    Session, Turn, AdvertisedSet, AgentTools, ToolCall, Artifact, IngestBatch, QuarantinedEvent, Tool, PolicyVersion,
    PolicyAuditEntry,
}
# Edited on the page of their tool or policy.
SHOWN_INLINE = {"policies.ToolVersion", "policies.ContextRule", "policies.CompactionRule", "telemetry.ModelPrice"}
# Derived by the workers and read by the dashboard; nothing for an operator to look at row by row.
# Computed from other rows, and shown on the dashboard (simulations, a tool's learned history).
DERIVED = {"telemetry.ToolHourly", "telemetry.ToolDaily", "telemetry.ProjectHourly", "telemetry.DirtyHour",
           "policies.SearchHistory", "policies.ToolEmbedding", "policies.Simulation", "policies.SimulationTurns",
           "policies.Recommendation"}


def _label(model) -> str:
    return model._meta.label


@pytest.fixture
def rows(project):
    return make_everything(project)


def test_every_model_of_the_apps_has_an_admin_or_is_edited_inline():
    every_model = {_label(model) for app in OUR_APPS for model in apps.get_app_config(app).get_models()}
    assert {_label(model) for model in ADMIN_MODELS} == every_model - SHOWN_INLINE - DERIVED


def test_the_site_calls_itself_toolscope_admin(root_client):
    response = root_client.get("/admin/")
    assert response.status_code == 200
    assert admin.site.site_header == "toolscope admin"
    assert "<title>" in response.content.decode()
    assert "toolscope admin" in response.content.decode()


@pytest.mark.parametrize("model", ADMIN_MODELS, ids=_label)
def test_the_changelist_links_to_the_row(root_client, rows, model):
    response = root_client.get(admin_url(model, "changelist"))
    assert response.status_code == 200
    assert change_url(rows[model]) in response.content.decode()


@pytest.mark.parametrize("model", ADMIN_MODELS, ids=_label)
def test_the_change_page_shows_the_row(root_client, rows, model):
    response = root_client.get(change_url(rows[model]))
    assert response.status_code == 200
    assert escape(str(rows[model])) in response.content.decode()


@pytest.mark.parametrize("model", ADMIN_MODELS, ids=_label)
def test_the_add_page_opens_only_for_rows_operators_create(root_client, rows, model):
    response = root_client.get(admin_url(model, "add"))
    assert response.status_code == (403 if model in NOT_ADDABLE else 200)


def test_a_project_cannot_be_deleted_through_the_admin(root_client, rows, project):
    response = root_client.post(admin_url(Project, "delete", project.pk), {"post": "yes"})
    assert response.status_code == 403
    assert Project.objects.filter(pk=project.pk).exists()


def test_every_link_on_the_project_page_opens_a_list_of_that_project(root_client, rows, project):
    content = root_client.get(change_url(project)).content.decode()
    links = re.findall(rf'href="([^"]*\?project(?:__id__exact)?={project.pk})"', content)
    assert len(links) == 7
    for link in links:
        response = root_client.get(link.replace("&amp;", "&"))
        assert response.status_code == 200, link  # an unknown filter would redirect with ?e=1


def test_a_session_links_to_its_turns_and_tool_calls(root_client, rows):
    session = rows[Session]
    content = root_client.get(change_url(session)).content.decode()
    assert f"{admin_url(Turn, 'changelist')}?session__id__exact={session.pk}" in content
    assert f"{admin_url(ToolCall, 'changelist')}?session__id__exact={session.pk}" in content


def test_the_tool_call_list_filtered_by_session_shows_only_its_calls(root_client, rows, project):
    other_call = factories.make_tool_call(factories.make_turn(factories.make_session(project)), "bash")
    session = rows[Session]
    response = root_client.get(admin_url(ToolCall, "changelist"), {"session__id__exact": session.pk})
    content = response.content.decode()
    assert change_url(rows[ToolCall]) in content
    assert change_url(other_call) not in content


# What an operator would type into each changelist's search box to find the row.
SEARCH_TERM = {
    "telemetry.Project": lambda rows: rows[Project].slug,
    "telemetry.Membership": lambda rows: rows[Membership].user.username,
    "telemetry.ApiKey": lambda rows: rows[ApiKey].prefix,
    "telemetry.Session": lambda rows: rows[Session].client_id,
    "telemetry.Turn": lambda rows: rows[Turn].client_id,
    "telemetry.AdvertisedSet": lambda rows: rows[AdvertisedSet].digest,
    "telemetry.AgentTools": lambda rows: rows[AgentTools].agent_name,
    "telemetry.ToolCall": lambda rows: rows[ToolCall].client_id,
    "telemetry.Artifact": lambda rows: rows[ToolCall].client_id,
    "telemetry.QuarantinedEvent": lambda rows: rows[QuarantinedEvent].client_id,
    "policies.Tool": lambda rows: rows[Tool].name,
    "policies.Policy": lambda rows: rows[Project].slug,
    "policies.ToolGroup": lambda rows: rows[ToolGroup].name,
    "policies.PolicyVersion": lambda rows: rows[PolicyVersion].etag,
    "policies.PolicyLabel": lambda rows: rows[PolicyLabel].name,
}
SEARCHABLE = [model for model in ADMIN_MODELS if _label(model) in SEARCH_TERM]


def test_every_searchable_changelist_has_a_search_term_here():
    searchable = {_label(model) for model in ADMIN_MODELS if admin.site._registry[model].search_fields}
    assert searchable == set(SEARCH_TERM)


@pytest.mark.parametrize("model", SEARCHABLE, ids=_label)
def test_searching_finds_the_row_and_only_matching_rows(root_client, rows, model):
    term = SEARCH_TERM[_label(model)](rows)
    found = root_client.get(admin_url(model, "changelist"), {"q": term}).content.decode()
    missed = root_client.get(admin_url(model, "changelist"), {"q": "no-such-row"}).content.decode()
    assert change_url(rows[model]) in found
    assert change_url(rows[model]) not in missed


def test_the_project_page_picks_members_with_an_autocomplete(root_client, rows, project):
    content = root_client.get(change_url(project)).content.decode()
    assert 'name="memberships-0-user"' in content
    assert "admin-autocomplete" in content
    response = root_client.get(
        "/admin/autocomplete/",
        {"app_label": "telemetry", "model_name": "membership", "field_name": "user", "term": "roo"},
    )
    assert [result["text"] for result in response.json()["results"]] == ["root"]
