"""Policy recommendations from the project's history (issue 14, item 4), computed in a worker,
and applying one to the draft.

`recommendation_start` queues a `Recommendation` for (days, limit) at the project's newest
session (the dashboard), or for a time range, agent, model and limit (the API), or reopens the
one already made: the page shows its progress (candidates scored) and
then its candidates. `recommendation_run`, in the worker, calls `policy_recommendations`: a
sample of recorded sessions (the newest `limit` of the last `days`), candidate policies learnt
on the older tasks and scored on the newer ones (split by task: engine.learning.grouped_split) with the engine
(toolscope_agent.engine.recommend), so no candidate is measured on the sessions it learnt from;
at most HELD_OUT_LIMIT of the newer ones are replayed, a sample stratified by task
(engine.learning.held_out_sample).

`policy_draft_apply` writes a candidate's selection (and, when asked, its outputs) into the draft
in one transaction, keeping what the candidate does not decide, with the audit entry every draft
edit gets (which keeps the draft it replaced: services/drafts.py undoes it). An editor still
publishes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone
from toolscope_agent.engine.learning import grouped_split, held_out_sample
from toolscope_agent.engine.recommend import (
    HELD_OUT_LIMIT,
    LARGE_CATALOG,
    baselines,
    candidates,
    evaluate,
    pareto,
    recommend,
    refitted,
)
from toolscope_agent.engine.render import SEARCH_TOOL_NAME
from toolscope_agent.engine.search import DEFAULT_RANKER, RANKERS, searchable
from toolscope_agent.engine.selection import policy_searches

from toolscope.policies.models import (
    Policy,
    PolicyAuditEntry,
    Recommendation,
    SimulationStatus,
    Tool,
    ToolList,
)
from toolscope.policies.selectors import policy_label_version
from toolscope.policies.services.audit import audit_draft_change
from toolscope.policies.services.background import background_enqueue, background_kind, background_run
from toolscope.policies.services.documents import PRODUCTION_LABEL
from toolscope.policies.services.drafts import compaction_write, draft_snapshot, groups_write, rules_write
from toolscope.policies.services.semantic_search import semantic_index, semantic_settings
from toolscope.policies.services.simulation import (
    SessionPricing,
    catalog_costs,
    catalog_search_tool_added,
    document_semantic_index,
    simulation_session_rows,
    simulation_sessions_load,
)
from toolscope.telemetry.models import Project, Session
from toolscope.tokenizer import counter

MIN_SESSIONS = 10
RUN_TASK = "workers.recommendation_run"


def recommendation_start(*, project: Project, days: int = 0, limit: int, user: Any = None,
                         retry: bool = False, start: datetime | None = None, end: datetime | None = None,
                         agent_name: str = "", model: str = "") -> tuple[Recommendation, bool]:
    """The recommendation for (days, limit), or with `start` and `end` for that range's sessions
    (of `agent_name` and `model` when given), at the project's newest session, and whether it
    was queued now. One already made is reopened as it is: done, running, or (unless `retry`)
    failed."""
    newest = Session.objects.filter(project=project).order_by("-id").values_list("id", flat=True).first()
    if start is not None and end is not None:
        days = 0
        asked = f"range:{start.isoformat()}:{end.isoformat()}:{agent_name}:{model}:{limit}:{newest}"
    else:
        start = end = None
        agent_name = model = ""
        asked = f"{days}:{limit}:{newest}"
    key = hashlib.sha256(asked.encode()).hexdigest()
    with transaction.atomic():
        existing = Recommendation.objects.select_for_update().filter(project=project, key=key).first()
        if existing is not None and not (retry and existing.status == SimulationStatus.FAILED):
            return existing, False
        if existing is not None:
            existing.delete()
        run = Recommendation.objects.create(project=project, key=key, days=days, limit=limit, start=start, end=end,
                                            agent_name=agent_name, model=model,
                                            created_by=user if user is not None and user.is_authenticated else None)
        transaction.on_commit(lambda: background_enqueue(RUN_TASK, run.pk), robust=True)
    return run, True


def recommendation_run(*, recommendation_id: int) -> Recommendation | None:
    """Compute a pending recommendation; None when it is gone, another worker has it, or it waits
    for one of its project's slots (services/background.py)."""
    return background_run(Recommendation, recommendation_id, _compute)


def _compute(run: Recommendation) -> dict[str, Any]:
    def progress(done: int, total: int) -> None:
        Recommendation.objects.filter(pk=run.pk).update(candidates_done=done, candidates_total=total)
    return policy_recommendations(project=run.project, days=run.days, limit=run.limit, start=run.start,
                                  end=run.end, agent_name=run.agent_name, model=run.model, progress=progress)


def recommendation_headline(result: dict[str, Any]) -> dict[str, Any]:
    """What the Runs page shows of a done recommendation: its sessions and candidates, the
    recommended one (None with too few sessions) and what it saves, net of round trips, with its
    hard misses and, when priced, its share of the dollars saved."""
    best = next((row for row in result["candidates"] if row["name"] == result["recommended"]), None)
    headline = {"sessions": result["sessions"], "candidates": len(result["candidates"]),
                "recommended": result["recommended"]}
    if best is not None:
        headline.update(net_saved_share=best.get("net_saved_share", best["saved_share"]),
                        hard_miss_rate=best.get("hard_miss_rate", best["miss_rate"]),
                        dollars_saved_share=best["net_dollars_share"] if best.get("priced_sessions") else None)
    return headline


background_kind(Recommendation, task=RUN_TASK, work=_compute, headline=recommendation_headline)


def policy_recommendations(*, project: Project, days: int = 14, limit: int = 2000,
                           start: datetime | None = None, end: datetime | None = None, agent_name: str = "",
                           model: str = "", progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """{"sessions", "fit", "held_out", "scored", "candidates", "front", "recommended"}: every
    candidate with its figures on the `scored` held-out sessions (all of them, or HELD_OUT_LIMIT
    sampled by task), the Pareto front's names, and the recommended one's name (None with
    fewer than MIN_SESSIONS sessions), learnt from the newest `limit` sessions of the last `days`
    or, given `start` and `end`, of that range (of `agent_name` and `model` when given).
    `progress(done, total)` follows the candidates scored."""
    if start is None or end is None:
        end = timezone.now()
        start = end - timedelta(days=days)
    rows = simulation_session_rows(project=project, start=start, end=end, agent_name=agent_name or None,
                                   model=model or None, limit=limit, newest=True)
    sessions = simulation_sessions_load(rows=[(pk, key) for pk, key, _ in rows])
    fit, newer = grouped_split(sessions)
    held_out = held_out_sample(newer, HELD_OUT_LIMIT)
    answer: dict[str, Any] = {"sessions": len(sessions), "fit": len(fit), "held_out": len(newer),
                              "scored": len(held_out),
                              "candidates": [], "front": [], "recommended": None}
    if len(sessions) < MIN_SESSIONS:
        return answer
    # The catalog as sent, and as a policy that searches sends it (with toolscope's search tool
    # when it has none): a large one's candidates include tool_search policies.
    plain = catalog_costs(project=project)
    searching = catalog_search_tool_added(project=project, catalog=plain[0], costs=plain[1])
    catalog, costs = searching if len(plain[0]) >= LARGE_CATALOG else plain
    pricing, count = SessionPricing(project).of(held_out), counter(project.encoding)
    # With the server's model, candidates that search with toolscope's search fuse semantic ranking,
    # as a policy published with it searches (issue 30): scored with it, applied with it.
    semantic = semantic_settings()
    fused = semantic_index(searchable(catalog), semantic, ranker=DEFAULT_RANKER, history=None) if semantic else None
    semantic = semantic if fused is not None else None
    scored = evaluate(catalog, candidates(catalog, fit, schema_tokens=costs, semantic=semantic), held_out,
                      schema_tokens=costs, menu_tokens=count, progress=progress, pricing=pricing, semantic=fused)
    scored = refitted(scored, catalog, sessions, schema_tokens=costs, semantic=semantic)
    front = pareto(scored)
    best = recommend(front)
    answer.update(candidates=[asdict(candidate) for candidate in scored], front=[c.name for c in front],
                  recommended=best.name if best else None,
                  baselines=[asdict(row) for row in _baselines(project, held_out, plain=plain, searching=searching,
                                                               pricing=pricing, count=count)])
    return answer


def _baselines(project: Project, held_out: list[Any], *, plain: tuple[list[Any], dict[str, int]],
               searching: tuple[list[Any], dict[str, int]], pricing: Any, count: Callable[[str], int],
               ) -> list[Any]:
    """Sending every tool, the published policy and the provider's deferred loading of the whole
    catalog, scored on the same held-out sessions and prices as the candidates
    (engine.recommend.baselines), each over the catalog it is sent with: `searching` (with
    toolscope's search tool) for one that searches, else `plain`."""
    published = policy_label_version(project_id=project.pk, name=PRODUCTION_LABEL)
    scored = []
    for baseline in baselines(published.document if published is not None else None,
                              published_name=f"the published policy (v{published.number})" if published else ""):
        catalog, costs = searching if policy_searches(baseline.document()) else plain
        scored += evaluate(catalog, [baseline], held_out, schema_tokens=costs, menu_tokens=count, pricing=pricing,
                           semantic=document_semantic_index(baseline.document(), catalog))
    return scored


def recommendation_candidates(run: Recommendation) -> list[dict[str, Any]]:
    """A done run's candidates with every figure, those a run stored before issue 25 lacks filled
    in as it measured them (no round trips priced: every miss counted hard; no family: its name;
    not refit; no standard error; not priced)."""
    return [{"hard_miss_rate": row["miss_rate"], "hard_miss_error": 0.0, "priced_sessions": 0, "recorded_dollars": 0.0,
             "policy_dollars": 0.0, "net_dollars_share": 0.0, "cache_breaks": 0, "recoverable_misses": 0,
             "recoverable_miss_rate": 0.0, "schema_tokens_saved": row.get("saved_tokens", 0), "round_trip_tokens": 0,
             "net_saved_tokens": row.get("saved_tokens", 0), "net_saved_share": row["saved_share"],
             "family": row["name"], "refit": False, **row} for row in run.result["candidates"]]


def recommendation_candidate(run: Recommendation, wanted: str | int) -> dict[str, Any] | None:
    """A done run's candidate by name, or by its index in the candidates; None when there is none."""
    rows = run.result["candidates"]
    if isinstance(wanted, int):
        return rows[wanted] if 0 <= wanted < len(rows) else None
    return next((row for row in rows if row["name"] == wanted), None)


def policy_draft_apply(*, policy: Policy, selection: dict[str, Any], outputs: dict[str, Any],
                       user: AbstractBaseUser | None, replace_outputs: bool = False) -> PolicyAuditEntry | None:
    """Write a candidate's selection into the draft: its mode, always-on set, context rules, rule
    window and tool list, its groups (replacing the draft's groups of the same names; the others
    are kept), and, for a candidate that searches, its search as it was scored: its top_k and
    ranker, no learned history, the semantic fusion when it was scored with it. What a candidate
    does not decide is kept: the output rules (compaction, duplicates) unless `replace_outputs`,
    per-tool settings, the allowed set. Audited with the draft it replaced, so it can be undone."""
    before = draft_snapshot(policy=policy)
    tools = {tool.name: tool for tool in Tool.objects.filter(project=policy.project).order_by("name", "-pk")}
    with transaction.atomic():
        policy = Policy.objects.select_for_update().get(pk=policy.pk)
        policy.mode = selection.get("mode", policy.mode)
        policy.sticky_discovered = bool(selection.get("sticky_discovered", True))
        policy.search_always_on = SEARCH_TOOL_NAME in selection.get("always_on", [])  # the catalog may lack it
        window = selection.get("rule_window", 1)
        policy.rule_window = window if window in (1, 2) else 1
        tool_list = selection.get("tool_list", ToolList.PER_REQUEST)
        policy.tool_list = tool_list if tool_list in ToolList.values else ToolList.PER_REQUEST
        search = selection.get("tool_search")
        searches = selection.get("mode") == "tool_search" or SEARCH_TOOL_NAME in selection.get("always_on", [])
        top_k = search.get("top_k") if isinstance(search, dict) else None
        if searches and isinstance(top_k, int) and 1 <= top_k <= 20:
            # The candidate was scored searching this many, with its ranker, no learned history, and
            # the server's semantic fusion when it had it: the draft searches as it was scored.
            policy.search_top_k = top_k
            policy.search_max_top_k = max(policy.search_max_top_k, top_k)
            ranker = search.get("ranker") if isinstance(search, dict) else None
            if isinstance(ranker, str) and ranker in RANKERS:
                policy.search_ranker = ranker
            policy.search_learned = False
            policy.search_semantic = bool(search.get("semantic")) if isinstance(search, dict) else False
            policy.provider_search = bool(search.get("provider_search")) if isinstance(search, dict) else False
            policy.search_defer_loading = bool(search.get("defer_loading")) if isinstance(search, dict) else False
        if replace_outputs:
            policy.suppress_duplicates = bool(outputs.get("duplicates", {}).get("suppress", True))
        policy.updated_by = user if user is not None and user.is_authenticated else None
        policy.save()
        policy.always_on.set([tools[name] for name in selection.get("always_on", []) if name in tools])
        candidate_groups = selection.get("groups", {})
        policy.context_rules.all().delete()
        policy.groups.filter(name__in=list(candidate_groups)).delete()
        groups = {group.name: group for group in policy.groups.all()} | groups_write(policy, candidate_groups, tools)
        rules_write(policy, selection.get("context_rules", []), groups)
        if replace_outputs:
            compaction_write(policy, outputs.get("compaction", []))
        return audit_draft_change(policy=policy, user=user, before=before)
