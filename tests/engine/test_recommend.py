"""Policy recommendations (engine/recommend.py): candidates learnt on older sessions, scored on
newer ones, the Pareto curve and the pick, on sessions whose right answer is known."""

from __future__ import annotations

import math
from dataclasses import replace
from itertools import pairwise

import pytest
from toolscope_agent.engine.recommend import (
    LARGE_CATALOG,
    Candidate,
    candidates,
    evaluate,
    hard_miss_error,
    pareto,
    recommend,
    with_search_tool,
)
from toolscope_agent.engine.render import SEARCH_TOOL
from toolscope_agent.engine.simulation import (
    HARD,
    Miss,
    RecordedCall,
    RecordedTurn,
    ReplaySession,
    Simulation,
    TurnFigures,
)

NAMES = ["read_file", "edit_file", "git_status", "git_diff", "git_commit", "deploy", "rollback",
         "query_db", "send_email", "tool_search"]
CATALOG = [{"name": name, "description": f"The {name.replace('_', ' ')} tool."} for name in NAMES]
COSTS = dict.fromkeys(NAMES, 100)


def session(key: str, message: str, *calls: str) -> ReplaySession:
    """`calls`: tool names; edit_file's outputs are 9,000 tokens, the others' 300."""
    return ReplaySession(key, [RecordedTurn(message=message, advertised=NAMES, calls=[
        RecordedCall(name, output_tokens=9000 if name == "edit_file" else 300) for name in calls])])


def history(prefix: str, count: int) -> list[ReplaySession]:
    """Every session reads and edits; every third commits with the git tools after 'commit'."""
    sessions = []
    for n in range(count):
        if n % 3 == 0:
            sessions.append(session(f"{prefix}{n}", "commit the fix", "read_file", "git_status", "git_diff",
                                    "git_commit"))
        else:
            sessions.append(session(f"{prefix}{n}", "fix the bug", "read_file", "edit_file"))
    return sessions


def test_always_on_sets_follow_the_coverage_curve():
    found = {c.name: c for c in candidates(CATALOG, history("f", 12))}
    assert found["always-on top 1"].selection["always_on"] == ["read_file"]
    assert found["always-on top 2"].selection["always_on"] == ["read_file", "edit_file"]
    assert found["tool_search + top 0"].selection == {**found["tool_search + top 0"].selection,
                                                      "mode": "tool_search", "always_on": ["tool_search"]}


def test_tools_called_together_form_a_group_with_a_rule_from_the_task_words():
    found = {c.name: c for c in candidates(CATALOG, history("f", 12))}
    rules = found["always-on top 1 + 1 rules"].selection
    assert rules["groups"] == {"group_1": ["git_commit", "git_diff", "git_status"]}
    assert rules["context_rules"] == [{"name": "group_1", "keywords": ["commit"], "regex": None,
                                       "groups": ["group_1"]}]


def test_large_outputs_get_a_compaction_rule():
    outputs = candidates(CATALOG, history("f", 12))[0].outputs
    assert outputs["compaction"] == [{"tools": "edit_file", "max_tokens": 2000, "strategy": "head_tail"}]


def test_the_pick_saves_most_within_the_miss_budget_on_held_out_sessions():
    scored = evaluate(CATALOG, candidates(CATALOG, history("f", 12)), history("h", 9), schema_tokens=COSTS)
    front = pareto(scored)
    assert [c.hard_miss_rate for c in front] == sorted(c.hard_miss_rate for c in front)
    assert all(a.net_saved_share < b.net_saved_share for a, b in pairwise(front))
    best = recommend(front)
    # Read + edit always on and the git group on "commit": nothing missed on held-out sessions,
    # 7 of 10 schemas (or more) not sent.
    assert best is not None and best.miss_rate == 0.0 and best.saved_share >= 0.7
    assert best.selection["always_on"][:2] == ["read_file", "edit_file"]
    assert not any(c.net_saved_share > best.net_saved_share and c.hard_miss_rate <= 0.02 for c in scored)


def test_with_no_candidate_in_budget_the_least_missing_is_picked():
    scored = evaluate(CATALOG, candidates(CATALOG, history("f", 12)), history("h", 9), schema_tokens=COSTS)
    best = recommend(pareto(scored), miss_budget=-1.0)
    assert best is not None and best.hard_miss_rate == min(c.hard_miss_rate for c in scored)


def test_tools_that_rules_miss_are_kept_on_cheapest_miss_first_and_rules_send_the_rest():
    """`deploy` (12 of 24 sessions) follows the word "deploy"; `query_db` (8) and `send_email` (6)
    follow no word a rule could learn. Coverage would keep `deploy` on first; the family learnt
    from what rules miss keeps `query_db` on (most missed per schema token), then `send_email`,
    and leaves `deploy` to its rule."""
    costs = {**COSTS, "query_db": 50, "send_email": 400}
    fit = []
    for n in range(24):
        if n % 2 == 0:
            fit.append(session(f"f{n}", "deploy it now", "deploy"))
        else:
            unique_word = "".join(chr(97 + (7 * n + k) % 26) for k in range(5))
            fit.append(session(f"f{n}", unique_word, "query_db" if n % 3 else "send_email"))
    found = {c.name: c for c in candidates(CATALOG, fit, schema_tokens=costs)}
    assert found["always-on top 1"].selection["always_on"] == ["deploy"]
    first = found["1 rules + always-on 1 they miss"].selection
    assert first["always_on"] == ["query_db"]
    assert first["context_rules"] == [{"name": "group_1", "keywords": ["deploy"], "regex": None,
                                       "groups": ["group_1"]}]
    assert first["groups"]["group_1"] == ["deploy"]
    assert found["1 rules + always-on 2 they miss"].selection["always_on"] == ["query_db", "send_email"]


def test_the_same_policy_is_a_candidate_once_under_its_first_name():
    found = candidates(CATALOG, history("f", 12), schema_tokens=COSTS)
    sent = [(c.selection["mode"], sorted(c.selection["always_on"]), c.selection["context_rules"],
             c.selection["tool_search"].get("provider_search", False), c.selection.get("tool_list"),
             c.selection["tool_search"].get("defer_loading", False), c.selection["tool_search"]["top_k"])
            for c in found]
    assert len(sent) == len({repr(key) for key in sent})
    assert "always-on top 2 + 1 rules" in {c.name for c in found}


def test_a_large_catalog_gets_toolscopes_search_tool_once():
    catalog = [{"name": f"tool_{n}"} for n in range(LARGE_CATALOG)]
    added, costs = with_search_tool(catalog, {"tool_0": 10}, 70)
    assert added[-1] is SEARCH_TOOL and costs == {"tool_0": 10, "tool_search": 70}
    assert with_search_tool(added, costs, 99) == (added, costs)
    assert "tool_search + top 0" in {c.name for c in candidates(added, history("f", 12))}


# Issue 25, item 2: rank on hard misses, and price a recoverable miss's round trip in tokens.
# A catalog of 40 costly tools: `read_file` is called in every session, and each session also
# calls one rare tool (none called in 3 sessions, so no context rule can be learnt for it).
RARE = ["deploy", "rollback", "invoice", "refund", "translate", "resize", "encrypt", "decrypt", "archive",
        "schedule", "notify", "backup", "restore", "compress", "transcribe", "geocode", "forecast", "tweet",
        "convert", "benchmark", "vaccinate", "harvest", "audit", "provision", "migrate", "reindex",
        "subscribe", "unsubscribe", "checkout", "ship", "weigh", "measure", "paint", "sketch", "mint",
        "stake", "brew", "bake", "plant"]
# The 15 tools no session calls come first: they fill a search's answer that matched nothing.
WIDE = [{"name": "read_file", "description": "Read a file."},
        *({"name": f"{word}_tool", "description": f"Can {word} things: {word} anything."}
          for word in RARE[24:] + RARE[:24]),
        {"name": "tool_search", "description": "Find tools by what they do."}]
WIDE_COSTS = {**{tool["name"]: 500 for tool in WIDE}, "tool_search": 100}
WIDE_ADVERTISED = [tool["name"] for tool in WIDE]
HISTORY_TOKENS = 1000


def wide(prefix: str, count: int, *, findable: bool) -> list[ReplaySession]:
    """`count` sessions of one turn; session n calls read_file and RARE[n % 24]'s tool. A
    findable task names what the tool does; otherwise it is digits no search could match, not even
    by spelling (the fillers of an answer that matched nothing are then the catalog's first tools)."""
    sessions = []
    for n in range(count):
        word = RARE[n % 24]
        message = f"please {word} it" if findable else "".join(str((7 * n + k) % 10) for k in range(6))
        sessions.append(ReplaySession(f"{prefix}{n}", [RecordedTurn(
            message=message, advertised=WIDE_ADVERTISED, input_tokens=sum(WIDE_COSTS.values()) + HISTORY_TOKENS,
            calls=[RecordedCall("read_file"), RecordedCall(f"{word}_tool")])]))
    return sessions


def scored_wide(*, findable: bool) -> dict[str, object]:
    fit, held_out = wide("f", 24, findable=findable), wide("h", 24, findable=findable)
    scored = evaluate(WIDE, candidates(WIDE, fit, schema_tokens=WIDE_COSTS), held_out, schema_tokens=WIDE_COSTS)
    return {"scored": {c.name: c for c in scored}, "best": recommend(pareto(scored))}


def test_tool_search_that_finds_every_missed_tool_is_recommended():
    found = scored_wide(findable=True)
    search, always = found["scored"]["tool_search + top 1"], found["scored"]["always-on top 25"]
    # Every rare tool is missed but found by the search: no hard miss, one round trip each
    # (read_file + tool_search, 600, plus 1,000 of history).
    assert (search.hard_miss_rate, search.recoverable_miss_rate, search.miss_rate) == (0.0, 0.5, 0.5)
    assert search.schema_tokens_saved == 24 * (20_100 - 600) and search.round_trip_tokens == 24 * 1600
    assert search.net_saved_tokens == 24 * (20_100 - 600 - 1600)
    assert always.hard_miss_rate == 0.0
    assert always.net_saved_tokens == always.schema_tokens_saved == 24 * (20_100 - 12_500)
    assert search.net_saved_tokens > always.net_saved_tokens
    # The best finds the rare tools with toolscope's search. Deferring read_file too can win: the
    # search for the task answers with read_file among its top 20, one round trip for both calls.
    best = found["best"]
    assert best.hard_miss_rate == 0.0 and best.selection["mode"] == "tool_search"
    assert best.net_saved_tokens >= search.net_saved_tokens


def test_tool_search_that_recovers_nothing_is_not_recommended():
    found = scored_wide(findable=False)
    search = found["scored"]["tool_search + top 1"]
    assert search.hard_miss_rate == 0.5 and search.recoverable_miss_rate == 0.0
    # Each hard miss still cost the search the model made for its tool: the same round trip as a
    # recovered one (read_file + tool_search, 600, plus 1,000 of history).
    assert search.round_trip_tokens == 24 * 1600 and search.net_saved_tokens == 24 * (20_100 - 600 - 1600)
    # What misses nothing wins: a menu of the rare tools (each one round trip), or all of them.
    assert found["best"].name in ("always-on top 25", "progressive menu + top 0")
    assert found["best"].hard_miss_rate == 0.0
    menu = found["scored"]["progressive menu + top 0"]
    assert (menu.hard_miss_rate, menu.recoverable_miss_rate) == (0.0, 1.0)  # read_file too: it is on the menu
    # Its menu is priced on every request (here one token per four characters: no tokenizer given).
    from toolscope_agent.engine.selection import SessionState, select_tools
    from toolscope_agent.engine.tokens import approximate_counter

    text = select_tools(WIDE, menu.document(), SessionState(), "").menu
    assert menu.schema_tokens_saved == 24 * (20_100 - approximate_counter(text)) and menu.round_trip_tokens > 0


def test_round_trips_make_many_recoverable_misses_lose_to_few_at_equal_schema_savings():
    """Two tool_search policies sending one costly tool each besides read_file: the one that
    keeps the tool most sessions call on misses (recoverably) far less often."""
    held_out = wide("h", 24, findable=True)
    often = [*held_out, *(ReplaySession(f"x{n}", [RecordedTurn(
        message="please deploy it", advertised=WIDE_ADVERTISED, input_tokens=20_600,
        calls=[RecordedCall("deploy_tool")])]) for n in range(12))]

    def search_with(tool: str) -> Candidate:
        selection = {"mode": "tool_search", "always_on": ["read_file", tool, "tool_search"],
                     "tool_search": {"top_k": 8, "ranker": "bm25f-2"}}
        return Candidate(f"tool_search + {tool}", selection, {})

    few, many = evaluate(WIDE, [search_with("deploy_tool"), search_with("paint_tool")], often,
                         schema_tokens=WIDE_COSTS)
    assert few.schema_tokens_saved == many.schema_tokens_saved and few.hard_miss_rate == many.hard_miss_rate == 0
    assert few.recoverable_miss_rate < many.recoverable_miss_rate and few.round_trip_tokens < many.round_trip_tokens
    assert few.net_saved_tokens > many.net_saved_tokens
    assert pareto([many, few]) == [few] and recommend(pareto([many, few])) == few


def figures(*clusters: tuple[int, int]) -> Simulation:
    """A simulation of one session per (calls, hard misses) pair."""
    result = Simulation()
    for index, (calls, hard) in enumerate(clusters):
        result.turns.append(TurnFigures(session=f"s{index}", turn=0, advertised_tokens=0, sent_tokens=0, sent_tools=0,
                                        calls=calls, misses=hard))
        result.misses.extend(Miss(f"s{index}", 0, "cd", HARD, "") for _ in range(hard))
    return result


def test_the_hard_miss_error_counts_tasks_not_calls():
    """Four tasks of ten calls: four hard misses in one task is far less certain than one in each."""
    clustered, spread = figures((10, 4), (10, 0), (10, 0), (10, 0)), figures((10, 1), (10, 1), (10, 1), (10, 1))
    assert clustered.hard_miss_rate == spread.hard_miss_rate == 0.1
    by_session = {f"s{n}": f"s{n}" for n in range(4)}
    # sum of (hard - 0.1 * calls)^2 = 9 + 1 + 1 + 1; times 4/3; over 40^2: a variance of 0.01.
    assert hard_miss_error(clustered, by_session) == pytest.approx(0.1)
    assert hard_miss_error(clustered, by_session) > math.sqrt(0.1 * 0.9 / 40)  # the binomial error, calls independent
    assert hard_miss_error(spread, by_session) == 0.0
    # Sessions of one task are one cluster: two tasks (s0+s1, s2+s3) hold 4 and 0 misses of 20 calls.
    assert hard_miss_error(clustered, {"s0": "a", "s1": "a", "s2": "b", "s3": "b"}) == pytest.approx(
        math.sqrt(2 * (2 ** 2 + 2 ** 2)) / 40)
    assert hard_miss_error(clustered, dict.fromkeys(by_session, "one task")) == 0.0  # nothing to compare


def test_the_pick_keeps_one_standard_error_within_the_budget():
    lucky = Candidate("lucky", {}, {}, hard_miss_rate=0.015, hard_miss_error=0.008, net_saved_share=0.92)
    steady = Candidate("steady", {}, {}, hard_miss_rate=0.006, hard_miss_error=0.003, net_saved_share=0.88)
    assert recommend([steady, lucky]) == steady
    assert recommend([steady, replace(lucky, hard_miss_error=0.004)]).name == "lucky"
    assert recommend([replace(steady, hard_miss_error=0.02), lucky]).name == "steady"  # none within: fewest misses


def test_evaluate_clusters_the_error_by_task():
    """Held-out sessions repeating one task miss together: the error is that of two tasks."""
    held_out = [*wide("h", 2, findable=False), *wide("g", 2, findable=False)]
    held_out = [ReplaySession(s.key, [replace(s.turns[0], message=("task one" if s.key[0] == "h" else "task two"))])
                for s in held_out]
    plain = Candidate("plain", {"mode": "context_rules", "always_on": ["read_file"]}, {})
    (scored,) = evaluate(WIDE, [plain], held_out, schema_tokens=WIDE_COSTS)
    assert scored.hard_miss_rate == 0.5 and scored.hard_miss_error == 0.0  # both tasks miss half their calls


def test_priced_sessions_are_ranked_on_dollars_and_the_providers_deferral_keeps_the_cache():
    """Sessions of claude-sonnet-4-5, three requests 30 s apart, each calling another rare tool the
    search finds. In tokens, toolscope's search and the provider's own deferred loading save the
    same; in dollars the provider's keeps the tool list at the head of the prompt put (what its
    search loads joins the conversation), so every request reads the one before, and it wins."""
    from toolscope_agent.engine.cache import rules_for
    from toolscope_agent.engine.replay_pricing import CachePricing

    sonnet = CachePricing(rules_for("anthropic", "claude-sonnet-4-5"), input=3, cache_read=0.3, cache_write=3.75,
                          cache_write_1h=6)

    def sessions(prefix: str) -> list[ReplaySession]:
        return [ReplaySession(f"{prefix}{n}", [RecordedTurn(
            message=f"please {RARE[(n + k) % 24]} it", advertised=WIDE_ADVERTISED, at=30.0 * k,
            input_tokens=sum(WIDE_COSTS.values()) + 3000 + 500 * k,
            calls=[RecordedCall(f"{RARE[(n + k) % 24]}_tool")]) for k in range(3)], model="claude-sonnet-4-5")
            for n in range(12)]

    scored = {c.name: c for c in evaluate(WIDE, candidates(WIDE, sessions("f")), sessions("h"),
                                          schema_tokens=WIDE_COSTS, pricing={"claude-sonnet-4-5": sonnet})}
    ours, native = scored["tool_search + top 0"], scored["provider's deferred loading + top 0"]
    assert native.selection["tool_search"]["provider_search"] is True
    assert (ours.net_saved_share, ours.hard_miss_rate) == (native.net_saved_share, native.hard_miss_rate)
    assert ours.priced_sessions == native.priced_sessions == 12
    assert ours.cache_breaks > 0 and native.cache_breaks == 0
    assert native.policy_dollars < ours.policy_dollars and native.benefit > ours.benefit
    best = recommend(pareto(list(scored.values())))
    assert best is not None and best.benefit == max(c.benefit for c in scored.values() if c.hard_miss_rate <= 0.02)
    # Deferred loading with toolscope's search keeps the cache as the provider's does, and
    # searches as toolscope does (its top 20: here it finds what the top 8 finds). Each answer
    # loads 20 definitions into the conversation against the provider's 8: it costs more.
    deferred = scored["deferred loading + top 0, toolscope's search top 20"]
    assert deferred.selection["tool_search"] == {**deferred.selection["tool_search"], "defer_loading": True,
                                                 "top_k": 20}
    assert native.selection["tool_search"]["top_k"] == 8
    assert "provider_search" not in deferred.selection["tool_search"]
    assert deferred.cache_breaks == 0 and deferred.hard_miss_rate == native.hard_miss_rate
    assert native.policy_dollars < deferred.policy_dollars < ours.policy_dollars


def test_cache_keeping_shapes_are_candidates_beside_the_per_request_ones():
    """Issue 26, item 5: the same rules with the session's list kept (append-only) or fixed at its
    first request, so a recommendation priced in dollars can pick the shape that keeps the cache."""
    found = candidates(CATALOG, history("f", 12), schema_tokens=COSTS)
    lists = {c.selection.get("tool_list", "per_request") for c in found}
    assert lists == {"per_request", "append_only", "fixed"}
    kept = [c for c in found if c.selection.get("tool_list") == "append_only"]
    assert all(c.selection["mode"] == "context_rules" and "append-only list" in c.name for c in kept)


def test_with_the_servers_model_candidates_that_search_with_toolscopes_search_fuse_it():
    semantic = {"model": "all-MiniLM-L6-v2@abc", "fusion": "convex", "alpha": 0.5}
    found = candidates(CATALOG, history("f", 12), schema_tokens=COSTS, semantic=semantic)
    searching = [c for c in found if c.selection["mode"] == "tool_search" or "tool_search" in c.selection["always_on"]]
    ours = [c for c in searching if not c.selection["tool_search"].get("provider_search")]
    assert ours and all(c.selection["tool_search"]["semantic"] == semantic for c in ours)
    # The provider's own search is not ours, and a policy that never searches needs no model.
    assert all("semantic" not in c.selection["tool_search"] for c in found if c not in ours)
