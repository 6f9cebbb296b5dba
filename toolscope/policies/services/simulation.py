"""Replay a project's recorded sessions under a policy document (issue 14): the server side of
toolscope_agent.engine.simulation.

`simulation_sessions` reads a selection of sessions in four queries, however many sessions and
turns it holds (the sessions, their turns, the advertised sets those turns name, their calls with
only a `tool_search` call's query taken out of the JSON); `policy_simulate` adds the catalog and
its schema costs (two queries) and runs the engine. The advertised side of each turn is the
schema tokens counted when the turn was processed (`Turn.schema_tokens`), so savings compare the
policy with what was really sent; the policy's side prices the current catalog definitions.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from django.utils import timezone
from toolscope_agent.engine.recommend import with_search_tool
from toolscope_agent.engine.render import SEARCH_TOOL, SEARCH_TOOL_NAME
from toolscope_agent.engine.replay_figures import Simulation
from toolscope_agent.engine.replay_pricing import CachePricing
from toolscope_agent.engine.schemas import schema_hash
from toolscope_agent.engine.search import ranker_for, searchable
from toolscope_agent.engine.selection import policy_searches
from toolscope_agent.engine.simulation import RecordedCall, RecordedTurn, ReplaySession, simulate
from toolscope_agent.semantic import HybridIndex

from toolscope.policies.models import Tool
from toolscope.policies.selectors import tool_catalog
from toolscope.policies.services.semantic_search import semantic_index
from toolscope.prices import cache_pricing, model_price
from toolscope.telemetry.models import AdvertisedSet, ModelPrice, Project, Session, ToolCall, Turn
from toolscope.tokenizer import counter, schema_tokens

# What a duplicate's placeholder costs when the recording did not suppress it (and so counted
# none): "[same output as <tool> call <id> (turn <n>); not repeated]" is 20-30 tokens.
PLACEHOLDER_TOKENS = 25


def simulation_sessions(*, project: Project, start: datetime, end: datetime, agent_name: str | None = None,
                        model: str | None = None, limit: int | None = None) -> list[ReplaySession]:
    """The project's sessions started in [start, end), oldest first, as the engine replays them."""
    rows = simulation_session_rows(project=project, start=start, end=end, agent_name=agent_name, model=model,
                                   limit=limit)
    return simulation_sessions_load(rows=[(session_id, key) for session_id, key, _ in rows])


def simulation_session_rows(*, project: Project, start: datetime, end: datetime, agent_name: str | None = None,
                            model: str | None = None, limit: int | None = None,
                            newest: bool = False) -> list[tuple[int, str, datetime]]:
    """(id, client id, start) of the selected sessions, oldest first: one query. `limit` keeps the
    oldest sessions, or with `newest` the newest ones (still returned oldest first)."""
    sessions = Session.objects.filter(project=project, started_at__gte=start, started_at__lt=end)
    if agent_name:
        sessions = sessions.filter(agent_name=agent_name)
    if model:
        sessions = sessions.filter(model=model)
    if newest:
        rows = sessions.order_by("-started_at", "-id").values_list("id", "client_id", "started_at")[:limit]
        return list(reversed(rows))
    return list(sessions.order_by("started_at", "id").values_list("id", "client_id", "started_at")[:limit])


def simulation_sessions_load(*, rows: list[tuple[int, str]]) -> list[ReplaySession]:
    """The sessions of (id, client id) `rows`, in that order, with their turns and calls: three
    queries, whatever their number."""
    ids = [session_id for session_id, _ in rows]
    turns = list(Turn.objects.filter(session_id__in=ids).order_by("session_id", "index", "started_at", "id")
                 .values_list("session_id", "index", "task_message", "advertised_set_id", "schema_tokens",
                              "estimated_input_tokens", "started_at", "time_known", "model"))
    advertised = dict(AdvertisedSet.objects.filter(pk__in={row[3] for row in turns if row[3]})
                      .values_list("pk", "tools"))
    calls: dict[tuple[int, int], list[RecordedCall]] = defaultdict(list)
    rows_of_calls = (ToolCall.objects.filter(session_id__in=ids)
                     .order_by("session_id", "turn_index", "started_at", "id")
                     .values_list("session_id", "turn_index", "tool_name", "arguments__query", "output_tokens",
                                  "duplicate_tokens", "placeholder_tokens"))
    for session_id, turn_index, name, query, output, repeated, placeholder in rows_of_calls:
        calls[(session_id, turn_index)].append(RecordedCall(
            name, {"query": query} if name == SEARCH_TOOL_NAME else {}, output_tokens=output, duplicate_tokens=repeated,
            placeholder_tokens=placeholder if placeholder is not None else PLACEHOLDER_TOKENS if repeated else 0))
    by_session: dict[int, list[RecordedTurn]] = defaultdict(list)
    models: dict[int, str] = {}
    lists: dict[int | None, list[str]] = {}  # one list per advertised set: the replay knows a list by its identity
    for session_id, index, message, set_id, tokens, input_tokens, started_at, timed, model in turns:
        if set_id not in lists:
            names = [entry.get("name") for entry in advertised.get(set_id) or [] if isinstance(entry, dict)]
            lists[set_id] = [name for name in names if isinstance(name, str)]
        if model:
            models.setdefault(session_id, model)
        by_session[session_id].append(RecordedTurn(
            message=message, advertised=lists[set_id],
            # Two turns may share an index (a retry): the calls are the first's.
            calls=calls.pop((session_id, index), []), advertised_tokens=tokens, input_tokens=input_tokens,
            at=started_at.timestamp() if timed else None))
    return [ReplaySession(key, by_session.get(session_id, []), model=models.get(session_id, ""))
            for session_id, key in rows]


def policy_simulate(*, project: Project, document: dict[str, Any], sessions: list[ReplaySession],
                    history: dict[str, list[str]] | None = None) -> Simulation:
    """`sessions` replayed under `document` over the project's catalog."""
    return simulation_replayer(project=project, document=document, history=history)(sessions)


def catalog_costs(*, project: Project, search_tool: bool = False) -> tuple[list[Mapping[str, Any]], dict[str, int]]:
    """The catalog in the engine's shape and each name's schema tokens (of the definition the
    catalog chose for it): two queries. With `search_tool`, toolscope's own `tool_search` is
    added when the catalog has none (as the SDK's selector and the gateway add it)."""
    catalog = tool_catalog(project=project)
    tokens = {(name, source): count for name, source, count in
              Tool.objects.filter(project=project).values_list("name", "source", "schema_tokens")}
    costs = {tool["name"]: tokens.get((tool["name"], tool["source"])) or 0 for tool in catalog}
    return catalog_search_tool_added(project=project, catalog=catalog, costs=costs) if search_tool else (catalog, costs)


def catalog_search_tool_added(*, project: Project, catalog: list[Mapping[str, Any]], costs: dict[str, int],
                              ) -> tuple[list[Mapping[str, Any]], dict[str, int]]:
    """`catalog_costs`'s answer with toolscope's `tool_search` added (priced in the project's
    encoding) when the catalog has none."""
    search_tokens = schema_tokens(
        name=SEARCH_TOOL["name"], description=SEARCH_TOOL["description"], input_schema=SEARCH_TOOL["input_schema"],
        schema_hash=schema_hash(SEARCH_TOOL["name"], SEARCH_TOOL["description"], SEARCH_TOOL["input_schema"]),
        encoding=project.encoding)
    return with_search_tool(catalog, costs, search_tokens)


def simulation_replayer(*, project: Project, document: dict[str, Any],
                        history: dict[str, list[str]] | None = None) -> Callable[[list[ReplaySession]], Simulation]:
    """A function replaying sessions under `document`, the catalog and its costs read once (two
    queries), for a caller that replays in chunks. A document that searches (`tool_search` mode, or
    `tool_search` always on) is replayed with toolscope's search tool when the catalog has none of
    its own, as /policy/resolve and the SDK send it. A document whose search fuses semantic
    ranking is replayed with it when this server has the model it was published with, as
    `POST /tools/search` answers it (semantic_search.semantic_index), else lexically."""
    catalog, costs = catalog_costs(project=project, search_tool=policy_searches(document))
    count = counter(project.encoding)
    pricing = SessionPricing(project)
    fused = document_semantic_index(document, catalog, history=history)

    def replay(sessions: list[ReplaySession]) -> Simulation:
        return simulate(catalog, document, sessions, schema_tokens=costs, menu_tokens=count, history=history,
                        pricing=pricing.of(sessions), semantic=fused)
    return replay


def document_semantic_index(document: Mapping[str, Any], catalog: list[Mapping[str, Any]], *,
                            history: dict[str, list[str]] | None = None) -> HybridIndex | None:
    """The fused search `document`'s tool_search asks for, over `catalog`'s searchable tools, with
    its ranker and (when it turns it on) `history`; None when it asks for none or this server
    cannot rank as it was published."""
    selection = document.get("selection")
    search = selection.get("tool_search") if isinstance(selection, Mapping) else None
    if not isinstance(search, Mapping) or not search.get("semantic"):
        return None
    return semantic_index(searchable(catalog), search["semantic"], ranker=ranker_for(search),
                          history=history if search.get("learned") else None)


class SessionPricing:
    """How replayed sessions are billed, by their model: the project's own prices, else
    genai-prices', in force now, each model looked up once (its first use reads the project's
    prices: one query)."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self.overrides: list[ModelPrice] | None = None
        self.found: dict[str, CachePricing | None] = {}
        self.now = timezone.now()

    def of(self, sessions: list[ReplaySession]) -> dict[str, CachePricing]:
        for model in {session.model for session in sessions} - set(self.found):
            if self.overrides is None:
                self.overrides = list(ModelPrice.objects.filter(project=self.project))
            price = model_price(model=model, at=self.now, overrides=self.overrides) if model else None
            self.found[model] = cache_pricing(price, model=model)
        return {model: priced for model, priced in self.found.items() if priced is not None}
