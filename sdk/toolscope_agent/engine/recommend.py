"""Policy recommendations from recorded sessions (issue 14, item 4): candidate policies learnt on
the older sessions, each replayed on the newer ones, and the Pareto curve of schema tokens saved
against calls missed.

Learnt on `fit` sessions only, measured on `held_out` ones (a time split: no candidate is scored
on the sessions it was fitted on):

- **always-on sets** from the coverage curve: tools ranked by the share of sessions that call
  them; the candidates keep the top k for k on a grid, in `context_rules` mode (sticky discovered
  tools, so a tool called once is sent from then on);
- **groups** of tools called together (learnt in engine/session_learning.py): two tools, each
  called in at most GROUP_MAX_SHARE of the sessions (a tool nearly every session calls belongs
  in the always-on set), whose calling sessions overlap with a Jaccard index of at least
  GROUP_JACCARD join one group (connected
  components; a tool called with no other is a group of its own), and **context rules**: a
  group's keywords are the task-message words (each in at least RULE_SUPPORT fit sessions) after
  which the group is used in at least RULE_PRECISION of those sessions, best first, until they
  cover RULE_COVERAGE of the sessions that used the group. A candidate sends the always-on set
  plus the rules of the groups it does not already send;
- **always-on sets that rules miss**: rules learnt on the older tasks of the fit sessions are
  replayed on its newer ones; the tools they missed, most misses per schema token first, are the
  always-on set and rules send the rest (k = 1 .. all of them): cheap tools that task words do
  not predict stay on, costly ones come when asked for;
- **tool_search** variants (when the catalog has the `tool_search` tool; `with_search_tool` adds
  toolscope's own to a catalog of LARGE_CATALOG tools or more): the same always-on sets plus the
  search tool, in `tool_search` mode;
- **per-request rules** (issue 25, item 3): rules learnt from each request's task (the latest
  user instruction before it) against the tools first called while it was the task, one rule per
  tool, its keywords the task words significantly associated with that tool. Statistics, not
  thresholds: every (word, tool) pair is tested with the one-sided Fisher exact test (the
  hypergeometric tail from scipy.stats: how likely that many of the word's tasks used the tool by
  chance), and the pairs kept are those the Benjamini-Hochberg procedure accepts at a false
  discovery rate on FDR_ALPHAS (5%, and a looser 50% whose extra words the held-out tasks judge)
  over all of them, every word with every tool (a pair never seen together counts as a test with
  p = 1). Each distinct task text (spacing folded) counts
  once, however many sessions repeat it, so a task repeated in many sessions is one piece of
  evidence, not many. Of the accepted words, a candidate keeps those whose share of tasks using
  the tool reaches a precision on RULE_PRECISIONS: a word that fires often for a rarely used tool
  costs its schema on every request it fires on. Rules are learnt from the task alone (the
  instruction that led to the call) and sent reading it alone or with the instruction before it
  (`rule_window` on RULE_WINDOWS: a follow-up such as "I am USR001." continues the instruction
  before it; learning on both instructions blurs which one called for the tool), and with or
  without **groups keyed by the
  tools already called** (item 6): a rule's `after_tools`, the earlier tools whose call
  significantly predicts the tool's first call afterwards (`call_associations`, tested the same
  way over distinct tasks: an agent that called `cd` will call `ls`). The candidates send these rules with
  toolscope's `tool_search` always on (context_rules mode; top_k on SEARCH_TOP_KS) so what the
  rules miss can still be found, or, when the catalog has no search, alone;
- **a core of what rules and search miss** (issue 25, item 6's learnt always-on core): the most
  inclusive request rules (loosest rate and precision, after calls, widest window) with the
  search, learnt on the older tasks of the fit sessions and replayed on their newer ones; the
  tools they miss hard (no rule word, and the task's words do not find them: `average` for
  `mean`, `identical` for `diff`), most misses per schema token first, are kept always on, the
  first k on CORE_K, next to every request-rules candidate;
- **deferred loading with toolscope's search** (issue 26): the always-on sets of PROGRESSIVE_K
  and toolscope's search, every other tool deferred (`tool_search.defer_loading`): the list at
  the head of the prompt never changes, as with the provider's own deferred loading, and the
  search is toolscope's (fused with the server's model when it has one), answered by the client;
- **progressive menus** (issue 25, item 6): the always-on sets of PROGRESSIVE_K in progressive
  mode: every other tool is on the menu, so no miss is hard, and each costs a round trip; the
  menu is priced every request (`evaluate`'s `menu_tokens`);
- **compaction**: a tool whose outputs' 95th percentile passes COMPACT_ABOVE tokens gets a
  head_tail rule at COMPACT_TO tokens, on every candidate.

Validation is grouped (`grouped_split`): the sessions are split by task, a session's task being
its first instruction, so no task is learnt on one side and scored on the other. Sessions that
repeat a task (retries, variants of one job) stay together on the side of its oldest session.
An agent of one or two jobs has no other tasks to score on: its split is by time. Of the
held-out sessions, at most HELD_OUT_LIMIT are replayed (learning.held_out_sample: a sample
stratified by task, each task its share and at least one session, evenly spaced in time): a
task's sessions miss together, so the evidence is the tasks, and replaying thousands more
sessions of the same tasks would cost most of a recommendation's time for little precision
(bench/RESULTS.md compares the two on 5,000 sessions).

Each candidate is a whole `selection` + `outputs` section that an editor can apply to the draft:
once scored, it is learnt again on every session, fit and held-out (`refitted`), so what is
applied learnt from all the evidence while its figures stay those measured on unseen tasks.
It is ranked on two figures (issue 25, item 2): its **hard-miss rate** (calls nothing would have
led the model to; a recoverable miss, found on the progressive menu or by the policy's search,
is not a failure) and its **net tokens saved**: schema tokens saved less the round trips its
recoverable misses cost, each an extra request re-sending that turn's context (the policy's
schema tokens that turn plus the recorded input's system prompt and history; see
engine/simulation.py). `pareto` keeps the candidates no other beats on both figures;
`recommend` picks the one saving the most net tokens whose hard-miss rate is within the budget
by one standard error (`hard_miss_error`, each task's sessions one cluster), else the one
missing least: of many candidates scored on the same tasks, the best-looking one is partly lucky.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from toolscope_agent.engine.learning import (
    FDR_ALPHA,
    call_associations,
    grouped_split,
    request_rules,
    task_examples,
    task_key,
    word_associations,
)
from toolscope_agent.engine.render import SEARCH_TOOL, SEARCH_TOOL_NAME
from toolscope_agent.engine.replay_figures import HARD, Simulation
from toolscope_agent.engine.replay_pricing import CachePricing
from toolscope_agent.engine.selection import APPEND_ONLY, FIXED, PER_REQUEST
from toolscope_agent.engine.session_learning import (
    by_coverage,
    compaction_rules,
    learnt_session_rules,
    session_groups,
    session_rules,
)
from toolscope_agent.engine.simulation import ReplaySession, SemanticSearch, Shared, simulate
from toolscope_agent.engine.tokens import approximate_counter

K_GRID = (*range(17), 20, 24, 32)
MISS_BUDGET = 0.02
HELD_OUT_LIMIT = 1000  # held-out sessions replayed per candidate, at most (learning.held_out_sample)
LARGE_CATALOG = 30
FDR_ALPHAS = (FDR_ALPHA, 0.5)  # the learning module's 5%, and a looser rate the held-out tasks judge
RULE_PRECISIONS = (0.05, 0.2, 0.3, 0.45)
RULE_WINDOWS = (1, 2)
SEARCH_TOP_KS = (20,)
"""How many tools toolscope's search answers with. Every tool of an answer is loaded (into the list,
or into the conversation when deferred), so a short answer costs less and finds less. Five (the
providers' own: Anthropic's tool search answers with three to five) was tried beside twenty on
BFCL's multi-turn sessions (bench/RESULTS.md, 2026-12-04): it missed too much to be recommended
(3.45% hard misses at best, against 0.00-0.88% with twenty) and took the candidates from 247 to
360."""
CORE_K = (0, 4, 8)  # tools the most inclusive rules and the search both miss, kept always on
PROGRESSIVE_K = (0, 2, 4, 8, 16)
# Cache-keeping shapes (selection.tool_list): every tool once sent kept for the session, or the
# first request's list grown only by searches and calls. Tried over a few settings of each family;
# with a search, append-only only: on BFCL's multi-turn sessions (tasks change mid-session) no
# fixed list reached the Pareto front in four runs (bench/RESULTS.md), and each candidate costs
# half a second of replay per 5,000 sessions.
KEPT_LISTS = (APPEND_ONLY, FIXED)
KEPT_PRECISIONS = (0.2, 0.45)
LIST_WORDS = {APPEND_ONLY: "append-only list", FIXED: "list fixed per session"}


@dataclass(frozen=True)
class Candidate:
    name: str
    selection: dict[str, Any]
    outputs: dict[str, Any]
    saved_share: float = 0.0  # schema tokens saved / advertised
    miss_rate: float = 0.0  # every miss, hard or recoverable, per call
    hard_misses: int = 0
    saved_tokens: int = 0  # schema tokens saved (as schema_tokens_saved, kept for older readers)
    hard_miss_rate: float = 0.0
    hard_miss_error: float = 0.0  # the rate's standard error, each task's sessions one cluster (`evaluate`)
    recoverable_misses: int = 0
    recoverable_miss_rate: float = 0.0
    schema_tokens_saved: int = 0
    round_trip_tokens: int = 0  # what the recoverable misses' extra requests re-send
    net_saved_tokens: int = 0  # schema_tokens_saved - round_trip_tokens
    net_saved_share: float = 0.0  # net_saved_tokens / advertised schema tokens
    family: str = ""  # the candidate's kind and settings, without what it learnt: equal across refits
    refit: bool = False  # selection and outputs learnt again on every session (see `refitted`)
    # In dollars under the provider's prompt cache, when the held-out sessions were priced
    # (`evaluate`'s `pricing`): their input as recorded and under the candidate, round trips included.
    priced_sessions: int = 0
    recorded_dollars: float = 0.0
    policy_dollars: float = 0.0
    net_dollars_share: float = 0.0  # (recorded - policy) / recorded
    cache_breaks: int = 0

    @property
    def benefit(self) -> float:
        """What the candidate is ranked on: the share of dollars it saves when its sessions were
        priced (a list that changes mid-session re-writes the cache), else of net tokens."""
        return self.net_dollars_share if self.priced_sessions else self.net_saved_share

    def document(self) -> dict[str, Any]:
        return {"selection": self.selection, "outputs": self.outputs}


def candidates(catalog: Sequence[Mapping[str, Any]], fit: Sequence[ReplaySession], *,
               schema_tokens: Mapping[str, int] | None = None,
               semantic: Mapping[str, Any] | None = None) -> list[Candidate]:
    """The candidate policies learnt from `fit` (unscored). `semantic`: the `tool_search.semantic`
    section (model and fusion) every candidate searching with toolscope's search gets, when the
    scorer has the model (`evaluate`'s `semantic`)."""
    names = [tool["name"] for tool in catalog if isinstance(tool.get("name"), str)]
    ranked = by_coverage(fit, set(names))
    groups = session_groups(fit, ranked)
    rules = session_rules(fit, groups)
    outputs = {"duplicates": {"suppress": True}, "compaction": compaction_rules(fit)}
    found: dict[str, Candidate] = {}  # by what the candidate sends: the first name of each policy kept

    def add(name: str, selection: dict[str, Any], family: str = "") -> None:
        search = selection["tool_search"]
        if semantic and not search.get("provider_search") and (
                selection["mode"] == "tool_search" or SEARCH_TOOL_NAME in selection["always_on"]):
            search["semantic"] = dict(semantic)
        key = json.dumps({**selection, "always_on": sorted(selection["always_on"])}, sort_keys=True)
        found.setdefault(key, Candidate(name, selection, outputs, family=family or name))

    def with_rules(always: list[str]) -> tuple[dict[str, list[str]], list[dict[str, Any]]]:
        needed = {name: members for name, members in groups.items() if not set(members) <= set(always)}
        return needed, [rule for rule in rules if rule["groups"][0] in needed]

    for k in dict.fromkeys(min(k, len(ranked)) for k in (*K_GRID, len(ranked))):
        always = ranked[:k]
        add(f"always-on top {k}", _selection("context_rules", always))
        needed, kept = with_rules(always)
        if kept:
            add(f"always-on top {k} + {len(kept)} rules", _selection("context_rules", always, needed, kept),
                f"always-on top {k} + rules")
            for tool_list in KEPT_LISTS if k in PROGRESSIVE_K else ():  # shapes that keep the cache
                add(f"always-on top {k} + {len(kept)} rules, {LIST_WORDS[tool_list]}",
                    _selection("context_rules", always, needed, kept, tool_list=tool_list),
                    f"always-on top {k} + rules, {LIST_WORDS[tool_list]}")
        if SEARCH_TOOL_NAME in names:
            add(f"tool_search + top {k}", _selection("tool_search", [*always, SEARCH_TOOL_NAME]))
            if k in PROGRESSIVE_K:  # the provider's own deferred loading: the list at the head stays put
                add(f"provider's deferred loading + top {k}",
                    _selection("tool_search", [*always, SEARCH_TOOL_NAME], provider_search=True))
                # the same loading with toolscope's search (the client answers with references)
                for top_k in SEARCH_TOP_KS:
                    add(f"deferred loading + top {k}, toolscope's search top {top_k}",
                        _selection("tool_search", [*always, SEARCH_TOOL_NAME], top_k=top_k, defer_loading=True))
        if k in PROGRESSIVE_K:
            add(f"progressive menu + top {k}", _selection("progressive", always))
    inner = grouped_split(fit)  # nested in the fit sessions: the held-out ones stay unseen
    weak = _missed_by(catalog, inner, ranked, schema_tokens or {},
                      lambda sessions: _selection("context_rules", [], *learnt_session_rules(sessions, ranked)))
    for k in range(1, len(weak) + 1):
        needed, kept = with_rules(weak[:k])
        add(f"{len(kept)} rules + always-on {k} they miss", _selection("context_rules", weak[:k], needed, kept),
            f"rules + always-on {k} they miss")
    known = set(names) - {SEARCH_TOOL_NAME}
    searching = SEARCH_TOOL_NAME in names
    core = _missed_by(catalog, inner, ranked, schema_tokens or {},
                      lambda sessions: _inclusive_request_rules(sessions, known)) if searching else []
    # Words are learnt from the instruction that led to the call; a rule window is how the rules
    # are read: a follow-up keeps the rules of the instruction before it. The false discovery
    # rate is a setting like the precision: the held-out tasks tell whether looser rules generalise.
    examples = task_examples(fit)
    learnt = {alpha: (word_associations(examples, known=known, alpha=alpha),
                      call_associations(fit, known=known, alpha=alpha)) for alpha in FDR_ALPHAS}
    for alpha, window, calls, precision in itertools.product(FDR_ALPHAS, RULE_WINDOWS, (False, True),
                                                             RULE_PRECISIONS):
        words_found, after_calls = learnt[alpha]
        tool_groups, tool_rules = request_rules([*words_found, *(after_calls if calls else ())], precision=precision)
        if tool_rules:
            family = (f"request rules (precision {precision:g}" + (f", {window} tasks" if window > 1 else "")
                      + (", after calls" if calls else "") + (f", FDR {alpha:g})" if alpha != FDR_ALPHA else ")"))
            if not searching:  # with a search to fall back on, rules alone are never worth scoring
                add(f"{len(tool_rules)} {family}",
                    _selection("context_rules", [], tool_groups, tool_rules, rule_window=window), family)
            # A core of k that the misses cannot fill sends what a smaller one sends: `add` keeps
            # the first. The family names the setting (k), the name what is sent.
            for top_k, k in itertools.product(SEARCH_TOP_KS if searching else (), CORE_K):
                always = core[:k]
                kept = [rule for rule in tool_rules if not set(tool_groups[rule["groups"][0]]) <= set(always)]
                sent = {rule["groups"][0]: tool_groups[rule["groups"][0]] for rule in kept}
                add(f"{len(kept)} {family}{f' + always-on {len(always)} they miss' if always else ''}"
                    f" + tool_search top {top_k}",
                    _selection("context_rules", [*always, SEARCH_TOOL_NAME], sent, kept, top_k=top_k,
                               rule_window=window),
                    f"{family}{f' + always-on {k} they miss' if k else ''} + tool_search top {top_k}")
                # The same, keeping the list for the session (the cache it heads is kept), over
                # the learning module's own FDR and one task: the shapes, not every setting.
                lists = (APPEND_ONLY,) if alpha == FDR_ALPHA and window == 1 and precision in KEPT_PRECISIONS else ()
                for tool_list in lists:
                    add(f"{len(kept)} {family}{f' + always-on {len(always)} they miss' if always else ''}"
                        f" + tool_search top {top_k}, {LIST_WORDS[tool_list]}",
                        _selection("context_rules", [*always, SEARCH_TOOL_NAME], sent, kept, top_k=top_k,
                                   rule_window=window, tool_list=tool_list),
                        f"{family}{f' + always-on {k} they miss' if k else ''} + tool_search top {top_k}, "
                        f"{LIST_WORDS[tool_list]}")
    return list(found.values())


EVERY_TOOL = "every tool"
NATIVE_ALL = "provider's deferred loading of the whole catalog"


def baselines(published: Mapping[str, Any] | None = None, *, published_name: str = "the published policy",
              ) -> list[Candidate]:
    """What a recommendation is compared with (unscored): sending every tool, the published
    policy (when there is one), and the provider's own deferred loading of the whole catalog
    (its search tool alone at the head of the prompt, every definition loaded into the
    conversation). A caller scores each over its own catalog: the last one searches."""
    found = [Candidate(EVERY_TOOL, {"mode": "all"}, {})]
    if published is not None:
        selection, outputs = published.get("selection"), published.get("outputs")
        found.append(Candidate(published_name, dict(selection) if isinstance(selection, Mapping) else {},
                               dict(outputs) if isinstance(outputs, Mapping) else {}))
    found.append(Candidate(NATIVE_ALL, _selection("tool_search", [SEARCH_TOOL_NAME], provider_search=True), {}))
    return found


def refitted(scored: Sequence[Candidate], catalog: Sequence[Mapping[str, Any]], sessions: Sequence[ReplaySession],
             *, schema_tokens: Mapping[str, int] | None = None,
             semantic: Mapping[str, Any] | None = None) -> list[Candidate]:
    """`scored` with each candidate's selection and outputs learnt again, the same way, on
    `sessions` (its fit and held-out sessions together): its figures, measured on held-out
    sessions it did not learn from, estimate how the procedure does on unseen tasks, and the
    policy applied has learnt from all the evidence there is. A candidate whose family the refit
    does not produce (it sends what another sends) keeps what it learnt on the fit sessions."""
    again = {candidate.family: candidate
             for candidate in candidates(catalog, sessions, schema_tokens=schema_tokens, semantic=semantic)}
    return [replace(candidate, name=again[candidate.family].name, selection=again[candidate.family].selection,
                    outputs=again[candidate.family].outputs, refit=True) if candidate.family in again else candidate
            for candidate in scored]


def with_search_tool(catalog: Sequence[Mapping[str, Any]], schema_tokens: Mapping[str, int],
                     search_tokens: int) -> tuple[list[Mapping[str, Any]], dict[str, int]]:
    """The catalog and its costs with toolscope's `tool_search` (SEARCH_TOOL, costing
    `search_tokens`) added when the catalog has none."""
    if any(tool.get("name") == SEARCH_TOOL_NAME for tool in catalog):
        return list(catalog), dict(schema_tokens)
    return [*catalog, SEARCH_TOOL], {**schema_tokens, SEARCH_TOOL_NAME: search_tokens}


def evaluate(catalog: Sequence[Mapping[str, Any]], found: Sequence[Candidate], held_out: Sequence[ReplaySession],
             *, schema_tokens: Mapping[str, int], menu_tokens: Callable[[str], int] | None = None,
             progress: Callable[[int, int], None] | None = None,
             pricing: Mapping[str, CachePricing] | None = None,
             semantic: SemanticSearch | None = None) -> list[Candidate]:
    """Each candidate with its figures on `held_out`; `progress(done, total)` after each. A
    progressive candidate's menu is priced with `menu_tokens` (the server's tokenizer), else one
    token per four characters (tokens.approximate_counter). With `pricing` (by a session's
    model), each is also priced in dollars under the provider's prompt cache, and ranked on them
    (`Candidate.benefit`). `semantic`: the fused search candidates with `tool_search.semantic`
    rank with (`candidates`' `semantic`)."""
    clusters = {session.key: task_key(session) for session in held_out}
    if len(set(clusters.values())) < 2:  # one task: its sessions are the clusters
        clusters = {session.key: session.key for session in held_out}
    scored = []
    shared = Shared()  # search answers and recorded dollars, the same for every candidate
    for candidate in found:
        result = simulate(catalog, candidate.document(), held_out, schema_tokens=schema_tokens,
                          menu_tokens=menu_tokens or approximate_counter, shared=shared, pricing=pricing,
                          semantic=semantic)
        totals = result.totals()
        net = totals.saved_tokens - totals.round_trip_tokens
        scored.append(replace(
            candidate, saved_share=totals.share(totals.saved_tokens),
            miss_rate=totals.rate(totals.hard_misses + totals.recoverable_misses), hard_misses=totals.hard_misses,
            saved_tokens=totals.saved_tokens, hard_miss_rate=totals.rate(totals.hard_misses),
            hard_miss_error=hard_miss_error(result, clusters), recoverable_misses=totals.recoverable_misses,
            recoverable_miss_rate=totals.rate(totals.recoverable_misses), schema_tokens_saved=totals.saved_tokens,
            round_trip_tokens=totals.round_trip_tokens, net_saved_tokens=net, net_saved_share=totals.share(net),
            priced_sessions=result.priced_sessions, recorded_dollars=result.recorded_dollars,
            policy_dollars=result.policy_dollars, cache_breaks=result.cache_breaks,
            net_dollars_share=result.dollars_saved / result.recorded_dollars if result.recorded_dollars else 0.0))
        if progress is not None:
            progress(len(scored), len(found))
    return scored


def pareto(scored: Sequence[Candidate]) -> list[Candidate]:
    """The candidates no other saves more (`Candidate.benefit`: dollars when priced, else net
    tokens) with at most as many hard misses, by hard-miss rate ascending."""
    ordered = sorted(scored, key=lambda c: (c.hard_miss_rate, -c.benefit, c.recoverable_miss_rate, c.name))
    front, best = [], float("-inf")
    for candidate in ordered:
        if candidate.benefit > best:
            front.append(candidate)
            best = candidate.benefit
    return front


def hard_miss_error(result: Simulation, clusters: Mapping[str, str]) -> float:
    """The standard error of `result`'s hard-miss rate (hard misses / calls), its sessions grouped
    into `clusters` (session key -> cluster): the ratio estimator's cluster-robust (sandwich)
    variance, sum over clusters of (hard - rate * calls)^2, times G / (G - 1), over calls^2. A
    task's sessions miss together (one unforeseen word misses in every session of that task), so
    the evidence is the tasks, not the calls. 0 with fewer than two clusters or no calls."""
    calls: Counter[str] = Counter()
    hard: Counter[str] = Counter()
    for row in result.turns:
        calls[clusters.get(row.session, row.session)] += row.calls
    for miss in result.misses:
        if miss.kind == HARD:
            hard[clusters.get(miss.session, miss.session)] += 1
    total, groups = sum(calls.values()), len(calls)
    if not total or groups < 2:
        return 0.0
    rate = sum(hard.values()) / total
    spread = sum((hard[cluster] - rate * count) ** 2 for cluster, count in calls.items())
    return math.sqrt(groups / (groups - 1) * spread) / total


def recommend(front: Sequence[Candidate], *, miss_budget: float = MISS_BUDGET) -> Candidate | None:
    """The candidate saving the most net tokens whose hard-miss rate stays within `miss_budget`
    by one standard error (rate + hard_miss_error <= budget: the one-standard-error rule of
    Breiman et al.'s CART, as glmnet's lambda.1se), else the one with the fewest hard misses.
    Picking the best of many estimates on the same held-out tasks favours the one whose estimate
    came out lucky; the margin is how much luck a rate measured on these tasks can hold."""
    within = [c for c in front if c.hard_miss_rate + c.hard_miss_error <= miss_budget]
    if within:
        return max(within, key=lambda c: (c.benefit, -c.hard_miss_rate, -c.recoverable_miss_rate))
    return min(front, key=lambda c: (c.hard_miss_rate, -c.benefit)) if front else None


def _selection(mode: str, always_on: list[str], groups: Mapping[str, list[str]] | None = None,
               rules: list[dict[str, Any]] | None = None, *, top_k: int = 8, rule_window: int = 1,
               provider_search: bool = False, tool_list: str = PER_REQUEST,
               defer_loading: bool = False) -> dict[str, Any]:
    search: dict[str, Any] = {"top_k": top_k, "max_top_k": 20, "ranker": "bm25f-2"}
    if provider_search:
        search["provider_search"] = True
    if defer_loading:
        search["defer_loading"] = True
    selection = {"mode": mode, "always_on": list(always_on), "groups": dict(groups or {}),
                 "context_rules": list(rules or []), "sticky_discovered": True, "rule_window": rule_window,
                 "tool_search": search}
    if tool_list != PER_REQUEST:
        selection["tool_list"] = tool_list
    return selection


def _inclusive_request_rules(fit: Sequence[ReplaySession], known: set[str]) -> dict[str, Any]:
    """The request rules that send the most (the loosest false discovery rate and precision, after
    calls, the widest rule window) with tool_search always on, learnt on `fit`."""
    alpha = max(FDR_ALPHAS)
    groups, rules = request_rules([*word_associations(task_examples(fit), known=known, alpha=alpha),
                                   *call_associations(fit, known=known, alpha=alpha)],
                                  precision=min(RULE_PRECISIONS))
    return _selection("context_rules", [SEARCH_TOOL_NAME], groups, rules, top_k=max(SEARCH_TOP_KS),
                      rule_window=max(RULE_WINDOWS))


def _missed_by(catalog: Sequence[Mapping[str, Any]], inner: tuple[list[ReplaySession], list[ReplaySession]],
               ranked: list[str], schema_tokens: Mapping[str, int],
               learn: Callable[[Sequence[ReplaySession]], dict[str, Any]]) -> list[str]:
    """The tools that a selection `learn`t on the older tasks of the fit sessions (`inner`, their
    own grouped split) misses hard on their newer ones, most missed per schema token first: what
    neither its rules nor its search reach, and so what an always-on set is for. Nested in the
    fit sessions, so the held-out ones stay unseen."""
    inner_fit, inner_held = inner
    if not inner_fit or not inner_held:
        return []
    result = simulate(catalog, {"selection": learn(inner_fit)}, inner_held, schema_tokens=schema_tokens)
    missed = Counter(miss.tool for miss in result.misses if miss.kind == HARD and miss.tool in ranked)
    return sorted(missed, key=lambda name: (-missed[name] / max(1, schema_tokens.get(name, 1)), name))
