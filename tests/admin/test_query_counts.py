"""Changelists run the same number of queries for 3 rows as for 30: no query per row."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests import factories
from tests.admin import builders
from tests.admin.conftest import admin_url
from toolscope.policies.models import Policy, PolicyLabel, PolicyVersion, Tool, ToolGroup
from toolscope.telemetry.models import (
    AdvertisedSet,
    AgentTools,
    ApiKey,
    Artifact,
    IngestBatch,
    Membership,
    Project,
    Session,
    ToolCall,
    Turn,
)


def _tool_call(project: Project) -> None:
    turn = factories.make_turn(factories.make_session(project))
    factories.make_tool_call(turn, builders.make_tool(project).name)


def _label(project: Project) -> None:
    # Labels are unique per project, so each gets its own.
    other = factories.make_project()
    builders.make_label(builders.make_version(other))


def _group(project: Project) -> None:
    builders.make_group(builders.make_policy(factories.make_project()), tools=[builders.make_tool(project)])


# One new row of the model (with its own related rows) per call.
ADD_ROW: dict[type, Callable[[Project], object]] = {
    Project: lambda project: factories.make_project(),
    Membership: lambda project: factories.make_member(project),
    ApiKey: lambda project: factories.make_key(project, name="key"),
    Session: lambda project: factories.make_session(project),
    Turn: lambda project: factories.make_turn(factories.make_session(project)),
    AdvertisedSet: lambda project: factories.make_turn(
        factories.make_session(project), advertised=[f"tool-{factories.next_number()}"]
    ).advertised_set,
    AgentTools: lambda project: AgentTools.objects.create(
        project=project, agent_name=f"agent-{factories.next_number()}", since=timezone.now(),
        advertised_set=factories.make_turn(factories.make_session(project), advertised=["read_file"]).advertised_set),
    ToolCall: _tool_call,
    Artifact: builders.make_artifact,
    IngestBatch: lambda project: builders.make_batch(project, {"events": [{"n": 1}]}),
    Tool: builders.make_tool,
    ToolGroup: _group,
    Policy: lambda project: builders.make_policy(factories.make_project()),
    PolicyVersion: builders.make_version,
    PolicyLabel: _label,
}


def _changelist_queries(client, model) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(admin_url(model, "changelist"))
    assert response.status_code == 200
    return len(queries)


@pytest.mark.parametrize("model", list(ADD_ROW), ids=lambda model: model._meta.label)
def test_the_changelist_query_count_does_not_grow_with_rows(root_client, project, model):
    add_row = ADD_ROW[model]
    for _ in range(3):
        add_row(project)
    _changelist_queries(root_client, model)  # warm the per-process caches (content types)
    with_3 = _changelist_queries(root_client, model)
    for _ in range(27):
        add_row(project)
    assert model.objects.count() >= 30
    assert _changelist_queries(root_client, model) == with_3
