"""Replay recorded sessions under a policy: the schema tokens it would have sent, and the calls it
would have broken (issue 14's simulation, the part every caller shares).

Pure, like the rest of the engine: recorded sessions and a policy document in, figures out. The
server replays stored sessions with it; the SDK can replay its own. Each session is walked turn
by turn with the state the agent would keep (engine/selection.SessionState):

- the turn's selection is `select_tools(catalog, policy, state, message)`, and its cost the
  schema tokens of the tools sent (plus the progressive menu's, when `menu_tokens` is given),
  against the tokens of what the agent actually advertised on that turn. `message` is the task
  message: the turn's own, else the last one an earlier turn of the session had (a turn that
  only carries tool results continues the task), as an agent passes its task to `tools()` on
  every turn; the state then notes the task (`SessionState.note_task`) for a `rule_window`;
- a recorded call whose tool the selection did not send is a **miss**. It is *recoverable* when
  the policy offers a path to the tool: progressive mode lists it on the menu (calling it
  activates it), or the policy sends the `tool_search` tool and its search, asked with the
  turn's task message, ranks the tool in its top_k. Any other miss is *hard*: the tool is not
  allowed, or nothing would have led the model to it. A recoverable miss costs one extra model
  round trip (`recovery_round_trips`), priced in `round_trip_tokens`: the extra request re-sends
  the turn's context, i.e. what the policy sends that turn (its schema tokens) plus the rest of
  the turn's input (system prompt and history: the recorded `input_tokens` less the schema
  tokens advertised then; ROUND_TRIP_CONTEXT_TOKENS when the turn's input is not known). A hard
  miss under a policy that sends the `tool_search` tool costs the same round trip: the model
  searched for the tool and was answered without it (what it does next, the task failing or
  going another way, is not priced). `net_saved_tokens` is the schema tokens saved less those;
- the policy's `outputs` rules price each call's output: a repeat of an earlier output of the
  session, with duplicates suppressed, saves its tokens less the placeholder's; any other output
  over its limit (the first compaction rule matching the tool, or the tool's
  `max_result_tokens`, the smaller) saves what is over the limit. This prices a compaction at
  exactly its budget; the real compactor lands at or under it;
- then the state learns what the turn did, as the agent's would: every called tool is discovered
  (and, in progressive mode, activated); a recorded `tool_search` call loads what the policy's
  search answers for its query; so does a recovered search miss (the search asked with the task
  message: its whole answer, the missed tool among it). A hard miss still counts
  the call as made (a gateway forwards it), so a sticky policy sends the tool afterwards.

Nothing here reads a clock or iterates a set into the output: equal input, equal figures. The
figures' types (Simulation, Miss, TurnFigures...) are in engine/replay_figures.py, the dollars'
in engine/replay_pricing.py.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from toolscope_agent.engine.compaction import rule_for, rules_from_policy
from toolscope_agent.engine.render import IN_CONVERSATION, SEARCH_TOOL_NAME, deferral
from toolscope_agent.engine.replay_figures import (
    HARD,
    RECOVERABLE,
    Miss,
    Simulation,
    ToolFigures,
    TurnFigures,
)
from toolscope_agent.engine.replay_pricing import CachePricing, PricedRequest, recorded_dollars, session_dollars
from toolscope_agent.engine.search import DEFAULT_TOP_K, MAX_TOP_K, SearchHit, clamp_top_k, ranker_for, search_tools
from toolscope_agent.engine.selection import (
    PER_REQUEST,
    SessionState,
    policy_searches,
    policy_settings,
    select_tools,
)

ROUND_TRIP_CONTEXT_TOKENS = 2_000
"""A round trip's context besides the schemas (system prompt and history) when the turn's input
is not known: an estimate (a short system prompt, the task and a few messages)."""
SELECTION_CACHE_SIZE = 100_000
"""Selections a replay keeps by (message, state), and search answers by query; past this many
it starts over."""


class SemanticSearch(Protocol):
    """A fused lexical and semantic search over the searchable catalog
    (toolscope_agent.semantic.HybridIndex): what a policy whose `tool_search.semantic` is on
    ranks with, the model being I/O the engine does not do itself."""

    def search(self, query: str, top_k: int = ..., *, max_top_k: int = ...) -> list[SearchHit]: ...


@dataclass(frozen=True)
class RecordedCall:
    """A call as recorded: its tool and arguments, its output's tokens, and, when the output
    repeated an earlier one of the session, the tokens repeated and what a placeholder costs."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    output_tokens: int | None = None
    duplicate_tokens: int = 0
    placeholder_tokens: int = 0


@dataclass(frozen=True)
class RecordedTurn:
    """One model request as recorded: the task message its selection would see, the tool names
    actually advertised (and, when known, their exact schema tokens as counted then), the calls
    the model made, and its text (progressive hints)."""

    message: str = ""
    advertised: Sequence[str] = ()
    calls: Sequence[RecordedCall] = ()
    model_output: str = ""
    advertised_tokens: int | None = None
    input_tokens: int | None = None
    """The request's estimated input (schemas, system prompt, history), when known."""
    at: float | None = None
    """When it was sent (seconds), when known: a prompt cache's TTL runs between requests."""


@dataclass(frozen=True)
class ReplaySession:
    key: str
    turns: Sequence[RecordedTurn]
    model: str = ""  # what `simulate`'s `pricing` is looked up by


@dataclass
class Shared:
    """What replays of many policies over one catalog and one list of sessions share (a
    recommendation replays every candidate on the same held-out sessions): the search answers of
    policies that search alike, and each session's dollars as recorded (they depend on the
    recording alone)."""

    searches: dict[Any, dict[str, list[str]]] = field(default_factory=dict)
    recorded: dict[int, tuple[ReplaySession, CachePricing, tuple[float, int]]] = field(default_factory=dict)

    def recorded_dollars(self, session: ReplaySession, pricing: CachePricing,
                         rows: Sequence[PricedRequest]) -> tuple[float, int]:
        found = self.recorded.get(id(session))
        if found is None or found[0] is not session or found[1] is not pricing:
            found = (session, pricing, recorded_dollars(rows, pricing))
            self.recorded[id(session)] = found
        return found[2]


def simulate(catalog: Sequence[Mapping[str, Any]], policy: Mapping[str, Any], sessions: Iterable[ReplaySession],
             *, schema_tokens: Mapping[str, int], menu_tokens: Callable[[str], int] | None = None,
             history: Mapping[str, Sequence[str]] | None = None,
             pricing: Mapping[str, CachePricing] | None = None,
             shared: Shared | None = None,
             semantic: SemanticSearch | None = None) -> Simulation:
    """Replay `sessions` under `policy` over `catalog` (see the module docstring).

    `schema_tokens`: each tool's schema cost by name (a name without one costs 0);
    `menu_tokens`: counts progressive mode's menu text, when given; `history`: the learned
    search history the policy's search would use; `pricing`: by a session's model, how its
    requests are billed (a session whose model has none is not priced); `shared`: what replays of
    many policies on the same catalog and sessions share (Shared: search answers of policies
    that search with the same settings, each session's recorded dollars);
    `semantic`: the fused search a policy whose `tool_search.semantic` is on ranks with (built
    with the policy's ranker and history over the searchable catalog); without it such a policy
    ranks lexically, as a server without its model answers it.
    """
    replay = _Replay(catalog, policy, schema_tokens, menu_tokens, history, pricing, shared, semantic)
    result = Simulation()
    for session in sessions:
        replay.session(session, result)
    return result


class _Replay:
    def __init__(self, catalog: Sequence[Mapping[str, Any]], policy: Mapping[str, Any],
                 schema_tokens: Mapping[str, int], menu_tokens: Callable[[str], int] | None,
                 history: Mapping[str, Sequence[str]] | None,
                 pricing: Mapping[str, CachePricing] | None = None,
                 shared: Shared | None = None,
                 semantic: SemanticSearch | None = None) -> None:
        self.catalog, self.policy, self.costs, self.menu_tokens = catalog, policy, schema_tokens, menu_tokens
        self.pricing = pricing or {}
        self.lists: dict[int, tuple[Sequence[str], str]] = {}  # an advertised list's identity, by id()
        self.settings = policy_settings(policy)
        section = policy.get("selection")
        search = section.get("tool_search") if isinstance(section, Mapping) else None
        search = search if isinstance(search, Mapping) else {}
        self.top_k = clamp_top_k(search.get("top_k", DEFAULT_TOP_K), search.get("max_top_k", MAX_TOP_K))
        self.ranker = ranker_for(search if search else None)
        self.history = history if search.get("learned") else None
        # The provider's own search (`provider_search`) is the provider's, never toolscope's fusion.
        self.semantic = semantic if search.get("semantic") and not search.get("provider_search") else None
        # The provider's deferred loading (render.render with `provider_search`, or with
        # `defer_loading`: toolscope's search answering with references the provider expands):
        # what a search loads, and what a call discovers, arrives inside the conversation, not
        # in the tool list at the head of the prompt (`_price`).
        self.native = bool(deferral(policy)) and policy_searches(policy)
        allowed = self.settings.allowed
        self.searchable = [tool for tool in catalog if allowed is None or tool.get("name") in allowed]
        outputs = policy.get("outputs")
        duplicates = outputs.get("duplicates") if isinstance(outputs, Mapping) else None
        self.suppress = not isinstance(duplicates, Mapping) or duplicates.get("suppress", True) is not False
        try:
            self.rules = rules_from_policy(policy)
        except ValueError:  # a malformed rule compacts nothing, as the agent's selector would not
            self.rules = []
        tools = policy.get("tools")
        self.tool_settings: Mapping[str, Any] = tools if isinstance(tools, Mapping) else {}
        self.selections: dict[tuple[Any, ...], tuple[Mapping[str, str], frozenset[Any], int]] = {}
        self.limits: dict[str, int | None] = {}  # each tool's output limit (`_output_limit`), by name
        # Answers depend on the searchable tools, top_k, ranker, history and semantic fusion:
        # shared between replays that agree on all five.
        self.shared = shared or Shared()
        self.searches: dict[str, list[str]] = self.shared.searches.setdefault(
            (self.top_k, self.ranker, id(self.history), allowed, id(self.semantic)), {})

    def session(self, session: ReplaySession, result: Simulation) -> None:
        state = SessionState()
        message = ""
        pricing = self.pricing.get(session.model)
        priced: list[PricedRequest] = []
        inside: set[str] = set()  # natively deferred tools loaded into the conversation so far
        loaded_tokens = 0
        # The state's lists only grow, and a task repeated is not noted again: while the message
        # and their lengths hold, the selection is the one before (no cache key to build).
        last: tuple[Any, ...] = ()
        for index, turn in enumerate(session.turns):
            message = turn.message or message
            now = (message, len(state.loaded), len(state.discovered), len(state.activated), len(state.sent))
            if now != last:
                selected, last = self._selected(state, message), now
                state.note_task(message)
            sent, deferred, cost = selected
            if self.settings.tool_list != PER_REQUEST:
                state.note_sent(sent)
            # What the agent's state learns from the turn (SessionState.observe of its calls,
            # each recovered search miss a search call before it that loads the tool).
            called: list[str] = []
            loaded: list[str] = []
            misses = recovered = failed = 0
            searchable = SEARCH_TOOL_NAME in sent
            for call in turn.calls:
                tool = result.tools.get(call.name)
                if tool is None:
                    tool = result.tools[call.name] = ToolFigures()
                tool.calls += 1
                self._price_output(call, tool, result)
                # A tool a search of this turn already answered with is not missed again.
                if call.name not in sent and call.name not in loaded:
                    miss = self._miss(session.key, index, call.name, message, deferred, searchable)
                    result.misses.append(miss)
                    misses += 1
                    if miss.kind == HARD:
                        tool.hard += 1
                        failed += searchable  # the model searched for it, and found nothing it could use
                    else:
                        tool.recoverable += 1
                        recovered += 1
                    if miss.path == "search":
                        # The search the model made loads its whole answer, as the agent's state
                        # does (SessionState.observe of a tool_search call with its results).
                        called.append(SEARCH_TOOL_NAME)
                        loaded.extend(self._search(message))
                if call.name:  # a nameless call is counted, never learnt (as observe skips it)
                    called.append(call.name)
                if call.name == SEARCH_TOOL_NAME:
                    query = call.arguments.get("query") if isinstance(call.arguments, Mapping) else None
                    loaded.extend(self._search(query))
            state.record(called, loaded, turn.model_output, hint_prefix=self.settings.hint_prefix)
            advertised = self._advertised_tokens(turn)
            round_trips = 0
            if recovered or failed:
                rest = (max(0, turn.input_tokens - advertised) if turn.input_tokens is not None
                        else ROUND_TRIP_CONTEXT_TOKENS)
                round_trips = (recovered + failed) * (cost + rest)
            result.turns.append(TurnFigures(
                session=session.key, turn=index, sent_tokens=cost, sent_tools=len(sent), calls=len(turn.calls),
                advertised_tokens=advertised, misses=misses, round_trip_tokens=round_trips))
            if pricing is not None:
                rest = (max(0, turn.input_tokens - advertised) if turn.input_tokens is not None
                        else ROUND_TRIP_CONTEXT_TOKENS)
                head, head_cost = sent, cost
                if self.native:
                    head = {name: reason for name, reason in sent.items() if reason not in IN_CONVERSATION}
                    head_cost = cost - sum(self.costs.get(name, 0) for name in sent if name not in head)
                    for name in sent:
                        if name not in head and name not in inside:
                            inside.add(name)
                            loaded_tokens += self.costs.get(name, 0)
                # A request whose time is not known is taken as sent right after the one before.
                sent_at = turn.at if turn.at is not None else (priced[-1].at if priced else 0.0)
                priced.append(PricedRequest(sent_at, self._list_key(turn.advertised), advertised,
                                            "\x1f".join(head), head_cost, rest, rest + loaded_tokens,
                                            recovered + failed))
        if pricing is not None:
            self._price(priced, pricing, result, self.shared.recorded_dollars(session, pricing, priced))

    def _list_key(self, names: Sequence[str]) -> str:
        """An advertised list's identity (its names in order), computed once per list object."""
        found = self.lists.get(id(names))
        if found is None or found[0] is not names:
            found = (names, "\x1f".join(names))
            self.lists[id(names)] = found
        return found[1]

    @staticmethod
    def _price(rows: Sequence[PricedRequest], pricing: CachePricing, result: Simulation,
               recorded: tuple[float, int]) -> None:
        dollars = session_dollars(rows, pricing, recorded=recorded)
        result.recorded_dollars += dollars.recorded
        result.policy_dollars += dollars.policy
        result.priced_sessions += 1
        result.recorded_cache_breaks += dollars.recorded_breaks
        result.cache_breaks += dollars.policy_breaks

    def _selected(self, state: SessionState, message: str) -> tuple[Mapping[str, str], frozenset[Any], int]:
        """What the policy sends for this state and message (names with reasons), the deferred
        names and the schema tokens sent. Selection depends on nothing else, so it is cached by
        (message, state): sessions share their first turns' states, and a session whose calls
        stay within tools it already used keeps its state for many turns."""
        key = (message, tuple(state.loaded), tuple(state.discovered), tuple(state.activated),
               tuple(state.earlier_tasks(message, self.settings.rule_window - 1)), tuple(state.sent))
        found = self.selections.get(key)
        if found is None:
            selection = select_tools(self.catalog, self.policy, state, message, settings=self.settings)
            cost = sum(map(self.costs.get, selection.reasons, itertools.repeat(0)))
            if selection.menu and self.menu_tokens is not None:
                cost += self.menu_tokens(selection.menu)
            # Only progressive mode's misses read the deferred names (the menu's): others skip the set.
            deferred = (frozenset(tool.get("name") for tool in selection.deferred)
                        if self.settings.mode == "progressive" else frozenset())
            found = (selection.reasons, deferred, cost)
            if len(self.selections) >= SELECTION_CACHE_SIZE:
                self.selections.clear()
            self.selections[key] = found
        return found

    def _price_output(self, call: RecordedCall, tool: ToolFigures, result: Simulation) -> None:
        if call.duplicate_tokens and self.suppress:
            saved = max(0, call.duplicate_tokens - call.placeholder_tokens)
            result.duplicate_tokens_saved += saved
            tool.output_tokens_saved += saved
            return
        limit = self._output_limit(call.name)
        if limit is not None and call.output_tokens is not None and call.output_tokens > limit:
            result.compaction_tokens_saved += call.output_tokens - limit
            tool.output_tokens_saved += call.output_tokens - limit

    def _output_limit(self, name: str) -> int | None:
        if name in self.limits:
            return self.limits[name]
        limits = []
        rule = rule_for(name, self.rules)
        if rule is not None:
            limits.append(rule.max_tokens)
        settings = self.tool_settings.get(name)
        cap = settings.get("max_result_tokens") if isinstance(settings, Mapping) else None
        if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0:
            limits.append(cap)
        self.limits[name] = limit = min(limits) if limits else None
        return limit

    def _advertised_tokens(self, turn: RecordedTurn) -> int:
        if turn.advertised_tokens is not None:
            return turn.advertised_tokens
        return sum(self.costs.get(name, 0) for name in dict.fromkeys(turn.advertised))

    def _miss(self, session: str, turn: int, name: str, message: str, deferred: frozenset[Any],
              searchable: bool) -> Miss:
        if self.settings.mode == "progressive" and name in deferred:
            return Miss(session, turn, name, RECOVERABLE, "menu")
        if searchable and name in self._search(message):
            return Miss(session, turn, name, RECOVERABLE, "search")
        return Miss(session, turn, name, HARD, "")

    def _search(self, query: Any) -> list[str]:
        """The names the policy's search answers for `query` (cached: a session asks with its task
        message at every miss, and many sessions share a task)."""
        if not isinstance(query, str) or not query.strip():
            return []
        found = self.searches.get(query)
        if found is None:
            hits = (self.semantic.search(query, self.top_k) if self.semantic is not None else
                    search_tools(self.searchable, query, self.top_k, ranker=self.ranker, history=self.history))
            found = [hit.name for hit in hits]
            if len(self.searches) >= SELECTION_CACHE_SIZE:
                self.searches.clear()
            self.searches[query] = found
        return found
