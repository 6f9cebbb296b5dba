"""The draft as a whole: a snapshot of it, a preview of a change, and putting one back.

Nothing an editor built is lost to a single click (issue 28, item 1). Every audited draft edit
keeps a snapshot of the draft it replaced (`PolicyAuditEntry.detail["before"]`), so the last edit
can be undone; any draft can be reset to a published version; and a change can be previewed as
the diff it would make before it is made (`draft_change_preview`: made in a transaction that is
rolled back).

A snapshot is the draft's policy document plus what the document leaves out: its disabled context
rules (a document carries the rules that apply).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from toolscope_agent.engine.render import SEARCH_TOOL_NAME
from toolscope_agent.engine.search import RANKERS

from toolscope.policies.models import (
    CompactionRule,
    ContextRule,
    Policy,
    PolicyAuditEntry,
    SelectionMode,
    Tool,
    ToolGroup,
    ToolList,
)
from toolscope.policies.selectors import SETTINGS_FIELDS
from toolscope.policies.services.audit import audit_draft_change
from toolscope.policies.services.diff import document_diff
from toolscope.policies.services.documents import policy_document_build


class _Preview(Exception):
    """Raised inside a preview's transaction to roll it back."""


def draft_snapshot(*, policy: Policy) -> dict[str, Any]:
    """The draft as it can be put back: its document and its disabled context rules."""
    disabled = [{"position": rule.position, "name": rule.name, "keywords": rule.keywords, "regex": rule.regex or None,
                 "after_tools": rule.after_tools, "groups": sorted(group.name for group in rule.groups.all())}
                for rule in ContextRule.objects.filter(policy=policy, enabled=False).prefetch_related("groups")]
    return {"document": policy_document_build(policy=policy), "disabled_rules": disabled}


def draft_change_preview(*, policy: Policy, change: Callable[[Policy], object]) -> list[str]:
    """The lines of the diff `change(policy)` would make to the draft, without making it."""
    before = policy_document_build(policy=policy)
    after: dict[str, Any] = {}
    try:
        with transaction.atomic():
            change(policy)
            after.update(policy_document_build(policy=policy))
            raise _Preview
    except _Preview:
        pass
    return document_diff(old=before, new=after)


def policy_draft_restore(*, policy: Policy, snapshot: dict[str, Any], user: AbstractBaseUser | None,
                         settings: bool = True) -> PolicyAuditEntry | None:
    """Put a snapshot (or a published version's document, as `{"document": ...}`) back as the
    draft: selection, outputs and, with `settings`, the per-tool settings of the tools the
    project still has. Audited as any draft edit (and so undoable in turn)."""
    document = snapshot["document"]
    selection, outputs = document.get("selection") or {}, document.get("outputs") or {}
    before = draft_snapshot(policy=policy)
    tools = {tool.name: tool for tool in Tool.objects.filter(project=policy.project).order_by("name", "-pk")}
    with transaction.atomic():
        policy = Policy.objects.select_for_update().get(pk=policy.pk)
        mode = selection.get("mode")
        policy.mode = mode if mode in SelectionMode.values else policy.mode
        always_on = selection.get("always_on") or []
        policy.search_always_on = SEARCH_TOOL_NAME in always_on
        policy.sticky_discovered = bool(selection.get("sticky_discovered", True))
        policy.hint_prefix = (selection.get("progressive") or {}).get("hint_prefix") or policy.hint_prefix
        policy.rule_window = selection.get("rule_window") if selection.get("rule_window") in (1, 2) else 1
        tool_list = selection.get("tool_list")
        policy.tool_list = tool_list if tool_list in ToolList.values else ToolList.PER_REQUEST
        search = selection.get("tool_search") or {}
        policy.search_top_k = search.get("top_k", policy.search_top_k)
        policy.search_max_top_k = search.get("max_top_k", policy.search_max_top_k)
        policy.provider_search = bool(search.get("provider_search"))
        policy.search_defer_loading = bool(search.get("defer_loading"))
        policy.search_ranker = search.get("ranker") if search.get("ranker") in RANKERS else policy.search_ranker
        policy.search_learned = bool(search.get("learned"))
        policy.search_semantic = bool(search.get("semantic"))
        policy.suppress_duplicates = bool((outputs.get("duplicates") or {}).get("suppress", True))
        policy.updated_by = user if user is not None and user.is_authenticated else None
        policy.save()
        allowed = selection.get("allowed")
        policy.allowed.set([tools[name] for name in allowed or [] if name in tools])
        policy.always_on.set([tools[name] for name in always_on if name in tools])
        policy.context_rules.all().delete()
        policy.groups.all().delete()
        groups = groups_write(policy, selection.get("groups") or {}, tools)
        rules = [dict(rule, enabled=True) for rule in selection.get("context_rules") or []]
        for rule in snapshot.get("disabled_rules") or []:  # back at their places among the rest
            rules.insert(min(rule["position"], len(rules)), dict(rule, enabled=False))
        rules_write(policy, rules, groups)
        compaction_write(policy, outputs.get("compaction") or [])
        if settings:
            for name, values in (document.get("tools") or {}).items():
                known = {field: values[field] for field in SETTINGS_FIELDS if field in values}
                if known and name in tools:
                    Tool.objects.filter(project=policy.project, name=name).update(**known)
        return audit_draft_change(policy=policy, user=user, before=before)


def policy_draft_undo(*, policy: Policy, entry: PolicyAuditEntry, user: AbstractBaseUser | None,
                      ) -> PolicyAuditEntry | None:
    """Undo a draft edit: put back the draft it replaced (what its entry kept)."""
    return policy_draft_restore(policy=policy, snapshot=entry.detail["before"], user=user)


def draft_last_undoable(*, policy: Policy) -> PolicyAuditEntry | None:
    """The project's latest policy audit entry when it is a draft edit that kept the draft it
    replaced: the one edit "Undo" puts back (a publish or label move in between ends it)."""
    latest = PolicyAuditEntry.objects.filter(project_id=policy.project_id).order_by("-created_at", "-pk").first()
    if latest is None or latest.action != "draft_changed" or "before" not in latest.detail:
        return None
    return latest


def groups_write(policy: Policy, groups: dict[str, list[str]], tools: dict[str, Tool]) -> dict[str, ToolGroup]:
    written = {}
    for name, members in groups.items():
        written[name] = ToolGroup.objects.create(policy=policy, name=name)
        written[name].tools.set([tools[member] for member in members if member in tools])
    return written


def rules_write(policy: Policy, rules: list[dict[str, Any]], groups: dict[str, ToolGroup]) -> None:
    for position, rule in enumerate(rules):
        created = ContextRule.objects.create(policy=policy, position=position, name=rule["name"],
                                             keywords=rule.get("keywords") or [], regex=rule.get("regex") or "",
                                             after_tools=rule.get("after_tools") or [],
                                             enabled=rule.get("enabled", True))
        created.groups.set([groups[name] for name in rule.get("groups", []) if name in groups])


def compaction_write(policy: Policy, rules: list[dict[str, Any]]) -> None:
    policy.compaction_rules.all().delete()
    CompactionRule.objects.bulk_create([
        CompactionRule(policy=policy, position=position, tools=rule["tools"], max_tokens=rule["max_tokens"],
                       strategy=rule["strategy"]) for position, rule in enumerate(rules)])


def tool_settings_update(*, tool: Tool, values: dict[str, Any], user: AbstractBaseUser | None
                         ) -> PolicyAuditEntry | None:
    """Save a tool's per-tool settings (SETTINGS_FIELDS in `values`) on every source's definition
    of its name, as the policy serves them by name; recorded as a draft change that can be undone.
    None when nothing changed."""
    changed = {field: values[field] for field in SETTINGS_FIELDS if field in values}
    with transaction.atomic():
        # Serialises edits of one draft, so `before` is the state this save replaces.
        policy = Policy.objects.select_for_update().filter(project_id=tool.project_id).first()
        before = draft_snapshot(policy=policy) if policy is not None else None
        Tool.objects.filter(project_id=tool.project_id, name=tool.name).update(**changed)
        # Without a draft the settings are the catalog's alone, until a draft serves them.
        return audit_draft_change(policy=policy, user=user, before=before) if policy and before else None
