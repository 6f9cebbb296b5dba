"""The catalog upsert of one event is set-based (issue 24, item 6): one OTLP turn carrying 3,000
tool definitions (3 MB) spent over 120 s in catalog_upsert, whose bulk_update sent one CASE WHEN
branch per row and column (3,000 x 4) that PostgreSQL evaluated for every row. Whatever the
number of definitions, an event now costs a handful of statements, and an unchanged catalog (an
agent advertises its catalog every turn) sends no schema to the database.
bench/catalog_upsert.py measures the time."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.admin.builders import make_policy
from toolscope.policies.models import Tool, ToolVersion
from toolscope.policies.services.catalog import catalog_upsert

TOOLS = 3000


def definitions(tag: str, source: str = "agent-a") -> list[dict]:
    padding = "Looks the record up and returns it. " * 20
    return [{"name": f"tool_{n:05d}", "source": source, "description": f"{tag} tool {n}. {padding}",
             "input_schema": {"type": "object", "properties": {"id": {"type": "string", "description": f"id {n}"}}}}
            for n in range(TOOLS)]


def sent_bytes(queries: CaptureQueriesContext) -> int:
    return sum(len(query["sql"]) for query in queries.captured_queries)


@pytest.fixture
def first(project):
    tools = definitions("v1")
    assert len(json.dumps(tools)) > 2_500_000
    return tools


def test_3000_definitions_take_a_handful_of_statements(project, first, django_assert_max_num_queries):
    # Savepoint and release included: the upsert is one transaction inside the test's.
    with django_assert_max_num_queries(5):
        results = catalog_upsert(project=project, definitions=first)
    assert {row["status"] for row in results} == {"created"} and len(results) == TOOLS
    assert Tool.objects.filter(project=project).count() == ToolVersion.objects.filter(tool__project=project).count() \
        == TOOLS

    with django_assert_max_num_queries(5), CaptureQueriesContext(connection) as unchanged:
        results = catalog_upsert(project=project, definitions=definitions("v1"))
    assert {row["status"] for row in results} == {"unchanged"}
    # No schema goes back to the database: ids and a time, not 3 MB of definitions.
    assert sent_bytes(unchanged) < 100_000
    assert ToolVersion.objects.filter(tool__project=project).count() == TOOLS

    with django_assert_max_num_queries(5):
        results = catalog_upsert(project=project, definitions=definitions("v2"))
    assert {row["status"] for row in results} == {"updated"}
    tool = Tool.objects.get(project=project, name="tool_02999")
    assert tool.description.startswith("v2 tool 2999.") and tool.versions.count() == 2
    assert tool.input_schema == definitions("v2")[-1]["input_schema"]
    assert ToolVersion.objects.filter(tool__project=project).count() == 2 * TOOLS


def test_a_new_source_of_3000_known_names_joins_their_policy_sets_in_a_few_statements(
        project, first, django_assert_max_num_queries):
    catalog_upsert(project=project, definitions=first)
    policy = make_policy(project, always_on=Tool.objects.filter(project=project, name__lt="tool_00100"))
    Tool.objects.filter(project=project, name="tool_00001").update(requires_approval=True)
    with django_assert_max_num_queries(8):
        results = catalog_upsert(project=project, definitions=definitions("v1", source="agent-b"))
    assert {row["status"] for row in results} == {"created"}
    assert policy.always_on.filter(source="agent-b").count() == 100  # each joined its sibling's set
    assert Tool.objects.get(project=project, name="tool_00001", source="agent-b").requires_approval
    assert Tool.objects.filter(project=project).count() == 2 * TOOLS
