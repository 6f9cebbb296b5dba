"""Builders for the policy tests, beside tests/admin/builders.py."""

from __future__ import annotations

from tests.admin.builders import make_tool
from toolscope.policies.models import ContextRule, Policy, Tool, ToolGroup
from toolscope.telemetry.models import Project

CATALOG = ("read_file", "edit_file", "bash", "git_status", "git_diff", "web_fetch", "tool_search")


def make_catalog(project: Project, names=CATALOG) -> dict[str, Tool]:
    return {name: make_tool(project, name) for name in names}


def make_rule(policy: Policy, name: str, keywords=("test",), groups: list[ToolGroup] = (), **extra) -> ContextRule:
    rule = ContextRule.objects.create(policy=policy, name=name, keywords=list(keywords), **extra)
    rule.groups.set(groups)
    return rule
