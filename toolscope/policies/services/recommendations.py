"""Policy recommendations from the project's history (issue 14, item 4), and applying one to the
draft.

`policy_recommendations` reads a sample of recorded sessions (the newest `limit` of the last
`days`), learns candidate policies on the older half and scores them on the newer half with the
engine (toolscope_agent.engine.recommend): no candidate is measured on the sessions it learnt
from. The answer is cached for an hour per (project, days, limit, newest session), so a page
that shows it and a click that applies a point read the same candidates.

`policy_draft_apply` writes a candidate's selection and outputs into the draft in one
transaction, with the audit entry every draft edit gets. An editor still publishes.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone
from toolscope_agent.engine.recommend import LARGE_CATALOG, candidates, evaluate, pareto, recommend

from toolscope.policies.models import CompactionRule, ContextRule, Policy, PolicyAuditEntry, Tool, ToolGroup
from toolscope.policies.services.audit import audit_draft_change
from toolscope.policies.services.documents import policy_document_build
from toolscope.policies.services.simulation import (
    catalog_costs,
    catalog_search_tool_added,
    simulation_session_rows,
    simulation_sessions_load,
)
from toolscope.telemetry.models import Project, Session

CACHE_SECONDS = 3600
MIN_SESSIONS = 10


def policy_recommendations(*, project: Project, days: int = 14, limit: int = 2000) -> dict[str, Any]:
    """{"sessions", "fit", "held_out", "candidates", "front", "recommended"}: every candidate with
    its held-out figures, the Pareto front's names, and the recommended one's name (None with
    fewer than MIN_SESSIONS sessions)."""
    newest = Session.objects.filter(project=project).order_by("-id").values_list("id", flat=True).first()
    key = f"policy:recommendations:{project.pk}:{days}:{limit}:{newest}"
    found = cache.get(key)
    if found is None:
        found = _recommendations(project, days, limit)
        cache.set(key, found, CACHE_SECONDS)
    return found


def _recommendations(project: Project, days: int, limit: int) -> dict[str, Any]:
    end = timezone.now()
    rows = simulation_session_rows(project=project, start=end - timedelta(days=days), end=end, limit=limit,
                                   newest=True)
    sessions = simulation_sessions_load(rows=[(pk, key) for pk, key, _ in rows])
    half = len(sessions) // 2
    fit, held_out = sessions[:half], sessions[half:]
    answer: dict[str, Any] = {"sessions": len(sessions), "fit": len(fit), "held_out": len(held_out),
                              "candidates": [], "front": [], "recommended": None}
    if len(sessions) < MIN_SESSIONS:
        return answer
    catalog, costs = catalog_costs(project=project)
    if len(catalog) >= LARGE_CATALOG:  # a tool_search policy is a candidate: the agent gets toolscope's
        catalog, costs = catalog_search_tool_added(project=project, catalog=catalog, costs=costs)
    scored = evaluate(catalog, candidates(catalog, fit, schema_tokens=costs), held_out, schema_tokens=costs)
    front = pareto(scored)
    best = recommend(front)
    answer.update(candidates=[asdict(candidate) for candidate in scored], front=[c.name for c in front],
                  recommended=best.name if best else None)
    return answer


def policy_draft_apply(*, policy: Policy, selection: dict[str, Any], outputs: dict[str, Any],
                       user: AbstractBaseUser | None) -> PolicyAuditEntry | None:
    """Replace the draft's mode, always-on set, groups, context rules and output rules with these."""
    before = policy_document_build(policy=policy)
    tools = {tool.name: tool for tool in Tool.objects.filter(project=policy.project).order_by("name", "-pk")}
    with transaction.atomic():
        policy = Policy.objects.select_for_update().get(pk=policy.pk)
        policy.mode = selection.get("mode", policy.mode)
        policy.sticky_discovered = bool(selection.get("sticky_discovered", True))
        policy.suppress_duplicates = bool(outputs.get("duplicates", {}).get("suppress", True))
        policy.updated_by = user if user is not None and user.is_authenticated else None
        policy.save()
        policy.always_on.set([tools[name] for name in selection.get("always_on", []) if name in tools])
        policy.groups.all().delete()
        groups = {}
        for name, members in selection.get("groups", {}).items():
            groups[name] = ToolGroup.objects.create(policy=policy, name=name)
            groups[name].tools.set([tools[member] for member in members if member in tools])
        policy.context_rules.all().delete()
        for position, rule in enumerate(selection.get("context_rules", [])):
            created = ContextRule.objects.create(policy=policy, position=position, name=rule["name"],
                                                 keywords=rule.get("keywords") or [], regex=rule.get("regex") or "")
            created.groups.set([groups[name] for name in rule.get("groups", []) if name in groups])
        policy.compaction_rules.all().delete()
        CompactionRule.objects.bulk_create([
            CompactionRule(policy=policy, position=position, tools=rule["tools"], max_tokens=rule["max_tokens"],
                           strategy=rule["strategy"]) for position, rule in enumerate(outputs.get("compaction", []))])
        return audit_draft_change(policy=policy, user=user, before=before)
