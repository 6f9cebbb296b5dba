"""Replaying recorded sessions under a policy (engine/simulation.py): every figure below is
computed by hand from the costs and the sessions, per mode."""

from __future__ import annotations

from toolscope_agent.engine.simulation import (
    HARD,
    RECOVERABLE,
    RecordedCall,
    RecordedTurn,
    ReplaySession,
    simulate,
)

CATALOG = [
    {"name": "read_file", "description": "Read a file from disk."},
    {"name": "edit_file", "description": "Edit a file in place."},
    {"name": "run_tests", "description": "Run the project's test suite with pytest."},
    {"name": "git_diff", "description": "Show unstaged changes in the git repository."},
    {"name": "tool_search", "description": "Find tools by what they do."},
]
COSTS = {"read_file": 100, "edit_file": 200, "run_tests": 300, "git_diff": 400, "tool_search": 50}
EVERYTHING = ["read_file", "edit_file", "run_tests", "git_diff", "tool_search"]  # 1,050 tokens


def policy(mode: str, **selection) -> dict:
    return {"selection": {"mode": mode, "always_on": ["read_file"], "tool_search": {"top_k": 2, "ranker": "bm25f-2"},
                          **selection}}


def call(name: str, **arguments) -> RecordedCall:
    return RecordedCall(name, arguments)


# Two turns, every tool advertised on each (2 x 1,050 = 2,100 advertised tokens).
FIX_TESTS = ReplaySession("s1", [
    RecordedTurn(message="fix the failing tests", advertised=EVERYTHING,
                 calls=[call("read_file"), call("run_tests")]),
    RecordedTurn(message="fix the failing tests", advertised=EVERYTHING, calls=[call("edit_file")]),
])


def test_all_mode_sends_what_was_advertised_and_misses_nothing():
    result = simulate(CATALOG, policy("all"), [FIX_TESTS], schema_tokens=COSTS)
    assert (result.advertised_tokens, result.sent_tokens, result.saved_tokens) == (2100, 2100, 0)
    assert result.misses == [] and result.calls == 3 and result.miss_rate == 0


def test_context_rules_send_the_matching_group_and_miss_what_no_rule_covers():
    rules = policy("context_rules", groups={"testing": ["run_tests"]},
                   context_rules=[{"name": "tests", "keywords": ["tests"], "groups": ["testing"]}])
    result = simulate(CATALOG, rules, [FIX_TESTS], schema_tokens=COSTS)
    # Turn 0 sends read_file + run_tests (400); edit_file is missed on turn 1, where read_file,
    # run_tests (rule) and the discovered read_file/run_tests are sent: 400 again.
    assert [row.sent_tokens for row in result.turns] == [400, 400]
    assert result.saved_tokens == 2100 - 800
    assert [(m.turn, m.tool, m.kind) for m in result.misses] == [(1, "edit_file", HARD)]
    assert result.miss_rate == 1 / 3 and result.hard_misses == 1 and result.recovery_round_trips == 0
    assert result.tools["edit_file"].hard == 1 and result.tools["read_file"].calls == 1


def test_a_hard_miss_is_discovered_so_a_sticky_policy_sends_it_on_the_next_turn():
    session = ReplaySession("s2", [
        RecordedTurn(message="edit", advertised=EVERYTHING, calls=[call("edit_file")]),
        RecordedTurn(message="edit", advertised=EVERYTHING, calls=[call("edit_file")]),
    ])
    sticky = simulate(CATALOG, policy("context_rules"), [session], schema_tokens=COSTS)
    assert [row.sent_tokens for row in sticky.turns] == [100, 300] and len(sticky.misses) == 1
    forgetful = simulate(CATALOG, policy("context_rules", sticky_discovered=False), [session], schema_tokens=COSTS)
    assert [row.sent_tokens for row in forgetful.turns] == [100, 100] and len(forgetful.misses) == 2


def test_progressive_misses_are_recoverable_through_the_menu_and_the_menu_is_priced():
    result = simulate(CATALOG, policy("progressive"), [FIX_TESTS], schema_tokens=COSTS,
                      menu_tokens=lambda menu: 10)
    # Turn 0: read_file (100) + menu (10); run_tests missed (on the menu), and activated by the
    # call. Turn 1: read_file + run_tests (400) + menu; edit_file missed (on the menu).
    assert [row.sent_tokens for row in result.turns] == [110, 410]
    assert [(m.turn, m.tool, m.kind, m.path) for m in result.misses] == [
        (0, "run_tests", RECOVERABLE, "menu"), (1, "edit_file", RECOVERABLE, "menu")]
    assert result.recovery_round_trips == 2 and result.hard_misses == 0


def test_tool_search_misses_are_recoverable_when_the_search_ranks_the_tool():
    session = ReplaySession("s3", [
        RecordedTurn(message="show the unstaged git changes", advertised=EVERYTHING, calls=[call("git_diff")]),
        RecordedTurn(message="show the unstaged git changes", advertised=EVERYTHING, calls=[call("edit_file")]),
    ])
    search = policy("tool_search", always_on=["read_file", "tool_search"])
    result = simulate(CATALOG, search, [session], schema_tokens=COSTS)
    # Turn 0: read_file + tool_search (150); git_diff is found by searching the message, so it
    # is loaded: turn 1 sends read_file + tool_search + git_diff (550); edit_file is not in the
    # top 2 for that message: a hard miss.
    assert [row.sent_tokens for row in result.turns] == [150, 550]
    assert [(m.tool, m.kind, m.path) for m in result.misses] == [("git_diff", RECOVERABLE, "search"),
                                                                  ("edit_file", HARD, "")]
    assert result.saved_tokens == 2100 - 700 and round(result.saved_share, 4) == 0.6667


def test_a_recorded_search_loads_what_the_policys_search_answers():
    session = ReplaySession("s4", [
        RecordedTurn(message="", advertised=["tool_search"], calls=[call("tool_search", query="run the test suite")]),
        RecordedTurn(message="", advertised=["tool_search", "run_tests"], calls=[call("run_tests")]),
    ])
    result = simulate(CATALOG, policy("tool_search", always_on=["tool_search"]), [session], schema_tokens=COSTS)
    assert result.misses == []
    # The search's top 2 for "run the test suite": run_tests, and, as no other tool shares a term,
    # the nearest by spelling (read_file, 100): an answer is never short; both are loaded.
    assert [row.sent_tokens for row in result.turns] == [50, 50 + 300 + 100]
    assert [row.advertised_tokens for row in result.turns] == [50, 350]


def test_a_recovered_search_miss_loads_the_searchs_whole_answer_as_the_agent_does():
    """The model's search for a missed tool answers with the policy's top_k, and the agent's state
    loads all of it (SessionState.observe of a tool_search call with its results): the next turns
    send the whole answer, and a second call of the same turn to a tool in that answer is no miss
    (the one search found both: one round trip)."""
    session = ReplaySession("s4b", [
        RecordedTurn(message="run the test suite", advertised=EVERYTHING, input_tokens=1050 + 1000,
                     calls=[call("run_tests"), call("read_file")]),
        RecordedTurn(message="run the test suite", advertised=EVERYTHING, calls=[call("run_tests")]),
    ])
    result = simulate(CATALOG, policy("tool_search", always_on=["tool_search"]), [session], schema_tokens=COSTS)
    # The top 2 for the message: run_tests, then read_file (nearest by spelling, as above).
    assert [(m.turn, m.tool, m.kind) for m in result.misses] == [(0, "run_tests", RECOVERABLE)]
    assert [row.sent_tokens for row in result.turns] == [50, 50 + 300 + 100]
    assert result.round_trip_tokens == 50 + 1000


def test_a_tool_the_policy_does_not_allow_is_a_hard_miss_even_when_search_would_rank_it():
    session = ReplaySession("s5", [RecordedTurn(message="show the unstaged git changes", calls=[call("git_diff")])])
    search = policy("tool_search", always_on=["tool_search"], allowed=["tool_search", "read_file"])
    result = simulate(CATALOG, search, [session], schema_tokens=COSTS)
    assert [(m.tool, m.kind) for m in result.misses] == [("git_diff", HARD)]


def test_replay_is_deterministic_and_sessions_do_not_share_state():
    sessions = [FIX_TESTS, ReplaySession("s6", FIX_TESTS.turns)]
    rules = policy("context_rules")
    first = simulate(CATALOG, rules, sessions, schema_tokens=COSTS)
    assert first == simulate(CATALOG, rules, sessions, schema_tokens=COSTS)
    # Per session: run_tests on turn 0, edit_file on turn 1 (read_file is always on).
    assert [(m.session, m.tool) for m in first.misses] == [("s1", "run_tests"), ("s1", "edit_file"),
                                                          ("s6", "run_tests"), ("s6", "edit_file")]


def test_output_rules_price_duplicates_and_compaction():
    session = ReplaySession("s7", [RecordedTurn(message="", advertised=EVERYTHING, calls=[
        RecordedCall("run_tests", output_tokens=5000),                       # rule run_* (1500) < cap: 3500
        RecordedCall("read_file", output_tokens=900),                        # under its limit
        RecordedCall("read_file", output_tokens=900, duplicate_tokens=900, placeholder_tokens=20),  # 880 saved
        RecordedCall("git_diff", output_tokens=3000),                        # max_result_tokens 1000: 2000
    ])])
    document = {**policy("all"), "outputs": {"duplicates": {"suppress": True}, "compaction": [
        {"tools": "run_*", "max_tokens": 1500, "strategy": "head_tail"},
        {"tools": "read_file", "max_tokens": 2000, "strategy": "head"}]},
        "tools": {"git_diff": {"max_result_tokens": 1000}, "run_tests": {"max_result_tokens": 4000}}}
    result = simulate(CATALOG, document, [session], schema_tokens=COSTS)
    assert (result.duplicate_tokens_saved, result.compaction_tokens_saved) == (880, 3500 + 2000)
    assert result.tools["read_file"].output_tokens_saved == 880
    kept = {**document, "outputs": {"duplicates": {"suppress": False}, "compaction": []}, "tools": {}}
    plain = simulate(CATALOG, kept, [session], schema_tokens=COSTS)
    assert (plain.duplicate_tokens_saved, plain.compaction_tokens_saved) == (0, 0)


def test_a_turn_without_a_message_continues_the_task_of_the_turn_before():
    """A turn that only carries tool results (an Anthropic transcript's later turns) is matched
    with the session's task message, as an agent passes its task to `tools()` on every turn."""
    rules = policy("context_rules", sticky_discovered=False, groups={"editing": ["edit_file"]},
                   context_rules=[{"name": "fix", "keywords": ["fix"], "groups": ["editing"]}])
    session = ReplaySession("s2", [
        RecordedTurn(message="fix the typo", advertised=EVERYTHING, calls=[call("read_file")]),
        RecordedTurn(message="", advertised=EVERYTHING, calls=[call("edit_file")]),
        RecordedTurn(message="now list the files", advertised=EVERYTHING, calls=[call("edit_file")]),
    ])
    result = simulate(CATALOG, rules, [session], schema_tokens=COSTS)
    # Turns 0 and 1 send read_file + edit_file (300); turn 2's own message matches no rule (100),
    # so its edit_file call is missed.
    assert [row.sent_tokens for row in result.turns] == [300, 300, 100]
    assert [(m.turn, m.tool) for m in result.misses] == [(2, "edit_file")]


def test_cached_selections_and_searches_give_each_session_what_a_replay_of_it_alone_gives():
    """Selections are cached by (message, state) and searches by query across a replay's
    sessions: replaying them together equals replaying each alone, in every mode."""
    tasks = ["fix the failing tests", "show the git diff", "", "edit the file and run tests"]
    names = ["read_file", "edit_file", "run_tests", "git_diff", "tool_search"]
    sessions = [ReplaySession(f"s{n}", [
        RecordedTurn(message=tasks[(n + t) % 4] if t == 0 or n % 3 == 0 else "", advertised=EVERYTHING,
                     calls=[call(names[(n * 7 + t * 3 + k) % 5], query=tasks[n % 4]) for k in range(n % 3)],
                     model_output="try $git_diff" if (n + t) % 5 == 0 else "")
        for t in range(4)]) for n in range(24)]
    for mode in ("context_rules", "progressive", "tool_search"):
        document = policy(mode, groups={"testing": ["run_tests"]}, sticky_discovered=mode != "progressive",
                          context_rules=[{"name": "tests", "keywords": ["tests"], "groups": ["testing"]}])
        together = simulate(CATALOG, document, sessions, schema_tokens=COSTS, menu_tokens=len)
        alone = [simulate(CATALOG, document, [session], schema_tokens=COSTS, menu_tokens=len) for session in sessions]
        assert together.turns == [row for result in alone for row in result.turns], mode
        assert together.misses == [miss for result in alone for miss in result.misses], mode
        assert together.misses and together.sent_tokens < together.advertised_tokens, mode


def test_a_recoverable_miss_costs_a_round_trip_that_resends_the_turns_context():
    """Issue 25, item 2: each recoverable miss is one extra model request re-sending the turn's
    context: the policy's schema tokens that turn plus the rest of the recorded input (the
    turn's estimated input less the schema tokens then advertised), else ROUND_TRIP_CONTEXT_TOKENS.
    Issue 26: so is each hard miss under a policy that sends the search tool (a failed search)."""
    from toolscope_agent.engine.simulation import ROUND_TRIP_CONTEXT_TOKENS

    session = ReplaySession("s3", [
        RecordedTurn(message="show the unstaged git changes", advertised=EVERYTHING, calls=[call("git_diff")],
                     input_tokens=1050 + 3000),
        RecordedTurn(message="show the unstaged git changes", advertised=EVERYTHING, calls=[call("edit_file")]),
    ])
    search = policy("tool_search", always_on=["read_file", "tool_search"])
    result = simulate(CATALOG, search, [session], schema_tokens=COSTS)
    # Turn 0: read_file + tool_search sent (150) + 3,000 of history. Turn 1's miss is hard, but the
    # model still searched for edit_file and was answered without it: the same round trip, with
    # git_diff (found on turn 0) sent too and the history not known (ROUND_TRIP_CONTEXT_TOKENS).
    assert [row.round_trip_tokens for row in result.turns] == [150 + 3000, 150 + 400 + ROUND_TRIP_CONTEXT_TOKENS]
    trips = 3150 + 550 + ROUND_TRIP_CONTEXT_TOKENS
    assert result.round_trip_tokens == trips and result.net_saved_tokens == result.saved_tokens - trips
    assert (result.hard_miss_rate, result.recoverable_miss_rate) == (0.5, 0.5)
    unknown = simulate(CATALOG, search, [ReplaySession("s4", [RecordedTurn(
        message="show the unstaged git changes", advertised=EVERYTHING, calls=[call("git_diff")])])],
        schema_tokens=COSTS)
    assert unknown.round_trip_tokens == 150 + ROUND_TRIP_CONTEXT_TOKENS
    progressive = simulate(CATALOG, policy("progressive"), [FIX_TESTS], schema_tokens=COSTS,
                           menu_tokens=lambda menu: 10)
    assert progressive.round_trip_tokens == 110 + 410 + 2 * ROUND_TRIP_CONTEXT_TOKENS


class Meaning:
    """A semantic search that understands "bring my change back" means edit_file (a stand-in for
    toolscope_agent.semantic.HybridIndex: the engine does no I/O, the caller hands it the model)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def search(self, query, top_k=8, *, max_top_k=20):
        from toolscope_agent.engine.search import SearchHit

        self.asked.append(query)
        return [SearchHit(name, 1.0, name, "") for name in ["edit_file", "git_diff"][:top_k]]


def test_a_policy_that_fuses_semantic_ranking_searches_with_it_and_only_then():
    session = ReplaySession("s", [RecordedTurn(message="bring my change back", advertised=EVERYTHING,
                                               calls=[call("edit_file")])])
    lexical = policy("tool_search", always_on=["read_file", "tool_search"])
    fused = policy("tool_search", always_on=["read_file", "tool_search"],
                   tool_search={"top_k": 2, "ranker": "bm25f-2", "semantic": {"model": "m@1", "fusion": "convex"}})
    native = policy("tool_search", always_on=["read_file", "tool_search"],
                    tool_search={"top_k": 2, "semantic": {"model": "m@1"}, "provider_search": True})
    meaning = Meaning()
    assert [m.kind for m in simulate(CATALOG, lexical, [session], schema_tokens=COSTS, semantic=meaning).misses] == [
        HARD]
    assert [(m.kind, m.path) for m in simulate(CATALOG, fused, [session], schema_tokens=COSTS,
                                               semantic=meaning).misses] == [(RECOVERABLE, "search")]
    # Without the model the same document ranks lexically, as a server without it answers.
    assert [m.kind for m in simulate(CATALOG, fused, [session], schema_tokens=COSTS).misses] == [HARD]
    # The provider's own search is the provider's: never toolscope's fusion.
    asked = len(meaning.asked)
    simulate(CATALOG, native, [session], schema_tokens=COSTS, semantic=meaning)
    assert len(meaning.asked) == asked
