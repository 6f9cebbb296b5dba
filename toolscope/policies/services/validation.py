"""What publishing refuses: a draft an agent could not apply, or could apply only to its harm.

Every problem is reported at once, each naming the field an operator has to fix, so one round
trip through the publish page shows everything that is wrong.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass

from toolscope.policies.models import Policy, Tool
from toolscope.policies.services.regex_safety import regex_problem
from toolscope.policies.services.semantic_search import semantic_identity


@dataclass(frozen=True)
class PolicyProblem:
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def policy_validate(*, policy: Policy) -> list[PolicyProblem]:
    """Every reason the draft cannot be published; empty when it can. A handful of queries."""
    catalog = set(Tool.objects.filter(project_id=policy.project_id).values_list("name", flat=True))
    return [
        *_tool_set_problems(policy),
        *_group_problems(policy),
        *_context_rule_problems(policy),
        *_mode_problems(policy),
        *_compaction_problems(policy, catalog),
    ]


def _foreign(tools: Iterable[Tool], project_id: int) -> list[str]:
    """Names of tools outside the project's catalog (another project's rows)."""
    return sorted(tool.name for tool in tools if tool.project_id != project_id)


def _tool_set_problems(policy: Policy) -> list[PolicyProblem]:
    problems = []
    allowed, always_on = list(policy.allowed.all()), list(policy.always_on.all())
    for field, tools in (("allowed", allowed), ("always_on", always_on)):
        if foreign := _foreign(tools, policy.project_id):
            problems.append(PolicyProblem(field, f"not in this project's catalog: {', '.join(foreign)}"))
    if allowed and (outside := sorted({t.name for t in always_on} - {t.name for t in allowed})):
        problems.append(PolicyProblem("always_on", f"not in the allowed set: {', '.join(outside)}"))
    return problems


def _group_problems(policy: Policy) -> list[PolicyProblem]:
    problems = []
    for group in policy.groups.prefetch_related("tools"):
        if foreign := _foreign(group.tools.all(), policy.project_id):
            problems.append(PolicyProblem(
                f"groups.{group.name}", f"not in this project's catalog: {', '.join(foreign)}"
            ))
    return problems


def _context_rule_problems(policy: Policy) -> list[PolicyProblem]:
    """Enabled rules only: a disabled rule is left out of the document, so it cannot hurt."""
    problems = []
    catalog: set[str] | None = None  # read once, for the first rule with after_tools
    for rule in policy.context_rules.filter(enabled=True):
        field = f"context_rules.{rule.name}"
        keywords = rule.keywords
        if not isinstance(keywords, list) or not all(isinstance(k, str) and k.strip() for k in keywords):
            problems.append(PolicyProblem(f"{field}.keywords", "must be a list of non-empty strings"))
        elif not keywords and not rule.regex and not rule.after_tools:
            problems.append(PolicyProblem(field, "needs keywords, a regex or tools called before"))
        after = rule.after_tools
        if not isinstance(after, list) or not all(isinstance(name, str) and name.strip() for name in after):
            problems.append(PolicyProblem(f"{field}.after_tools", "must be a list of tool names"))
        elif after:
            if catalog is None:
                catalog = set(Tool.objects.filter(project_id=policy.project_id).values_list("name", flat=True))
            if unknown := sorted(set(after) - catalog):  # a typo would never fire
                problems.append(PolicyProblem(f"{field}.after_tools",
                                              f"not in this project's catalog: {', '.join(unknown)}"))
        if rule.regex and (message := regex_problem(rule.regex, flags=re.IGNORECASE)):
            problems.append(PolicyProblem(f"{field}.regex", message))
    return problems


def _mode_problems(policy: Policy) -> list[PolicyProblem]:
    # tool_search mode needs no `tool_search` in the catalog or the always-on set: the engine sends
    # the agent's own in that mode, or toolscope's (the SDK's selector and the gateway add it).
    problems = []
    if policy.search_semantic and semantic_identity() is None:
        problems.append(PolicyProblem(
            "search_semantic", "semantic search needs a model: set TOOL_SEARCH_MODEL on the server (README)"
        ))
    if policy.search_top_k > policy.search_max_top_k:
        problems.append(PolicyProblem(
            "search_top_k",
            f"{policy.search_top_k} is above search_max_top_k ({policy.search_max_top_k})",
        ))
    return problems


def _compaction_problems(policy: Policy, catalog: set[str]) -> list[PolicyProblem]:
    problems = []
    for index, rule in enumerate(policy.compaction_rules.all()):
        if not any(fnmatch.fnmatchcase(name, rule.tools) for name in catalog):
            problems.append(PolicyProblem(
                f"compaction_rules[{index}].tools", f"'{rule.tools}' matches no tool of the catalog"
            ))
    return problems
