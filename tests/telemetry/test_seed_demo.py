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
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from toolscope.policies.models import CompactionRule, Tool, ToolVersion
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


def test_the_draft_policy_has_groups_rules_and_a_bash_compaction_rule(seeded):
    policy = Project.objects.get(slug="demo").policy
    assert {"git", "testing", "web", "github"} <= set(policy.groups.values_list("name", flat=True))
    assert policy.context_rules.count() >= 3
    assert all(rule.groups.exists() for rule in policy.context_rules.all())
    rule = CompactionRule.objects.get(policy=policy)
    assert (rule.tools, rule.max_tokens, rule.strategy) == ("bash*", 2000, "head_tail")


def test_sessions_have_three_to_fifteen_turns_with_a_task_on_the_first(seeded):
    assert Session.objects.filter(project__slug="demo").count() == SESSIONS
    sizes = Turn.objects.filter(project__slug="demo").values("session").annotate(n=Count("id"))
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
    assert sorted(key.scopes) == ["ingest", "policy:read"]


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
    # A fixed cost for the project, catalog, policy and one chunk of processing, plus the
    # rollup's per-day queries: never one per session, turn or call.
    assert len(queries) <= 120 + 16 * days < calls
