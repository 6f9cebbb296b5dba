"""The policy document: the JSON an agent applies (DESIGN.md, "The policy JSON").

Built from a project's draft; publishing freezes one into a PolicyVersion. Workers apply the
document's `outputs` section (duplicates, compaction) when they account for recorded outputs.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch
from toolscope_agent.engine.render import SEARCH_TOOL_NAME

from toolscope.policies.models import Policy, PolicyLabel, Tool, ToolGroup
from toolscope.policies.selectors import SETTINGS_FIELDS
from toolscope.policies.services.semantic_search import semantic_settings
from toolscope.telemetry.models import Project

SCHEMA_VERSION = 1
PRODUCTION_LABEL = "production"
# What an agent gets with nothing configured: every tool, duplicates suppressed, no compaction.
VERSION_KEYS = ("label", "version", "etag", "published_at")
DEFAULT_OUTPUTS: dict[str, Any] = {"duplicates": {"suppress": True}, "compaction": []}


def policy_document_build(*, policy: Policy) -> dict[str, Any]:
    """The draft as a document (without label/version/etag/published_at, which publishing adds).

    Six queries. `selection.allowed` is null when the draft restricts nothing (docs/policy.md).
    """
    policy = (
        Policy.objects.select_related("project")
        .prefetch_related(
            "allowed",
            "always_on",
            Prefetch("groups", queryset=ToolGroup.objects.prefetch_related("tools")),
            "context_rules__groups",
            "compaction_rules",
        )
        .get(pk=policy.pk)
    )
    project = policy.project
    # Several sources' tools of one name are one name to an agent (docs/policy.md, "Catalog identity").
    allowed = sorted({tool.name for tool in policy.allowed.all()})
    return {
        "schema_version": SCHEMA_VERSION,
        "project": project.slug,
        "encoding": project.encoding,
        "context_window": project.context_window,
        "selection": {
            "mode": policy.mode,
            "allowed": allowed or None,
            "always_on": sorted({tool.name for tool in policy.always_on.all()}
                                | ({SEARCH_TOOL_NAME} if policy.search_always_on else set())),
            "groups": {group.name: sorted({t.name for t in group.tools.all()}) for group in policy.groups.all()},
            "context_rules": [
                {"name": rule.name, "keywords": rule.keywords, "regex": rule.regex or None,
                 "groups": sorted(group.name for group in rule.groups.all()),
                 **({"after_tools": rule.after_tools} if rule.after_tools else {})}
                for rule in policy.context_rules.all() if rule.enabled
            ],
            "progressive": {"hint_prefix": policy.hint_prefix},
            "tool_search": {"top_k": policy.search_top_k, "max_top_k": policy.search_max_top_k,
                            "provider_search": policy.provider_search, "ranker": policy.search_ranker,
                            # absent unless on: documents of policies without it stay as they were
                            **({"defer_loading": True} if policy.search_defer_loading else {}),
                            "learned": policy.search_learned,
                            "semantic": semantic_settings() if policy.search_semantic else None},
            "sticky_discovered": policy.sticky_discovered,
            "rule_window": policy.rule_window,
            "tool_list": policy.tool_list,
        },
        "outputs": {
            "duplicates": {"suppress": policy.suppress_duplicates},
            "compaction": [
                {"tools": rule.tools, "max_tokens": rule.max_tokens, "strategy": rule.strategy}
                for rule in policy.compaction_rules.all()
            ],
        },
        "tools": _tool_settings(project),
    }


def document_content(document: dict[str, Any]) -> dict[str, Any]:
    """A published version's document without what publishing adds (label, version, ETag, time):
    what compares equal to the draft's document when the draft has not changed since."""
    return {key: value for key, value in document.items() if key not in VERSION_KEYS}


def _tool_settings(project: Project) -> dict[str, dict[str, Any]]:
    """Settings by name. The rows of a name share them (services.catalog); were they ever to
    differ, the first-registered row's win (it comes last here)."""
    tools = Tool.objects.filter(project=project).order_by("name", "-first_seen_at", "-pk").values(
        "name", *SETTINGS_FIELDS)
    return {tool.pop("name"): tool for tool in tools}


def policy_outputs_for_processing(*, project: Project) -> dict[str, Any]:
    """The `outputs` rules recorded outputs are accounted under: the production label's version
    when one is published, else the draft, else the defaults."""
    # Only the document's `outputs` comes back (a key lookup in SQL): documents carry the whole
    # catalog, and decoding one per batch was ~3% of a worker's time.
    published = PolicyLabel.objects.filter(project=project, name=PRODUCTION_LABEL).values_list(
        "pk", "version__document__outputs").first()
    if published is not None:
        return published[1] if published[1] is not None else DEFAULT_OUTPUTS
    policy = Policy.objects.filter(project=project).first()
    if policy is None:
        return DEFAULT_OUTPUTS
    return {
        "duplicates": {"suppress": policy.suppress_duplicates},
        "compaction": list(policy.compaction_rules.values("tools", "max_tokens", "strategy")),
    }
