"""manage.py seed_demo: a realistic, deterministic demo project, written in bulk."""

import hashlib
import json
import re
from collections import Counter
from datetime import datetime, timedelta
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.db.models import Count
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from toolscope_agent.engine.search import answer_text, search_tools

from toolscope.policies.models import PolicyAuditEntry, PolicyVersion, SearchHistory, Tool, ToolVersion
from toolscope.policies.services.diff import document_diff
from toolscope.policies.services.documents import policy_document_build
from toolscope.policies.services.publish import policy_etag
from toolscope.policies.services.serving import policy_served
from toolscope.telemetry.demo.catalog import CATALOG
from toolscope.telemetry.demo.generator import CONTEXT_WINDOW, sessions_generate
from toolscope.telemetry.demo.repo import LEGACY_PATH, legacy_page, legacy_text, numbered
from toolscope.telemetry.models import Membership, Project, Role, Session, ToolCall, Turn
from toolscope.telemetry.services.api_keys import api_key_verify

ANCHOR = "2026-11-20T10:00:00+00:00"
SESSIONS = 40
KEY_PATTERN = re.compile(r"ts_[0-9a-f]+_[A-Za-z0-9_-]+")


def _seed(*args: str, sessions: int = SESSIONS, anchor: str | None = ANCHOR) -> str:
    out = StringIO()
    options = ["--sessions", str(sessions), *(["--anchor", anchor] if anchor else []), *args]
    call_command("seed_demo", *options, stdout=out)
    return out.getvalue()


def _password(output: str) -> str:
    return re.search(r"Admin login: admin / (\S+)", output).group(1)


def _dump() -> tuple[list, ...]:
    """Everything the demo generates, without database ids or insertion times."""
    demo = {"project__slug": "demo"}
    tools = Tool.objects.filter(**demo).order_by("name").values(
        "name", "description", "input_schema", "source", "schema_hash", "scope", "requires_approval", "redact"
    )
    sessions = Session.objects.filter(**demo).order_by("client_id").values(
        "client_id", "agent_name", "model", "started_at", "ended_at", "metadata"
    )
    turns = Turn.objects.filter(**demo).order_by("client_id").values(
        "session__client_id", "client_id", "index", "model", "started_at", "advertised_set__tools", "input_tokens",
        "output_tokens", "cached_tokens", "latency_ms", "system_prompt_chars", "task_message",
    )
    calls = ToolCall.objects.filter(**demo).order_by("client_id").values(
        "turn__client_id", "client_id", "call_id", "tool_name", "arguments", "output", "status", "error",
        "duration_ms", "retries", "approval", "started_at",
    )
    return list(tools), list(sessions), list(turns), list(calls)


@pytest.fixture
def seeded(db):
    return _seed()


def test_the_catalog_has_about_forty_tools_with_canonical_hashes_and_versions(seeded):
    tools = list(Tool.objects.filter(project__slug="demo"))
    assert 35 <= len(tools) <= 45
    assert {"mcp:github", "mcp:linear", "local"} <= {tool.source for tool in tools}
    for tool in tools:
        canonical = json.dumps(
            {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema},
            sort_keys=True, separators=(",", ":"),
        )
        assert tool.schema_hash == hashlib.sha256(canonical.encode()).hexdigest()
        assert tool.schema_tokens > 0  # priced when the catalog is registered
    versions = ToolVersion.objects.filter(tool__project__slug="demo")
    assert sorted(versions.values_list("schema_hash", flat=True)) == sorted(t.schema_hash for t in tools)


def _served(output: str, label: str) -> dict:
    """The policy an agent with the printed key gets for `label`, over the API."""
    (secret,) = KEY_PATTERN.findall(output)
    response = Client().get("/api/v1/policy", {"label": label}, HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert response.status_code == 200, response.content
    return response.json()


def test_production_serves_v1_with_context_rules_a_tool_search_tool_and_compaction(seeded):
    document = _served(seeded, "production")
    selection, outputs = document["selection"], document["outputs"]
    assert (document["version"], selection["mode"]) == (1, "context_rules")
    assert "tool_search" in selection["always_on"]
    assert {"git", "testing", "web", "github"} <= set(selection["groups"])
    assert len(selection["context_rules"]) >= 3 and all(rule["groups"] for rule in selection["context_rules"])
    assert {rule["tools"] for rule in outputs["compaction"]} == {"bash*", "run_tests*", "read_file"}
    assert outputs["duplicates"] == {"suppress": True}


def test_staging_serves_a_tighter_v2_while_production_stays_on_v1(seeded):
    production, staging = _served(seeded, "production"), _served(seeded, "staging")
    assert (staging["version"], staging["selection"]["mode"]) == (2, "tool_search")
    assert "tool_search" in staging["selection"]["always_on"]
    assert set(staging["selection"]["always_on"]) < set(production["selection"]["always_on"])
    limits = {rule["tools"]: rule["max_tokens"] for rule in production["outputs"]["compaction"]}
    assert all(rule["max_tokens"] < limits[rule["tools"]] for rule in staging["outputs"]["compaction"])


def test_the_draft_differs_from_both_published_versions(seeded):
    project = Project.objects.get(slug="demo")
    draft = policy_document_build(policy=project.policy)
    for number in (1, 2):
        published = PolicyVersion.objects.get(project=project, number=number).document
        assert document_diff(old=published, new=draft)


def test_versions_come_from_the_publish_service_with_the_audit_trail_an_operator_would_leave(seeded):
    project = Project.objects.get(slug="demo")
    versions = PolicyVersion.objects.filter(project=project).order_by("number")
    assert [version.etag for version in versions] == [
        policy_etag(number=version.number, document=version.document) for version in versions
    ]
    assert all(version.published_by.username == "admin" and version.comment for version in versions)
    actions = list(PolicyAuditEntry.objects.filter(project=project).order_by("id").values_list("action", flat=True))
    assert actions == ["draft_changed", "published", "label_moved"] * 2 + ["draft_changed"]


def test_recorded_outputs_are_compacted_under_the_production_policy(seeded):
    calls = ToolCall.objects.filter(project__slug="demo", artifact__isnull=False)
    assert {"bash", "run_tests"} <= set(calls.values_list("tool_name", flat=True))
    for tokens_after, tool_name in calls.values_list("artifact__tokens_after", "tool_name"):
        assert tokens_after <= {"bash": 2000, "run_tests": 1500, "read_file": 4000}[tool_name]


def test_a_few_long_sessions_come_near_the_context_window(seeded):
    sessions = Session.objects.filter(project__slug="demo")
    near = sessions.filter(near_window=True)
    window = Project.objects.get(slug="demo").context_window
    assert 1 <= near.count() <= 0.06 * SESSIONS
    for session in near:
        assert 0.8 < session.max_window_share < 1
        turns = Turn.objects.filter(session=session)
        assert turns.count() > 15
        # The estimate crosses the line too, not only the provider's count.
        assert turns.filter(estimated_input_tokens__gt=0.8 * window, near_window=True).exists()
    assert not sessions.filter(near_window=False, max_window_share__gt=0.8).exists()


def test_sessions_have_three_to_fifteen_turns_with_a_task_on_the_first(seeded):
    assert Session.objects.filter(project__slug="demo").count() == SESSIONS
    sizes = (Turn.objects.filter(project__slug="demo").exclude(session__metadata__task_kind="legacy")
             .values("session").annotate(n=Count("id")))
    assert len(sizes) == SESSIONS - 1  # one long session in forty
    assert all(3 <= row["n"] <= 15 for row in sizes)
    turns = Turn.objects.filter(project__slug="demo")
    assert not turns.filter(index=0, task_message="").exists()
    assert not turns.filter(index__gt=0).exclude(task_message="").exists()


def test_every_turn_advertises_the_whole_catalog(seeded):
    catalog = [{"name": t.name, "schema_hash": t.schema_hash} for t in Tool.objects.filter(project__slug="demo")]
    expected = sorted(catalog, key=lambda tool: tool["name"])
    for advertised in Turn.objects.filter(project__slug="demo").values_list("advertised_set__tools", flat=True):
        assert sorted(advertised, key=lambda tool: tool["name"]) == expected


def test_input_tokens_grow_through_a_session_and_cached_never_exceeds_input(seeded):
    by_session: dict[int, list[Turn]] = {}
    for turn in Turn.objects.filter(project__slug="demo").order_by("session_id", "index"):
        by_session.setdefault(turn.session_id, []).append(turn)
    for turns in by_session.values():
        inputs = [turn.input_tokens for turn in turns]
        assert inputs == sorted(inputs)
        assert inputs[-1] > inputs[0]
        assert all(turn.cached_tokens <= turn.input_tokens for turn in turns)
        assert all(turn.latency_ms > 0 and turn.system_prompt_chars > 0 for turn in turns)


def test_a_few_tools_dominate_the_calls(seeded):
    counts = Counter(ToolCall.objects.filter(project__slug="demo").values_list("tool_name", flat=True))
    top_four = [name for name, _ in counts.most_common(4)]
    assert set(top_four) == {"read_file", "bash", "grep", "edit_file"}
    assert sum(counts[name] for name in top_four) > 0.6 * counts.total()


def test_some_advertised_tools_are_never_called(seeded):
    called = set(ToolCall.objects.filter(project__slug="demo").values_list("tool_name", flat=True))
    catalog = set(Tool.objects.filter(project__slug="demo").values_list("name", flat=True))
    assert len(catalog - called) >= 5


def test_calls_fail_in_every_way_the_model_knows(seeded):
    calls = ToolCall.objects.filter(project__slug="demo")
    assert {"ok", "error", "unknown_tool", "schema_error", "denied"} <= set(calls.values_list("status", flat=True))
    assert not calls.exclude(status="ok").filter(error="").exists()
    catalog = set(Tool.objects.filter(project__slug="demo").values_list("name", flat=True))
    assert not catalog & set(calls.filter(status="unknown_tool").values_list("tool_name", flat=True))
    assert set(calls.filter(status="denied").values_list("approval", flat=True)) == {"denied"}


def test_identical_reads_repeat_within_a_session(seeded):
    repeats = (
        ToolCall.objects.filter(project__slug="demo", tool_name="read_file", status="ok")
        .values("session", "arguments", "output")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
    )
    assert repeats.exists()


def test_shell_outputs_include_multi_kilobyte_logs(seeded):
    outputs = ToolCall.objects.filter(project__slug="demo", tool_name="bash").values_list("output", flat=True)
    assert max(len(output) for output in outputs) > 4000


def test_client_ids_are_derived_from_positions(seeded):
    assert Session.objects.filter(client_id="demo-s0001").exists()
    assert Turn.objects.filter(client_id="demo-s0001-t00", index=0, session__client_id="demo-s0001").exists()
    call = ToolCall.objects.filter(session__client_id="demo-s0001").order_by("client_id").first()
    assert re.fullmatch(r"demo-s0001-t\d\d-c\d+", call.client_id)
    assert call.turn.client_id == call.client_id.rsplit("-", 1)[0]


def test_sessions_fall_in_the_fourteen_days_before_the_anchor(seeded):
    anchor = datetime.fromisoformat(ANCHOR)
    sessions = Session.objects.filter(project__slug="demo")
    assert all(anchor - timedelta(days=14) <= s.started_at < s.ended_at <= anchor for s in sessions)


def test_prints_an_admin_login_that_works_and_a_key_that_verifies(seeded):
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser
    assert admin.is_staff
    assert admin.check_password(_password(seeded))
    assert Membership.objects.get(project__slug="demo", user=admin).role == Role.ADMIN
    (secret,) = KEY_PATTERN.findall(seeded)
    key = api_key_verify(raw=secret)
    assert key.project.slug == "demo"
    assert sorted(key.scopes) == ["ingest", "policy:read", "read"]


def test_the_same_seed_gives_the_same_data(seeded):
    first = _dump()
    _seed("--reset")
    assert _dump() == first


def test_a_different_seed_gives_different_data(seeded):
    first = _dump()
    _seed("--reset", "--seed", "7")
    _, sessions, _, calls = _dump()
    assert sessions != first[1]
    assert calls != first[3]


def test_a_rerun_leaves_the_project_alone_and_only_resets_the_admin_password(seeded):
    project_pk = Project.objects.get(slug="demo").pk
    session_pks = set(Session.objects.values_list("pk", flat=True))
    output = _seed(sessions=5)
    assert "already exists" in output
    assert not KEY_PATTERN.search(output)
    assert Project.objects.get(slug="demo").pk == project_pk
    assert set(Session.objects.values_list("pk", flat=True)) == session_pks
    admin = get_user_model().objects.get(username="admin")
    assert admin.check_password(_password(output))
    assert not admin.check_password(_password(seeded))


def test_reset_deletes_and_recreates_the_project(seeded):
    old_project = Project.objects.get(slug="demo")
    (old_secret,) = KEY_PATTERN.findall(seeded)
    output = _seed("--reset", sessions=5)
    new_project = Project.objects.get(slug="demo")
    assert new_project.pk != old_project.pk
    assert Session.objects.filter(project=new_project).count() == 5
    assert not Session.objects.filter(project_id=old_project.pk).exists()
    assert api_key_verify(raw=old_secret) is None
    assert KEY_PATTERN.search(output)


def test_without_an_anchor_sessions_end_before_now(db):
    _seed(sessions=3, anchor=None)
    assert not Session.objects.filter(ended_at__gt=timezone.now()).exists()


def test_the_number_of_queries_grows_with_chunks_and_days_not_with_rows(db):
    get_user_model().objects.create_superuser("admin", "admin@example.com", "x")
    with CaptureQueriesContext(connection) as queries:
        _seed(sessions=40)  # one processing chunk; rollups rebuilt a day at a time
    calls = ToolCall.objects.count()
    days = len({h.date() for h in Turn.objects.values_list("started_at", flat=True)} |
               {h.date() for h in Session.objects.values_list("started_at", flat=True)})
    assert calls > 300
    # A fixed cost for the project, the catalog, the policy history (three draft edits and two
    # publishes through the services, about 110 queries) and one chunk of processing, plus the
    # rollup's per-day queries: never one per session, turn or call.
    assert len(queries) <= 240 + 16 * days < calls


def test_three_percent_of_sessions_are_long_and_end_between_80_and_100_percent_of_the_window():
    records = sessions_generate(count=300, seed=42, anchor=datetime.fromisoformat(ANCHOR))
    long = [r for r in records if r.metadata["task_kind"] == "legacy"]
    assert len(long) == 9
    for record in long:
        assert 0.8 * CONTEXT_WINDOW < record.turns[-1].input_tokens < CONTEXT_WINDOW
        pages = [c for t in record.turns for c in t.calls if c.arguments.get("path") == LEGACY_PATH]
        assert len({c.arguments["offset"] for c in pages}) == len(pages)  # each page read once: no duplicates
    others = [r for r in records if r.metadata["task_kind"] != "legacy"]
    assert max(r.turns[-1].input_tokens for r in others) < 0.4 * CONTEXT_WINDOW


def test_the_tool_search_tool_answers_from_the_catalog_as_the_sdk_would():
    records = sessions_generate(count=300, seed=42, anchor=datetime.fromisoformat(ANCHOR))
    searches = [c for r in records for t in r.turns for c in t.calls if c.tool_name == "tool_search"]
    catalog = [{"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in CATALOG]
    assert searches
    for call in searches:
        if call.status == "ok":
            hits = search_tools(catalog, call.arguments["query"], top_k=8)
            assert call.output == answer_text(hits) and hits


def test_a_legacy_page_is_what_read_file_shows_for_that_offset_and_limit():
    assert legacy_page(201, 200) == numbered(legacy_text(), offset=201, limit=200)
    assert legacy_page(201, 200).splitlines()[0].split("\t")[0].strip() == "201"


def test_the_demo_serves_its_learned_search_history(seeded):
    project = Project.objects.get(slug="demo")
    history = SearchHistory.objects.get(project=project)
    assert history.sessions == Session.objects.filter(project=project).count()
    assert "tool_search" not in history.tools and len(history.tools) >= 10
    served = policy_served(project_id=project.pk, project_slug=project.slug, label="production")
    document = json.loads(served.body)
    assert document["selection"]["tool_search"]["ranker"] == "bm25f-2"
    assert document["search_history"]["revision"] == history.revision and served.etag.endswith(f'-h{history.revision}"')
