"""Activity for dashboard tests: a catalog, sessions with turns and tool calls, and their rollups."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from tests import factories
from toolscope.policies.models import Tool, ToolVersion
from toolscope.telemetry.models import Artifact, Project, Session
from toolscope.telemetry.services.rollups import hour_floor, rollups_rebuild

_seq = itertools.count(1)
ADVERTISED = ("read_file", "bash", "grep")
BUDGET = {"system_prompt_tokens": 1000, "schema_tokens": 300, "message_tokens": 50, "tool_output_tokens": 150,
          "estimated_input_tokens": 1500, "input_tokens": 1600, "output_tokens": 40}


def recent(hours: float = 2) -> datetime:
    """A moment inside the default range (the last 7 days)."""
    return timezone.now() - timedelta(hours=hours)


def add_catalog(project: Project) -> dict[str, Tool]:
    """read_file (two schema versions), bash and grep; grep is advertised but never called."""
    tools = {}
    for name, tokens in (("read_file", 120), ("bash", 80), ("grep", 60)):
        schema = {"type": "object", "properties": {"path": {"type": "string"}}}
        tools[name] = Tool.objects.create(project=project, name=name, description=f"The {name} tool.",
                                          input_schema=schema, schema_hash=f"hash-of-{name}", schema_tokens=tokens)
        ToolVersion.objects.create(tool=tools[name], schema_hash=f"hash-of-{name}", input_schema=schema,
                                   description=f"The {name} tool.", schema_tokens=tokens)
    ToolVersion.objects.filter(tool=tools["read_file"]).update(first_seen_at=timezone.now())
    ToolVersion.objects.create(tool=tools["read_file"], schema_hash="old-read_file", description="Reads.",
                               input_schema={"type": "object"}, schema_tokens=90)
    ToolVersion.objects.filter(schema_hash="old-read_file").update(first_seen_at=timezone.now() - timedelta(days=3))
    return tools


def add_session(project: Project, *, at: datetime, agent: str = "coder", model: str = "gpt-4o",
                errors: int = 0, near_window: bool = False, tool: str = "read_file") -> Session:
    """A session of two turns and three calls of `tool` (the last one a duplicate of the first);
    `errors` of the calls fail. Summary fields are set as the workers would set them."""
    session = factories.make_session(project, client_id=f"sess-{next(_seq)}", started_at=at, agent_name=agent,
                                     model=model, turn_count=2, tool_call_count=3, error_count=errors,
                                     near_window=near_window, max_window_share=0.9 if near_window else 0.1)
    turns = [factories.make_turn(session, index, advertised=ADVERTISED, started_at=at + timedelta(seconds=index * 10),
                                 task_message="Fix the test" if index == 0 else "",
                                 messages=[{"role": "user", "content": "Fix the test"}] if index == 0 else [],
                                 near_window=near_window, **BUDGET)
             for index in range(2)]
    artifact = Artifact.objects.create(project=project, original="long " * 50, compacted="long …",
                                       tokens_before=500, tokens_after=20, strategy="head_tail")
    first = factories.make_tool_call(turns[0], tool, started_at=at + timedelta(seconds=1), duration_ms=10,
                                     output="hello", output_tokens=100, arguments={"path": "a.py"},
                                     status="error" if errors > 0 else "ok", error="boom" if errors > 0 else "")
    factories.make_tool_call(turns[0], tool, started_at=at + timedelta(seconds=2), duration_ms=30, output="short",
                             output_tokens=20, artifact=artifact, status="error" if errors > 1 else "ok")
    factories.make_tool_call(turns[1], tool, started_at=at + timedelta(seconds=11), duration_ms=20, output="hello",
                             output_tokens=100, duplicate_of=first, duplicate_tokens=100,
                             placeholder="[same output as before]", status="error" if errors > 2 else "ok")
    return session


def rebuild(project: Project, *moments: datetime) -> None:
    rollups_rebuild(project_id=project.pk, hours=[hour_floor(moment) for moment in moments])


@dataclass
class Activity:
    project: Project
    sessions: list[Session]


def build_activity(project: Project, *, sessions: int = 3, at: datetime | None = None) -> Activity:
    """A catalog and `sessions` sessions one minute apart (the first one with an error), rolled up."""
    at = at or recent()
    add_catalog(project)
    made = [add_session(project, at=at + timedelta(minutes=n), errors=1 if n == 0 else 0) for n in range(sessions)]
    rebuild(project, *(session.started_at for session in made), *(s.started_at + timedelta(minutes=1) for s in made))
    return Activity(project=project, sessions=made)
