"""Writing the demo to the database in bulk: a handful of queries per table, none per row."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from toolscope.policies.models import PolicyLabel, Tool
from toolscope.policies.services.catalog import catalog_upsert
from toolscope.policies.services.serving import policy_served_invalidate
from toolscope.telemetry.demo.catalog import CATALOG
from toolscope.telemetry.demo.generator import SessionRecord, TurnRecord, advertised_tools
from toolscope.telemetry.models import DirtyHour, Project, Session, ToolCall, Turn
from toolscope.telemetry.services.processing import events_apply
from toolscope.telemetry.services.rollups import rollups_rebuild_all

# Processing recomputes each touched session; chunks keep each call's working set small.
SESSIONS_PER_CHUNK = 50


@dataclass(frozen=True)
class StoredCounts:
    tools: int
    sessions: int
    turns: int
    tool_calls: int


def catalog_store(*, project: Project) -> dict[str, Tool]:
    """The demo catalog, registered the way an agent's catalog event would be, plus the per-tool
    settings an operator would have set."""
    specs = {spec.name: spec for spec in CATALOG}
    catalog_upsert(project=project, definitions=[
        {"name": s.name, "description": s.description, "input_schema": s.input_schema, "source": s.source}
        for s in CATALOG
    ])
    tools = {tool.name: tool for tool in Tool.objects.filter(project=project)}
    for name, tool in tools.items():
        tool.scope, tool.requires_approval = specs[name].scope, specs[name].requires_approval
        tool.redact = list(specs[name].redact)
    Tool.objects.bulk_update(tools.values(), ["scope", "requires_approval", "redact"])
    return tools


def sessions_store(*, project: Project, records: Sequence[SessionRecord], tools: dict[str, Tool]) -> StoredCounts:
    """The sessions sent through the same processing as ingested events (tokens, duplicates,
    compaction, budgets), a chunk of sessions at a time, then rolled up."""
    advertised = advertised_tools({name: tool.schema_hash for name, tool in tools.items()})
    for start in range(0, len(records), SESSIONS_PER_CHUNK):
        events = [event for record in records[start:start + SESSIONS_PER_CHUNK]
                  for event in _session_events(record, advertised)]
        events_apply(project=project, events=events)
    rollups_rebuild_all(project_id=project.pk)
    DirtyHour.objects.filter(project=project).delete()
    turns = sum(len(r.turns) for r in records)
    calls = sum(len(t.calls) for r in records for t in r.turns)
    return StoredCounts(tools=len(tools), sessions=len(records), turns=turns, tool_calls=calls)


def _session_events(record: SessionRecord, advertised: list[dict[str, str]]) -> Iterator[dict[str, Any]]:
    sid = record.client_id
    yield {"type": "session", "id": sid, "session_id": sid, "action": "start", "agent_name": record.agent_name,
           "model": record.model, "metadata": record.metadata, "timestamp": record.started_at.isoformat()}
    for turn in record.turns:
        yield _turn_event(record, turn, advertised)
        for call in turn.calls:
            yield {"type": "tool_call", "id": call.client_id, "session_id": sid, "turn_index": turn.index,
                   "call_id": call.call_id, "tool_name": call.tool_name, "arguments": call.arguments,
                   "output": call.output, "status": call.status, "error": call.error,
                   "duration_ms": call.duration_ms, "retries": call.retries, "approval": call.approval,
                   "timestamp": call.started_at.isoformat()}
    yield {"type": "session", "id": f"{sid}:end", "session_id": sid, "action": "end",
           "timestamp": record.ended_at.isoformat()}


def _turn_event(record: SessionRecord, turn: TurnRecord, advertised: list[dict[str, str]]) -> dict[str, Any]:
    event: dict[str, Any] = {
        "type": "turn", "id": turn.client_id, "session_id": record.client_id, "index": turn.index,
        "model": record.model, "timestamp": turn.started_at.isoformat(), "tools": advertised,
        "usage": {"input_tokens": turn.input_tokens, "output_tokens": turn.output_tokens,
                  "cached_tokens": turn.cached_tokens,
                  **({"cache_write_tokens": turn.cache_write_tokens} if turn.cache_write_tokens is not None else {})},
        "latency_ms": turn.latency_ms, "system_prompt_chars": turn.system_prompt_chars,
    }
    if turn.task_message:
        event["task_message"] = turn.task_message
        event["messages"] = [{"role": "user", "content": turn.task_message}]
    return event


def demo_delete(*, project: Project) -> None:
    """Delete a project's telemetry, then the project.

    The high-volume tables go first with only their ids loaded: left to the cascade, Django would
    load every turn and tool call (outputs included) into memory before deleting them. Labels
    protect the versions they point at, so they go before the project.
    """
    ToolCall.objects.filter(project=project).delete()
    Turn.objects.filter(project=project).only("pk").delete()
    Session.objects.filter(project=project).only("pk").delete()
    PolicyLabel.objects.filter(project=project).delete()
    project_id = project.pk
    project.delete()
    policy_served_invalidate(project_id=project_id)
