"""Builders for the catalog, policy and raw rows the shared factories do not make."""

from __future__ import annotations

import itertools

from tests import factories
from toolscope.policies.models import (
    CompactionRule,
    ContextRule,
    Policy,
    PolicyAuditEntry,
    PolicyLabel,
    PolicyVersion,
    Tool,
    ToolGroup,
    ToolVersion,
)
from toolscope.telemetry.models import AgentTools, Artifact, IngestBatch, Project, QuarantinedEvent

_seq = itertools.count(1)


def make_tool(project: Project, name: str | None = None, **extra) -> Tool:
    name = name or f"tool_{next(_seq)}"
    return Tool.objects.create(
        project=project,
        name=name,
        description=extra.pop("description", f"The {name} tool."),
        input_schema=extra.pop("input_schema", {"type": "object", "properties": {"path": {"type": "string"}}}),
        schema_hash=extra.pop("schema_hash", f"{next(_seq):064x}"),
        schema_tokens=extra.pop("schema_tokens", 42),
        **extra,
    )


def make_tool_version(tool: Tool) -> ToolVersion:
    return ToolVersion.objects.create(
        tool=tool, schema_hash=tool.schema_hash, input_schema=tool.input_schema, schema_tokens=42
    )


def make_policy(project: Project, always_on=()) -> Policy:
    policy = Policy.objects.create(project=project)
    policy.always_on.set(always_on)
    return policy


def make_group(policy: Policy, name: str | None = None, tools=()) -> ToolGroup:
    group = ToolGroup.objects.create(policy=policy, name=name or f"group-{next(_seq)}")
    group.tools.set(tools)
    return group


def make_context_rule(policy: Policy, groups=(), **extra) -> ContextRule:
    rule = ContextRule.objects.create(
        policy=policy, name=extra.pop("name", f"rule {next(_seq)}"), keywords=["test"], **extra
    )
    rule.groups.set(groups)
    return rule


def make_compaction_rule(policy: Policy) -> CompactionRule:
    return CompactionRule.objects.create(policy=policy, tools="bash*", max_tokens=2000)


def make_version(project: Project, number: int | None = None) -> PolicyVersion:
    number = number or next(_seq)
    document = {"project": project.slug, "version": number, "selection": {"mode": "all"}}
    return PolicyVersion.objects.create(project=project, number=number, document=document, etag=f"etag-{number}")


def make_label(version: PolicyVersion, name: str = "production") -> PolicyLabel:
    return PolicyLabel.objects.create(project=version.project, name=name, version=version)


def make_artifact(project: Project) -> Artifact:
    return Artifact.objects.create(
        project=project, original="line\n" * 50, compacted="line\n…", tokens_before=100, tokens_after=4,
        strategy="head_tail",
    )


def make_batch(project: Project, payload=None) -> IngestBatch:
    payload = payload or {"events": [{"type": "turn", "client_id": f"turn-{next(_seq)}"}]}
    return IngestBatch.objects.create(project=project, payload=payload, event_count=len(payload["events"]))


def make_quarantined(batch: IngestBatch) -> QuarantinedEvent:
    event = {"type": "turn", "id": f"poison-{next(_seq)}", "session_id": "s", "index": 2**40}
    return QuarantinedEvent.objects.create(
        project=batch.project, batch=batch, event_type="turn", client_id=event["id"], event=event,
        reason="DataError: value \"…\" is out of range for type integer (SQLSTATE 22003)",
    )


def make_everything(project: Project) -> dict[type, object]:
    """One row of every model an operator sees in the admin, all in `project`."""
    session = factories.make_session(project, agent_name="coder", model="gpt-4o")
    turn = factories.make_turn(session)
    artifact = make_artifact(project)
    tool = make_tool(project, "read_file")
    make_tool_version(tool)
    policy = make_policy(project, always_on=[tool])
    group = make_group(policy, "files", tools=[tool])
    make_context_rule(policy, groups=[group])
    make_compaction_rule(policy)
    version = make_version(project, 1)
    rows = [
        project,
        factories.make_member(project),
        factories.make_key(project).api_key,
        session,
        turn,
        turn.advertised_set,
        AgentTools.objects.create(project=project, agent_name="coder", advertised_set=turn.advertised_set,
                                  since=turn.started_at),
        factories.make_tool_call(turn, artifact=artifact),
        artifact,
        batch := make_batch(project),
        make_quarantined(batch),
        tool,
        policy,
        group,
        version,
        make_label(version),
        PolicyAuditEntry.objects.create(project=project, action="published", summary="published v1"),
    ]
    return {type(row): row for row in rows}
