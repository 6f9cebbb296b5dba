"""The demo's policy history, made with the services an operator's clicks call.

v1, labelled production: context rules pick tool groups from the task message, a `tool_search`
tool in the always-on set finds the rest, shell, test and long file outputs are compacted, and
duplicate outputs are suppressed. The recorded sessions are accounted under it (processing reads
the production label), so compaction artifacts and duplicate savings show from the first run.
v2, labelled staging: a tighter trial, tool_search mode with a five-tool always-on set and
tighter compaction. Production stays on v1.
The draft: v2 plus a rule still being tried, so the publish page has a diff against either label.

Each step edits the draft's rows, records the edit in the audit log (`audit_draft_change`) and,
for a labelled step, publishes through `policy_publish`, which validates the draft as it would
an operator's. Versions are never written by hand.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser

from toolscope.policies.models import CompactionRule, ContextRule, Policy, PolicyVersion, SelectionMode, Tool, ToolGroup
from toolscope.policies.services.audit import audit_draft_change
from toolscope.policies.services.documents import PRODUCTION_LABEL, policy_document_build
from toolscope.policies.services.publish import policy_publish
from toolscope.telemetry.demo.catalog import CONTEXT_RULES, GROUPS

STAGING_LABEL = "staging"
Compaction = tuple[tuple[str, int, str], ...]  # (tool-name glob, max tokens, strategy)


@dataclass(frozen=True)
class PolicyStep:
    mode: str
    always_on: tuple[str, ...]
    compaction: Compaction
    label: str  # the label the step is published to; "" leaves it as the draft
    comment: str


PRODUCTION = PolicyStep(
    mode=SelectionMode.CONTEXT_RULES,
    always_on=("read_file", "edit_file", "write_file", "list_dir", "glob", "grep", "bash", "tool_search"),
    compaction=(("bash*", 2000, "head_tail"), ("run_tests*", 1500, "tail"), ("read_file", 4000, "head_tail")),
    label=PRODUCTION_LABEL,
    comment="Context rules by task; tool_search for the rest; compact shell, test and long file outputs",
)
STAGING = PolicyStep(
    mode=SelectionMode.TOOL_SEARCH,
    always_on=("read_file", "edit_file", "grep", "bash", "tool_search"),
    compaction=(("bash*", 1200, "head_tail"), ("run_tests*", 1000, "tail"), ("read_file", 2500, "head_tail")),
    label=STAGING_LABEL,
    comment="Trial: tool_search mode with five always-on tools, tighter compaction",
)
DRAFT = PolicyStep(
    mode=STAGING.mode,
    always_on=STAGING.always_on,
    compaction=(*STAGING.compaction, ("github_*", 800, "json_prune")),
    label="",
    comment="",
)
HISTORY = (PRODUCTION, STAGING, DRAFT)


def policy_history_store(
    *, policy: Policy, tools: dict[str, Tool], user: AbstractBaseUser
) -> list[PolicyVersion]:
    """Every step of HISTORY applied to the draft in turn; the versions published, oldest first."""
    versions = []
    for position, step in enumerate(HISTORY):
        before = policy_document_build(policy=policy)
        if position == 0:
            _groups_and_rules_store(policy=policy, tools=tools)
        _step_apply(policy=policy, tools=tools, step=step, user=user)
        audit_draft_change(policy=policy, user=user, before=before)
        if step.label:
            versions.append(policy_publish(policy=policy, user=user, comment=step.comment, label=step.label))
    return versions


def _step_apply(*, policy: Policy, tools: dict[str, Tool], step: PolicyStep, user: AbstractBaseUser) -> None:
    policy.mode, policy.updated_by = step.mode, user
    policy.save(update_fields=["mode", "updated_by", "updated_at"])
    policy.always_on.set([tools[name] for name in step.always_on])
    CompactionRule.objects.filter(policy=policy).delete()
    CompactionRule.objects.bulk_create([
        CompactionRule(policy=policy, position=position, tools=glob, max_tokens=max_tokens, strategy=strategy)
        for position, (glob, max_tokens, strategy) in enumerate(step.compaction)
    ])


def _groups_and_rules_store(*, policy: Policy, tools: dict[str, Tool]) -> None:
    """The groups and the context rules that select them: the same in every step."""
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


def _require_pks(objs: list[ToolGroup] | list[ContextRule]) -> None:
    # PostgreSQL and SQLite >= 3.35 return ids from a bulk insert; the rows below depend on them.
    if any(obj.pk is None for obj in objs):
        raise RuntimeError("The database did not return primary keys from bulk_create.")
