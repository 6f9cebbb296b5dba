"""Writing the demo to the database in bulk: a handful of queries per table, none per row."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from django.db import models

from toolscope.policies.models import (
    CompactionRule,
    ContextRule,
    Policy,
    Tool,
    ToolGroup,
    ToolVersion,
)
from toolscope.policies.services.catalog import tool_schema_hash
from toolscope.telemetry.demo.catalog import ALWAYS_ON, CATALOG, COMPACTION, CONTEXT_RULES, GROUPS
from toolscope.telemetry.demo.generator import SessionRecord, TurnRecord, advertised_tools
from toolscope.telemetry.models import AdvertisedSet, Project, Session, ToolCall, Turn
from toolscope.telemetry.services.advertised import advertised_sets_resolve

BATCH_SIZE = 500


@dataclass(frozen=True)
class StoredCounts:
    tools: int
    sessions: int
    turns: int
    tool_calls: int


def _require_pks(objs: Sequence[models.Model]) -> None:
    # PostgreSQL and SQLite >= 3.35 return ids from a bulk insert; the rows below depend on them.
    if any(obj.pk is None for obj in objs):
        raise RuntimeError("The database did not return primary keys from bulk_create.")


def catalog_store(*, project: Project) -> dict[str, Tool]:
    """The demo catalog as Tool rows, each with its first ToolVersion."""
    tools = []
    for spec in CATALOG:
        schema_hash = tool_schema_hash(name=spec.name, description=spec.description, input_schema=spec.input_schema)
        tools.append(Tool(
            project=project, name=spec.name, description=spec.description, input_schema=spec.input_schema,
            source=spec.source, schema_hash=schema_hash, scope=spec.scope,
            requires_approval=spec.requires_approval, redact=list(spec.redact),
        ))
    Tool.objects.bulk_create(tools)
    _require_pks(tools)
    ToolVersion.objects.bulk_create([
        ToolVersion(tool=tool, schema_hash=tool.schema_hash, description=tool.description,
                    input_schema=tool.input_schema)
        for tool in tools
    ])
    return {tool.name: tool for tool in tools}


def policy_store(*, policy: Policy, tools: dict[str, Tool]) -> None:
    """A draft policy worth looking at: always-on set, groups, context rules, one compaction rule."""
    policy.always_on.set([tools[name] for name in ALWAYS_ON])
    groups = ToolGroup.objects.bulk_create(
        [ToolGroup(policy=policy, name=name, description=f"{name} tools") for name in GROUPS]
    )
    _require_pks(groups)
    by_name = {group.name: group for group in groups}
    ToolGroup.tools.through.objects.bulk_create([
        ToolGroup.tools.through(toolgroup=by_name[group], tool=tools[tool])
        for group, names in GROUPS.items() for tool in names
    ])
    rules = ContextRule.objects.bulk_create([
        ContextRule(policy=policy, position=position, name=name, keywords=list(keywords), regex=regex)
        for position, (name, keywords, regex, _) in enumerate(CONTEXT_RULES)
    ])
    _require_pks(rules)
    ContextRule.groups.through.objects.bulk_create([
        ContextRule.groups.through(contextrule=rule, toolgroup=by_name[group])
        for rule, (_, _, _, group_names) in zip(rules, CONTEXT_RULES, strict=True) for group in group_names
    ])
    tools_glob, max_tokens, strategy = COMPACTION
    CompactionRule.objects.create(policy=policy, tools=tools_glob, max_tokens=max_tokens, strategy=strategy)


def sessions_store(*, project: Project, records: Sequence[SessionRecord], tools: dict[str, Tool]) -> StoredCounts:
    sessions = Session.objects.bulk_create(
        [Session(project=project, client_id=r.client_id, agent_name=r.agent_name, model=r.model,
                 started_at=r.started_at, ended_at=r.ended_at, metadata=r.metadata) for r in records],
        batch_size=BATCH_SIZE,
    )
    _require_pks(sessions)
    (advertised,) = advertised_sets_resolve(
        project=project, lists=[advertised_tools({name: tool.schema_hash for name, tool in tools.items()})]
    )
    turns = Turn.objects.bulk_create(
        [_turn(project, session, record, turn, advertised)
         for session, record in zip(sessions, records, strict=True) for turn in record.turns],
        batch_size=BATCH_SIZE,
    )
    _require_pks(turns)
    calls = ToolCall.objects.bulk_create(_calls(project, sessions, records, turns), batch_size=BATCH_SIZE)
    return StoredCounts(tools=len(tools), sessions=len(sessions), turns=len(turns), tool_calls=len(calls))


def _turn(
    project: Project, session: Session, record: SessionRecord, turn: TurnRecord, advertised: AdvertisedSet | None
) -> Turn:
    return Turn(
        project=project, session=session, client_id=turn.client_id, index=turn.index, model=record.model,
        started_at=turn.started_at, advertised_set=advertised, input_tokens=turn.input_tokens,
        output_tokens=turn.output_tokens, cached_tokens=turn.cached_tokens, latency_ms=turn.latency_ms,
        system_prompt_chars=turn.system_prompt_chars, task_message=turn.task_message,
    )


def _calls(
    project: Project, sessions: list[Session], records: Sequence[SessionRecord], turns: list[Turn]
) -> Iterator[ToolCall]:
    # Turns were created in record order, so walking the records again pairs each with its row.
    turn_rows = iter(turns)
    for session, record in zip(sessions, records, strict=True):
        for turn_record in record.turns:
            turn = next(turn_rows)
            for call in turn_record.calls:
                yield ToolCall(
                    project=project, session=session, turn=turn, turn_index=turn.index,
                    client_id=call.client_id, call_id=call.call_id, tool_name=call.tool_name,
                    arguments=call.arguments, output=call.output, status=call.status, error=call.error,
                    duration_ms=call.duration_ms, retries=call.retries, approval=call.approval,
                    started_at=call.started_at,
                )


def demo_delete(*, project: Project) -> None:
    """Delete a project's telemetry, then the project.

    The high-volume tables go first with only their ids loaded: left to the cascade, Django would
    load every turn and tool call (outputs included) into memory before deleting them.
    """
    ToolCall.objects.filter(project=project).delete()
    Turn.objects.filter(project=project).only("pk").delete()
    Session.objects.filter(project=project).only("pk").delete()
    project.delete()
