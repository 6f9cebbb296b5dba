"""A small hand-built dataset whose rollups are known by hand.

Hour H0 (2026-11-20 10:00 UTC), session s1 started in it:
  turn 0  advertises read_file, bash, grep   read_file x4: 10/20/30/40 ms, one error, one duplicate
                                             of the first (100 tokens), one compacted 1000 -> 200
  turn 1  advertises read_file, bash, grep   bash, denied, no duration
  turn 2  advertises read_file, bash         bash 7 ms; web_search (never advertised), unknown tool
Hour H1: turn 3 advertises read_file, bash; read_file 5 ms.
Hour H0 - 1h: session s2 started, nothing else.
Catalog: read_file 100 tokens, its advertised schema version 120; bash 50, no version; grep unknown.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests import factories
from toolscope.policies.models import Tool, ToolVersion
from toolscope.telemetry.models import Artifact

H0 = datetime(2026, 11, 20, 10, tzinfo=UTC)
H1 = H0 + timedelta(hours=1)
MINUTE = timedelta(minutes=1)
EVERY_TOOL = ("read_file", "bash", "grep")


def at(hour: datetime, minute: int) -> datetime:
    return hour + minute * MINUTE


def add_catalog(project) -> None:
    read_file = Tool.objects.create(
        project=project, name="read_file", schema_hash="hash-of-read_file", schema_tokens=100
    )
    ToolVersion.objects.create(tool=read_file, schema_hash="hash-of-read_file", schema_tokens=120)
    ToolVersion.objects.create(tool=read_file, schema_hash="older-hash", schema_tokens=90)
    Tool.objects.create(project=project, name="bash", schema_hash="hash-of-bash", schema_tokens=50)


def add_turns(session):
    budgets = [
        {"system_prompt_tokens": 100, "schema_tokens": 300, "message_tokens": 10, "tool_output_tokens": 0,
         "estimated_input_tokens": 410, "input_tokens": 400, "output_tokens": 20},
        {"system_prompt_tokens": 100, "schema_tokens": 300, "message_tokens": 20, "tool_output_tokens": 50,
         "estimated_input_tokens": 470, "input_tokens": None, "output_tokens": 30},
        {"system_prompt_tokens": 100, "schema_tokens": 200, "message_tokens": None, "tool_output_tokens": 80,
         "estimated_input_tokens": 380, "input_tokens": 390, "output_tokens": 40, "near_window": True},
    ]
    advertised = [EVERY_TOOL, EVERY_TOOL, ("read_file", "bash")]
    return [
        factories.make_turn(session, index, advertised=tools, started_at=at(H0, 5 + index), **budget)
        for index, (tools, budget) in enumerate(zip(advertised, budgets, strict=True))
    ]


def add_calls(turns) -> None:
    t0, t1, t2 = turns
    compacted = Artifact.objects.create(
        project=t0.project, original="long", compacted="short", tokens_before=1000, tokens_after=200, strategy="head"
    )
    first = factories.make_tool_call(t0, "read_file", started_at=at(H0, 6), duration_ms=10, output_tokens=100)
    factories.make_tool_call(t0, "read_file", started_at=at(H0, 7), duration_ms=20, output_tokens=200,
                             artifact=compacted)
    factories.make_tool_call(t0, "read_file", started_at=at(H0, 8), duration_ms=30, status="error")
    factories.make_tool_call(t0, "read_file", started_at=at(H0, 9), duration_ms=40, output_tokens=300,
                             duplicate_of=first, duplicate_tokens=100)
    factories.make_tool_call(t1, "bash", started_at=at(H0, 10), status="denied", output_tokens=50)
    factories.make_tool_call(t2, "bash", started_at=at(H0, 11), duration_ms=7, output_tokens=5)
    factories.make_tool_call(t2, "web_search", started_at=at(H0, 12), status="unknown_tool")


def build_dataset(project) -> None:
    add_catalog(project)
    s1 = factories.make_session(project, started_at=at(H0, 1))
    add_calls(add_turns(s1))
    t3 = factories.make_turn(s1, 3, advertised=("read_file", "bash"), started_at=at(H1, 2), estimated_input_tokens=500)
    factories.make_tool_call(t3, "read_file", started_at=at(H1, 3), duration_ms=5, output_tokens=1)
    factories.make_session(project, started_at=at(H0 - timedelta(hours=1), 30))

