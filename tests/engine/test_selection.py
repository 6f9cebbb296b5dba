"""Tool selection (engine/selection.py): the policy's selection section applied to a catalog."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from toolscope_agent.engine.selection import Selection, SessionState, keyword_pattern, select_tools


def tool(name: str, description: str = "") -> dict:
    return {"name": name, "description": description or f"The {name} tool. It does things.",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}


CATALOG = [tool(name) for name in (
    "read_file", "edit_file", "bash", "tool_search", "git_status", "git_diff", "git_commit", "run_tests",
    "web_fetch", "deploy",
)]


def policy(mode: str, **selection) -> dict:
    base = {
        "mode": mode,
        "allowed": None,
        "always_on": ["read_file", "edit_file", "bash", "tool_search"],
        "groups": {"git": ["git_status", "git_diff", "git_commit"], "testing": ["run_tests"],
                   "web": ["web_fetch"]},
        "context_rules": [
            {"name": "testing", "keywords": ["test", "spec"], "regex": None, "groups": ["testing"]},
            {"name": "git", "keywords": [], "regex": r"\b(commit|diff)\w*", "groups": ["git"]},
            {"name": "web", "keywords": ["pull request", "url"], "regex": None, "groups": ["web"]},
        ],
        "progressive": {"hint_prefix": "$"},
        "tool_search": {"top_k": 8, "max_top_k": 20, "provider_search": False},
        "sticky_discovered": True,
    }
    base.update(selection)
    return {"schema_version": 1, "selection": base}


def sent(selection: Selection) -> list[str]:
    return [t["name"] for t in selection.tools]


# -- modes -------------------------------------------------------------------------------------

def test_all_mode_sends_every_allowed_tool_in_catalog_order():
    selection = select_tools(CATALOG, policy("all"), SessionState())
    assert sent(selection) == [t["name"] for t in CATALOG]
    assert selection.deferred == [] and selection.menu is None and selection.mode == "all"
    assert selection.reasons["bash"] == "always_on" and selection.reasons["deploy"] == "all"


def test_allowed_restricts_every_mode_and_unknown_names_are_ignored():
    doc = policy("all", allowed=["bash", "deploy", "not_in_catalog"])
    assert sent(select_tools(CATALOG, doc, SessionState())) == ["bash", "deploy"]
    doc = policy("context_rules", allowed=["git_diff", "read_file"])
    assert sent(select_tools(CATALOG, doc, SessionState(), "show the diff")) == ["read_file", "git_diff"]


def test_missing_sections_fall_back_to_all_and_a_bare_section_is_accepted():
    assert sent(select_tools(CATALOG, {}, SessionState())) == [t["name"] for t in CATALOG]
    assert select_tools(CATALOG, {"selection": {"mode": "bogus"}}, SessionState()).mode == "all"
    bare = policy("context_rules")["selection"]
    assert "run_tests" in sent(select_tools(CATALOG, bare, SessionState(), "run the test"))


@pytest.mark.parametrize(("message", "expected"), [
    ("fix the test", True),
    ("Fix the TEST.", True),
    ("(test)", True),
    ("the latest build", False),
    ("tests are red", False),
    ("test_utils is broken", False),
    ("write a spec", True),
    ("", False),
])
def test_keywords_match_whole_words_case_insensitively(message, expected):
    selection = select_tools(CATALOG, policy("context_rules"), SessionState(), message)
    assert ("run_tests" in sent(selection)) is expected
    if expected:
        assert selection.reasons["run_tests"] == "rule:testing"


def test_multi_word_keywords_match_across_any_whitespace():
    assert keyword_pattern(("pull request",)).search("review this pull\n  request")
    assert not keyword_pattern(("pull request",)).search("pullrequest")
    assert keyword_pattern(()) is None


def test_regex_rules_are_case_insensitive_and_every_matching_rule_adds_its_groups():
    selection = select_tools(CATALOG, policy("context_rules"), SessionState(), "COMMIT it, then test, see url")
    assert sent(selection) == ["read_file", "edit_file", "bash", "tool_search", "git_status", "git_diff",
                               "git_commit", "run_tests", "web_fetch"]
    assert selection.reasons["git_diff"] == "rule:git" and selection.reasons["web_fetch"] == "rule:web"
    assert [t["name"] for t in selection.deferred] == ["deploy"]


def test_an_invalid_regex_never_matches_and_never_raises():
    doc = policy("context_rules", context_rules=[{"name": "bad", "regex": "([", "groups": ["git"]}])
    assert "git_diff" not in sent(select_tools(CATALOG, doc, SessionState(), "(["))


def test_context_rules_keep_discovered_tools_only_when_sticky():
    state = SessionState()
    state.observe("", [{"name": "deploy", "arguments": {}}])
    assert select_tools(CATALOG, policy("context_rules"), state, "hello").reasons["deploy"] == "discovered"
    assert "deploy" not in sent(select_tools(CATALOG, policy("context_rules", sticky_discovered=False), state, "hi"))


def test_progressive_sends_a_menu_and_activates_hinted_tools_from_the_next_turn():
    doc = policy("progressive")
    state = SessionState()
    first = select_tools(CATALOG, doc, state, "show me the diff")
    assert sent(first) == ["read_file", "edit_file", "bash", "tool_search"]
    assert first.menu is not None and first.menu.startswith("Tools you can use (write $name")
    assert "- git_diff: The git_diff tool." in first.menu and "* bash (active)" in first.menu
    assert len(first.menu.splitlines()) == 1 + len(CATALOG)
    state.observe("I will look at the changes with $git_diff.", [])
    second = select_tools(CATALOG, doc, state, "")
    assert second.reasons["git_diff"] == "activated"
    assert "* git_diff (active)" in (second.menu or "")
    assert "git_diff" not in [t["name"] for t in second.deferred]


def test_progressive_hint_prefix_comes_from_the_policy_and_calls_activate_too():
    doc = policy("progressive", progressive={"hint_prefix": "@@"})
    state = SessionState()
    state.observe("use @@web_fetch and $deploy", [{"name": "git_status", "arguments": {}}], hint_prefix="@@")
    assert state.activated == ["web_fetch", "git_status"]
    assert {"web_fetch", "git_status"} <= set(sent(select_tools(CATALOG, doc, state)))
    assert "write @@name" in (select_tools(CATALOG, doc, state).menu or "")


def test_unknown_hints_are_kept_but_never_selected():
    state = SessionState()
    state.observe("$nonexistent and $HOME", [])
    assert state.activated == ["nonexistent", "HOME"]
    assert set(sent(select_tools(CATALOG, policy("progressive"), state))) <= {t["name"] for t in CATALOG}


def test_tool_search_loaded_tools_join_only_from_the_next_select():
    doc = policy("tool_search", always_on=["read_file", "tool_search"])
    state = SessionState()
    first = select_tools(CATALOG, doc, state, "I need git")
    assert sent(first) == ["read_file", "tool_search"]
    assert first.reasons["tool_search"] == "search_tool"
    state.observe("", [{"name": "tool_search", "arguments": {"query": "git"},
                        "results": ["git_status", {"name": "git_diff"}, "ghost"]}])
    assert state.loaded == ["git_status", "git_diff", "ghost"]
    assert sent(first) == ["read_file", "tool_search"]  # an earlier selection is not affected
    second = select_tools(CATALOG, doc, state, "")
    assert sent(second) == ["read_file", "tool_search", "git_status", "git_diff"]
    assert second.reasons["git_diff"] == "loaded"


def test_tool_search_mode_sends_the_search_tool_even_when_always_on_forgets_it_and_works_without_one():
    doc = policy("tool_search", always_on=["bash"])
    assert sent(select_tools(CATALOG, doc, SessionState())) == ["bash", "tool_search"]
    catalog = [t for t in CATALOG if t["name"] != "tool_search"]
    selection = select_tools(catalog, doc, SessionState())
    assert sent(selection) == ["bash"] and len(selection.deferred) == len(catalog) - 1


def test_nameless_and_repeated_catalog_entries():
    catalog = [{"description": "no name"}, {"name": 7}, tool("bash", "first"), tool("bash", "second"), tool("x")]
    selection = select_tools(catalog, policy("all"), SessionState())
    assert sent(selection) == ["bash", "x"] and selection.tools[0]["description"] == "first"
    selection = select_tools(catalog, policy("context_rules", allowed=["x", "bash"]), SessionState())
    assert sent(selection) == ["bash"] and [t["name"] for t in selection.deferred] == ["x"]


def test_malformed_policy_values_are_tolerated():
    doc = {"selection": {"mode": "context_rules", "always_on": "bash", "groups": ["git"], "allowed": "x",
                         "context_rules": ["junk", {"keywords": [1, None, "test"], "groups": [3, "testing"]}],
                         "sticky_discovered": "yes", "progressive": None}}
    selection = select_tools(CATALOG, doc, SessionState(), "test")
    assert sent(selection) == []  # groups was not a mapping, always_on not a list


# -- state -------------------------------------------------------------------------------------

def test_observe_records_calls_hints_and_search_results_in_first_seen_order():
    state = SessionState()
    state.observe("try $git_diff, then $git_status and $git_diff again", [
        {"name": "bash", "arguments": {}}, {"name": "bash"}, {"arguments": {}}, {"name": ""},
    ])
    assert state.discovered == ["bash"]
    assert state.activated == ["git_diff", "git_status", "bash"]
    assert state.turns == 1
    state.observe("", [{"name": "tool_search", "results": ["a", "a", 3, {"name": "b"}]}], hint_prefix="")
    assert state.loaded == ["a", "b"] and state.discovered == ["bash", "tool_search"] and state.turns == 2


def test_empty_hint_prefix_disables_hints():
    state = SessionState()
    state.observe("git_diff everywhere", [], hint_prefix="")
    assert state.activated == []


def test_state_round_trips_through_json_and_tolerates_missing_or_bad_keys():
    state = SessionState(loaded=["a"], discovered=["b"], activated=["c", "b"], turns=3, sent=["d"])
    again = SessionState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert again == state
    assert SessionState.from_dict({}) == SessionState()
    assert SessionState.from_dict(None) == SessionState()
    odd = SessionState.from_dict({"loaded": "x", "discovered": ["a", "a", 1], "turns": "9"})
    assert odd == SessionState(discovered=["a"])


def test_copy_is_independent():
    state = SessionState(loaded=["a"])
    clone = state.copy()
    clone.observe("", [{"name": "tool_search", "results": ["b"]}])
    assert state.loaded == ["a"] and clone.loaded == ["a", "b"]


# -- tool_list: what the provider's prompt cache keeps ------------------------------------------

def requests(document: dict, messages: list[str], *, calls: dict[int, list[str]] | None = None) -> list[dict]:
    """Each request's reasons, as an agent selects, notes and observes turn after turn."""
    state = SessionState()
    seen = []
    for position, message in enumerate(messages):
        selection = select_tools(CATALOG, document, state, message)
        state.note_request(message, selection)
        state.observe("", [{"name": name} for name in (calls or {}).get(position, [])])
        seen.append(selection.reasons)
    return seen


def test_per_request_lists_change_with_each_task():
    first, second = requests(policy("context_rules"), ["run the test suite", "show me the diff"])
    assert "run_tests" in first and "run_tests" not in second and "git_diff" in second


def test_an_append_only_list_keeps_every_tool_once_sent():
    first, second, third = requests(policy("context_rules", tool_list="append_only"),
                                    ["run the test suite", "show me the diff", "hello"])
    assert first["run_tests"] == "rule:testing"
    assert second["run_tests"] == "kept" and second["git_diff"] == "rule:git"
    assert list(third) == list(second)  # the list only grows: the cache it heads is kept


def test_a_fixed_list_reads_the_rules_on_the_first_request_and_grows_by_calls_and_searches():
    first, second, third = requests(policy("context_rules", tool_list="fixed"),
                                    ["run the test suite", "show me the diff", "and deploy"],
                                    calls={1: ["web_fetch", "tool_search"]})
    assert list(second) == list(first) and "git_diff" not in second
    # What the model called is sent from the next request (sticky), still without reading a rule.
    assert third["web_fetch"] == "discovered" and "git_diff" not in third


def test_a_kept_list_is_in_the_state_the_agent_carries_and_unknown_values_are_per_request():
    state = SessionState()
    selection = select_tools(CATALOG, policy("context_rules", tool_list="append_only"), state, "run a test")
    state.note_request("run a test", selection)
    assert selection.keeps and "run_tests" in SessionState.from_dict(json.loads(json.dumps(state.to_dict()))).sent
    odd = select_tools(CATALOG, policy("context_rules", tool_list="sometimes"), SessionState(), "run a test")
    assert not odd.keeps
    everything = select_tools(CATALOG, policy("all", tool_list="fixed"), SessionState(), "")
    assert not everything.keeps


# -- properties --------------------------------------------------------------------------------

NAMES = ["read_file", "bash", "tool_search", "git_diff", "git_status", "run_tests", "web", "deploy", "a.b", "x-y"]
WORDS = ["test", "git", "diff", "latest", "deploy", "web", "spec", "the", "fix"]
names = st.sampled_from([*NAMES, "ghost", "other"])
name_lists = st.lists(names, max_size=8)

catalogs = st.lists(
    st.builds(lambda n, d: {"name": n, "description": d, "input_schema": {}}, st.sampled_from(NAMES),
              st.text(max_size=30)),
    max_size=12,
)
rules = st.lists(st.fixed_dictionaries({
    "name": st.sampled_from(["r1", "r2", "r3"]),
    "keywords": st.lists(st.sampled_from(WORDS), max_size=3),
    "regex": st.one_of(st.none(), st.sampled_from([r"dif+", r"^fix", "([", r"\d+"])),
    "groups": st.lists(st.sampled_from(["g1", "g2", "g3", "missing"]), max_size=3),
}), max_size=4)
policies = st.builds(
    lambda mode, allowed, always_on, groups, rules, sticky, prefix: {"selection": {
        "mode": mode, "allowed": allowed, "always_on": always_on, "groups": groups, "context_rules": rules,
        "sticky_discovered": sticky, "progressive": {"hint_prefix": prefix}}},
    st.sampled_from(["all", "context_rules", "progressive", "tool_search", "unknown"]),
    st.one_of(st.none(), name_lists), name_lists,
    st.dictionaries(st.sampled_from(["g1", "g2", "g3"]), name_lists, max_size=3),
    rules, st.booleans(), st.sampled_from(["$", "@", "#!"]),
)
states = st.builds(SessionState, name_lists.map(lambda v: list(dict.fromkeys(v))),
                   name_lists.map(lambda v: list(dict.fromkeys(v))), name_lists.map(lambda v: list(dict.fromkeys(v))),
                   st.integers(0, 50))
messages = st.lists(st.sampled_from([*WORDS, "latest", "ffff", "123", "FIX"]), max_size=6).map(" ".join)
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _allowed(doc, catalog):
    allowed = doc["selection"]["allowed"]
    return {t["name"] for t in catalog if allowed is None or t["name"] in allowed}


@PROPERTY
@given(catalog=catalogs, doc=policies, state=states, message=messages)
def test_always_on_allowed_tools_are_always_sent_and_nothing_outside_catalog_and_allowed(catalog, doc, state,
                                                                                         message):
    selection = select_tools(catalog, doc, state, message)
    allowed = _allowed(doc, catalog)
    sent_names = sent(selection)
    assert set(doc["selection"]["always_on"]) & allowed <= set(sent_names)
    assert set(sent_names) <= allowed
    assert len(sent_names) == len(set(sent_names)) and list(selection.reasons) == sent_names
    deferred = [t["name"] for t in selection.deferred]
    assert set(deferred).isdisjoint(sent_names) and set(deferred) | set(sent_names) == allowed


@PROPERTY
@given(catalog=catalogs, doc=policies, state=states, message=messages)
def test_select_tools_does_not_mutate_the_state_and_is_deterministic(catalog, doc, state, message):
    before = state.to_dict()
    first = select_tools(catalog, doc, state, message)
    assert state.to_dict() == before
    again = select_tools(json.loads(json.dumps(catalog)), json.loads(json.dumps(doc)),
                         SessionState.from_dict(before), message)
    assert (sent(first), first.reasons, first.menu, first.mode) == (sent(again), again.reasons, again.menu,
                                                                    again.mode)


calls = st.lists(st.fixed_dictionaries({"name": names}, optional={"results": name_lists}), max_size=3)


@PROPERTY
@given(state=states, outputs=st.lists(st.tuples(st.text(max_size=40), calls), max_size=5))
def test_state_lists_only_grow_and_stay_duplicate_free(state, outputs):
    for text, calls in outputs:
        before = state.copy()
        state.observe(text + " $" + NAMES[len(text) % len(NAMES)], calls)
        for field in ("loaded", "discovered", "activated"):
            now, then = getattr(state, field), getattr(before, field)
            assert now[: len(then)] == then and len(now) == len(set(now))
        assert state.turns == before.turns + 1


_KEYWORD_ALPHABET = st.sampled_from(["git", "Git", "GIT", "test", "tests", "new york", "node.js", "c++", "ß", "SS",
                                     "straße", "İstanbul", "istanbul", "k", "\u212a", "ǅ", "ǆ", "ab_cd", "ab", "éa",
                                     " spaced ", "", "  ", "x-y", "x", "\u017f", "s", "\u03a3", "\u03c2", "\u03c3"])


@settings(max_examples=1000, deadline=None)
@given(rules=st.lists(st.lists(_KEYWORD_ALPHABET, max_size=4), max_size=6),
       message=st.lists(st.sampled_from(["git", "GIT", "Git.", "tests", "new\n york", "node.js", "c++", "STRASSE",
                                         "straße", "İSTANBUL", "istanbul", "K", "\u212a", "ǅ", "ǈ", "ab_cd", "ab",
                                         "ÉA", "x-y", "x", "spaced", " ", ",", "_", "-", "S", "\u017f",
                                         "\u03a3\u0391\u03a3", "\u03c3\u03b1\u03c2"]),
                       max_size=12))
def test_the_one_pass_keyword_index_matches_exactly_as_each_rules_own_pattern(rules, message):
    """select_tools scans a message once for every rule's one-word keywords (selection._rule_index);
    it sends what matching each rule's keyword pattern alone sends."""
    from toolscope_agent.engine.selection import _rule_matches

    text = "".join(message)
    document = {"selection": {"mode": "context_rules",
                              "groups": {f"g{i}": [f"t{i}"] for i in range(len(rules))},
                              "context_rules": [{"name": f"r{i}", "keywords": keywords, "groups": [f"g{i}"]}
                                                for i, keywords in enumerate(rules)]}}
    catalog = [{"name": f"t{i}"} for i in range(len(rules))]
    expected = [f"t{i}" for i, keywords in enumerate(rules) if _rule_matches({"keywords": keywords}, text)]
    assert select_tools(catalog, document, SessionState(), text).names == expected
