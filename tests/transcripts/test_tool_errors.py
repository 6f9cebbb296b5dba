"""Tool errors from every format: the project's error patterns classify a tool message's text when
nothing flags it; an explicit flag wins; unflagged error text is counted apart."""

from __future__ import annotations

import pytest
from django.contrib.admin import site as admin_site
from django.core.exceptions import ValidationError

from tests.api.conftest import api, ingest_key  # noqa: F401  (fixtures)
from tests.transcripts.support import load_fixture
from toolscope.telemetry.error_patterns import default_error_patterns, validate_error_patterns
from toolscope.telemetry.models import IngestBatch, Project, Session, ToolCall
from toolscope.telemetry.services.processing import batch_process

URL = "/api/v1/transcripts"
FORMATS = ["openai_chat", "anthropic", "openai_responses"]
# (call, status, rule, unflagged) for the MCP session, whatever the format.
EXPECTED = [
    ("01", "ok", "", False),
    ("02", "error", "pattern: MCP tool error", False),  # pydantic validation, as FastMCP words it
    ("03", "error", "pattern: MCP tool error", False),  # a ToolError
    ("04", "error", "pattern: MCP error", False),  # JSON-RPC -32602
    ("05", "ok", "", False),
    ("06", "ok", "pattern: error text", True),  # "Error: …", flagged by nothing
    ("07", "ok", "pattern: error text", True),  # "Database error: …"
    ("08", "error", "pattern: MCP error", False),  # JSON-RPC -32603
]


def _post_and_process(api, body: dict) -> None:  # noqa: F811  (api is a fixture)
    response = api.post_json(URL, body)
    assert response.status_code == 202, response.json()
    for batch_id in IngestBatch.objects.values_list("pk", flat=True):
        batch_process(batch_id=batch_id)


def _calls(session_id: str) -> list[tuple[str, str, str, bool]]:
    rows = ToolCall.objects.filter(session__client_id=session_id).order_by("turn_index")
    return [(row.call_id[-2:], row.status, row.error_rule, row.error_text_unflagged) for row in rows]


@pytest.mark.django_db
@pytest.mark.parametrize("name", FORMATS)
def test_mcp_failures_end_as_error_with_their_rule_in_every_format(api, name):  # noqa: F811
    body = load_fixture(f"mcp_errors_{name}.json")
    _post_and_process(api, body)

    assert _calls(body["session_id"]) == EXPECTED
    session = Session.objects.get(client_id=body["session_id"])
    assert session.error_count == 4  # unflagged error text is not an error of the session


@pytest.mark.django_db
def test_an_explicit_is_error_wins_over_the_patterns(api):  # noqa: F811
    body = load_fixture("mcp_errors_anthropic.json")
    results = [block for m in body["messages"] if m["role"] == "user" and isinstance(m["content"], list)
               for block in m["content"]]
    results[3]["is_error"] = False  # "MCP error -32602: …", but the host says it is not an error
    results[0]["is_error"] = True  # an ordinary commit log, but the host says it failed
    _post_and_process(api, body)

    calls = _calls(body["session_id"])
    assert calls[3] == ("04", "ok", "is_error flag", False)
    assert calls[0] == ("01", "error", "is_error flag", False)


@pytest.mark.django_db
def test_an_ingest_event_with_a_status_keeps_it_and_one_without_is_classified(api):  # noqa: F811
    events = [
        {"type": "tool_call", "id": f"e{i}", "session_id": "ingest-errors", "turn_index": 0,
         "tool_name": "read_query", "output": "MCP error -32603: no such table: nowhere", **extra}
        for i, extra in enumerate([{"status": "ok"}, {}])
    ]
    response = api.post_json("/api/v1/ingest", {"events": events})
    assert response.status_code == 202, response.json()
    for batch_id in IngestBatch.objects.values_list("pk", flat=True):
        batch_process(batch_id=batch_id)

    rows = dict(ToolCall.objects.values_list("client_id", "status"))
    rules = dict(ToolCall.objects.values_list("client_id", "error_rule"))
    assert (rows["e0"], rules["e0"]) == ("ok", "status field")
    assert (rows["e1"], rules["e1"]) == ("error", "pattern: MCP error")


@pytest.mark.django_db
def test_the_patterns_are_the_projects_own(api, project):  # noqa: F811
    project.tool_error_patterns = [{"name": "sqlite", "regex": r"UNIQUE constraint failed", "kind": "error"}]
    project.full_clean()
    project.save()
    body = load_fixture("mcp_errors_openai_chat.json")
    _post_and_process(api, body)

    statuses = {call: (status, rule) for call, status, rule, _ in _calls(body["session_id"])}
    assert statuses["07"] == ("error", "pattern: sqlite")
    assert statuses["04"] == ("ok", "")  # the defaults are replaced, not added to


@pytest.mark.parametrize(("regex", "reason"), [
    (r"^(?=Error)", "RE2"),  # a lookahead: RE2 cannot compile it
    (r"(\w+)\1", "RE2"),  # a back-reference
    (r"^(a+)+$", "nested quantifiers"),  # exponential in a backtracking engine
    (r"^Error(", "not a valid regular expression"),
])
def test_a_pattern_that_is_not_re2_safe_is_refused(regex, reason):
    patterns = [*default_error_patterns(), {"name": "bad", "regex": regex, "kind": "error"}]

    with pytest.raises(ValidationError, match=reason):
        validate_error_patterns(patterns)


@pytest.mark.django_db
def test_saving_a_project_through_its_form_refuses_an_unsafe_pattern(project):
    project.tool_error_patterns = [{"name": "bad", "regex": r"(?<=x)Error", "kind": "error"}]

    with pytest.raises(ValidationError, match="Error pattern 1 \\(bad\\)"):
        project.full_clean()


@pytest.mark.parametrize("patterns", [
    {"name": "x"},
    [{"name": "x", "regex": "^E", "kind": "fatal"}],
    [{"name": "", "regex": "^E"}],
    [{"name": "x", "regex": "^E", "extra": 1}],
])
def test_a_malformed_pattern_list_is_refused(patterns):
    with pytest.raises(ValidationError):
        validate_error_patterns(patterns)


def test_the_defaults_are_valid():
    validate_error_patterns(default_error_patterns())
    assert Project._meta.get_field("tool_error_patterns").default() == default_error_patterns()


@pytest.mark.django_db
def test_the_project_admin_edits_the_patterns_and_refuses_an_unsafe_one(project, rf):
    form_class = admin_site._registry[Project].get_form(rf.get("/"), project, change=True)
    data = {"slug": project.slug, "name": project.name, "encoding": project.encoding,
            "context_window": project.context_window, "retention_days": project.retention_days,
            "rollup_retention_days": project.rollup_retention_days}
    bad = form_class(data={**data, "tool_error_patterns": '[{"name": "x", "regex": "(a|a)+$", "kind": "error"}]'},
                     instance=project)
    good = form_class(data={**data, "tool_error_patterns": '[{"name": "x", "regex": "^Oops", "kind": "error"}]'},
                      instance=project)

    assert not bad.is_valid()
    assert "tool_error_patterns" in bad.errors
    assert good.is_valid(), good.errors
