"""Rules learnt per request, validated on other tasks (issue 25, items 3 and 6): each request's task
against the tools first called under it, words kept by Fisher's exact test under a
Benjamini-Hochberg false discovery rate, a task repeated in many sessions counted once, the split
by task, and a `rule_window` that lets a follow-up ("I am USR001.") keep its instruction's rules."""

from __future__ import annotations

import dataclasses

import pytest
from toolscope_agent.engine.learning import (
    Association,
    call_associations,
    grouped_split,
    held_out_sample,
    request_rules,
    rule_words,
    task_examples,
    word_associations,
)
from toolscope_agent.engine.recommend import SEARCH_TOP_KS, candidates, evaluate, refitted
from toolscope_agent.engine.selection import TASK_CHARS, SessionState, search_tool_added, select_tools
from toolscope_agent.engine.simulation import RecordedCall, RecordedTurn, ReplaySession, simulate

NAMES = ["get_weather", "send_email", "read_file", "post_tweet", "book_flight", "cd", "tool_search"]
CATALOG = [{"name": name, "description": f"The {name.replace('_', ' ')} tool."} for name in NAMES]
COSTS = dict.fromkeys(NAMES, 100)


def conversation(key: str, *turns: tuple[str, list[str]]) -> ReplaySession:
    """One request per call, then a closing request without calls, per (instruction, calls)."""
    requests = []
    for message, calls in turns:
        for index, name in enumerate(calls):
            requests.append(RecordedTurn(message=message if index == 0 else "", advertised=NAMES,
                                         calls=[RecordedCall(name)]))
        requests.append(RecordedTurn(message="" if calls else message, advertised=NAMES))
    return ReplaySession(key, requests)


CITIES = ["Paris", "Tokyo", "Lima", "Oslo", "Cairo", "Quito", "Dakar", "Hanoi", "Perth", "Riga", "Minsk", "Bern"]


def weather_and_mail(count: int, offset: int = 0) -> list[ReplaySession]:
    """Distinct tasks: the weather somewhere (get_weather), then mail it (send_email)."""
    return [conversation(f"w{offset + n}", (f"What is the weather in {CITIES[n % 12]} on day {offset + n}?",
                                            ["get_weather"]),
                         (f"Now email the forecast to person{offset + n}", ["send_email"]))
            for n in range(count)]


def test_each_request_works_on_the_latest_instruction_and_a_task_repeated_counts_once():
    sessions = [conversation(f"s{n}", ("Be helpful and dive into New York flights", ["book_flight", "cd"]),
                             ("Then tweet about it", ["post_tweet", "book_flight"]))
                for n in range(5)]
    examples = task_examples(sessions)
    assert [(e.text, sorted(e.targets)) for e in examples] == [
        ("Be helpful and dive into New York flights", ["book_flight", "cd"]),
        ("Then tweet about it", ["post_tweet"]),  # book_flight was called before: not first called here
    ]
    assert examples[0].words == {"helpful", "dive", "new", "york", "flights"}
    # Five sessions of one task are one piece of evidence: nothing is significant.
    assert word_associations(examples) == []


def test_words_that_predict_a_tool_across_distinct_tasks_are_kept_and_incidental_ones_are_not():
    examples = task_examples(weather_and_mail(12))
    kept = {(a.feature, a.tool): (a.tasks, a.hits) for a in word_associations(examples)}
    assert kept[("weather", "get_weather")] == (12, 12)
    assert kept[("email", "send_email")] == (12, 12)
    assert ("forecast", "send_email") in kept
    # A city is in one task only: never significant, however perfectly it predicted.
    assert not any(word == "paris" for word, _ in kept)
    # Nothing links the weather words to the mail tool.
    assert ("weather", "send_email") not in kept


def test_known_limits_the_targets():
    examples = task_examples(weather_and_mail(12))
    assert {a.tool for a in word_associations(examples, known={"send_email"})} == {"send_email"}


def test_request_rules_are_one_tool_each_keyed_by_their_words_and_filtered_by_precision():
    associations = word_associations(task_examples(weather_and_mail(12)))
    groups, rules = request_rules(associations, precision=0.5)
    assert groups == {"tool-get_weather": ["get_weather"], "tool-send_email": ["send_email"]}
    weather = next(rule for rule in rules if rule["groups"] == ["tool-get_weather"])
    assert weather["name"] == "learnt: get_weather" and "weather" in weather["keywords"]
    assert weather["keywords"] == sorted(weather["keywords"])
    assert request_rules(associations, precision=1.01) == ({}, [])


def test_group_names_are_slugs_and_unique():
    groups, _ = request_rules([Association("math.factorial", "factorial", 5, 5),
                               Association("math-factorial", "factorial", 5, 5)], precision=0.5)
    assert sorted(groups) == ["tool-math-factorial", "tool-math-factorial-2"]


def test_rule_words_are_what_a_keyword_can_match_whole():
    assert rule_words("Fix test_utils.py and the README, please! 42 ok") == {"fix", "test_utils", "readme"}


def test_the_split_keeps_every_session_of_a_task_on_one_side():
    repeated = [conversation(f"r{n}", ("Sync the repo", ["cd"])) for n in range(4)]
    others = weather_and_mail(8)
    sessions = [others[0], repeated[0], *others[1:4], repeated[1], *others[4:], repeated[2], repeated[3]]
    fit, held_out = grouped_split(sessions)
    assert {s.key for s in fit} & {s.key for s in held_out} == set()
    assert {s.key for s in repeated} <= {s.key for s in fit}  # its oldest session is among the oldest
    assert len(fit) + len(held_out) == len(sessions) and held_out
    assert [s.key for s in held_out] == [s.key for s in sessions if s in held_out]  # order kept


def test_too_few_tasks_split_by_time():
    sessions = [conversation(f"r{n}", ("Sync the repo", ["cd"])) for n in range(10)]
    fit, held_out = grouped_split(sessions)
    assert [s.key for s in fit] == [f"r{n}" for n in range(5)]
    assert [s.key for s in held_out] == [f"r{n}" for n in range(5, 10)]


def test_a_held_out_sample_keeps_each_tasks_weight_and_every_task_evenly_spaced_in_time():
    # three tasks: A has 6 sessions, B 3, C 1, interleaved in time
    plan = ["A", "B", "A", "C", "A", "B", "A", "A", "B", "A"]
    sessions = [conversation(f"{task}{n}", (f"Task {task}", ["cd"])) for n, task in enumerate(plan)]
    assert held_out_sample(sessions, 10) == sessions  # within the limit: all of them, as they were
    # 5 of 10: A 3 (of A0 A2 A4 A6 A7 A9, evenly: A2 A6 A9), B 1 (B5, its middle), C 1 (its only one)
    assert [s.key for s in held_out_sample(sessions, 5)] == ["A2", "C3", "B5", "A6", "A9"]
    # 4: A's 2.4 and B's 1.2 rounded down, C's 0.4 up to 1; the room left goes to the largest remainder
    assert [s.key for s in held_out_sample(sessions, 4)] == ["A2", "C3", "B5", "A7"]
    many = [conversation(f"t{n}", (f"Task number {n}", ["cd"])) for n in range(10)]
    # more tasks than room: every other one, evenly spaced
    assert [s.key for s in held_out_sample(many, 5)] == ["t1", "t3", "t5", "t7", "t9"]


RULES = {"selection": {"mode": "context_rules", "groups": {"mail": ["send_email"]},
                       "context_rules": [{"name": "mail", "keywords": ["email"], "groups": ["mail"]}]}}


@pytest.mark.parametrize(("window", "sent"), [(1, False), (2, True), (5, True)])
def test_a_rule_window_of_two_reads_the_instruction_before_the_follow_up(window, sent):
    policy = {"selection": {**RULES["selection"], "rule_window": window}}
    state = SessionState()
    assert "send_email" in select_tools(CATALOG, policy, state, "Email the report to Bob").names
    state.note_task("Email the report to Bob")
    follow_up = select_tools(CATALOG, policy, state, "I am USR001.")
    assert ("send_email" in follow_up.names) is sent
    state.note_task("I am USR001.")
    # Two instructions on, the first is out of the window.
    assert "send_email" not in select_tools(CATALOG, policy, state, "Thanks, that is all").names


def test_the_state_keeps_the_latest_two_distinct_tasks_through_json():
    state = SessionState()
    for message in ["first", "first", "", "second", "third" * 1000]:
        state.note_task(message)
    assert state.tasks == ["second", ("third" * 1000)[:TASK_CHARS]]
    again = SessionState.from_dict(state.to_dict())
    assert again == state and again.earlier_tasks("fourth", 1) == [state.tasks[-1]]
    assert again.earlier_tasks(state.tasks[-1], 1) == ["second"]  # the current task is not its own earlier one
    assert SessionState.from_dict({"tasks": ["a", 3, "b", "c"]}).tasks == ["b", "c"]
    assert SessionState.from_dict({"tasks": "nope"}).tasks == []


def test_a_search_tool_always_on_in_context_rules_mode_is_added_when_the_catalog_has_none():
    catalog = [tool for tool in CATALOG if tool["name"] != "tool_search"]
    policy = {"selection": {**RULES["selection"], "always_on": ["tool_search"]}}
    added = search_tool_added(catalog, policy)
    assert [tool["name"] for tool in added] == [*[t["name"] for t in catalog], "tool_search"]
    assert select_tools(added, policy, SessionState(), "hello").names == ["tool_search"]
    assert search_tool_added(catalog, RULES) is catalog


def test_the_simulator_replays_a_rule_window_as_the_selector_applies_it():
    sessions = [conversation("c", ("Email the report to Bob", []), ("I am USR001.", ["send_email"]))]
    one = simulate(CATALOG, RULES, sessions, schema_tokens=COSTS)
    two = simulate(CATALOG, {"selection": {**RULES["selection"], "rule_window": 2}}, sessions, schema_tokens=COSTS)
    assert (one.hard_misses, two.hard_misses) == (1, 0)


def test_candidates_include_request_rules_with_and_without_search_and_window():
    found = {c.name: c for c in candidates(CATALOG, weather_and_mail(24), schema_tokens=COSTS)}
    learnt = [c for name, c in found.items() if "request rules" in name and "tool_list" not in c.selection]
    assert {c.selection["rule_window"] for c in learnt} == {1, 2}
    assert len(learnt) % 2 == 0
    searching = [c for c in learnt if "tool_search" in c.selection["always_on"]]
    assert searching and all(c.selection["mode"] == "context_rules" for c in searching)
    assert {c.selection["tool_search"]["top_k"] for c in searching} == set(SEARCH_TOP_KS) == {20}
    # The same rules, learnt from the instruction that led to each call, read with one or two tasks.
    by_window = {window: [c.selection["context_rules"] for c in learnt if c.selection["rule_window"] == window]
                 for window in (1, 2)}
    assert by_window[1] == by_window[2]
    assert all(any(rule["groups"] == ["tool-get_weather"] for rule in rules) for rules in by_window[1])


def test_a_refit_learns_the_document_again_on_every_session_and_keeps_the_held_out_figures():
    fit = weather_and_mail(12)
    later = [conversation(f"b{n}", (f"Book a flight to {CITIES[n]} for trip {n}", ["book_flight"]))
             for n in range(12)]
    scored = evaluate(CATALOG, candidates(CATALOG, fit, schema_tokens=COSTS), later, schema_tokens=COSTS)
    family = "request rules (precision 0.05) + tool_search top 20"  # the others send the same here
    before = next(c for c in scored if c.family == family)
    after = next(c for c in refitted(scored, CATALOG, fit + later, schema_tokens=COSTS) if c.family == family)
    groups = {tuple(rule["groups"]) for rule in before.selection["context_rules"]}
    assert ("tool-book_flight",) not in groups and not before.refit
    assert ("tool-book_flight",) in {tuple(rule["groups"]) for rule in after.selection["context_rules"]}
    assert after.refit and after.name == f"3 {family}"  # named for the rules it now has
    assert (after.saved_share, after.hard_miss_rate, after.net_saved_tokens) == (
        before.saved_share, before.hard_miss_rate, before.net_saved_tokens)
    assert before.miss_rate > 0  # the rules learnt before the flights could not send book_flight


AFTER = {"selection": {"mode": "context_rules", "groups": {"fs": ["read_file"]},
                       "context_rules": [{"name": "after cd", "keywords": [], "after_tools": ["cd"],
                                          "groups": ["fs"]}]}}


def test_a_rule_on_tools_called_before_matches_once_one_was_called_whatever_the_message():
    state = SessionState()
    assert "read_file" not in select_tools(CATALOG, AFTER, state, "go to the docs folder").names
    state.observe("", [{"name": "cd"}])
    assert select_tools(CATALOG, AFTER, state, "").reasons["read_file"] == "rule:after cd"
    assert select_tools(CATALOG, AFTER, state, "what is in there?").reasons["read_file"] == "rule:after cd"
    # Odd after_tools never match and never fail.
    odd = {"selection": {**AFTER["selection"], "context_rules": [{"after_tools": "cd", "groups": ["fs"]},
                                                                 {"after_tools": [3, None], "groups": ["fs"]}]}}
    assert "read_file" not in select_tools(CATALOG, odd, state, "x").names


def test_the_simulator_and_the_selector_agree_on_rules_after_calls():
    sessions = [conversation("c", ("Go to the docs folder", ["cd"]), ("Show me what is inside", ["read_file"]))]
    after = simulate(CATALOG, AFTER, sessions, schema_tokens=COSTS)
    assert [miss.tool for miss in after.misses] == ["cd"]  # nothing sends cd; read_file follows it
    without = simulate(CATALOG, {"selection": {**AFTER["selection"], "context_rules": []}}, sessions,
                       schema_tokens=COSTS)
    assert [miss.tool for miss in without.misses] == ["cd", "read_file"]


def navigations(count: int) -> list[ReplaySession]:
    """Distinct tasks (words that vary): every other one changes directory then reads a file, the
    others post a tweet; every third also books a flight first."""
    sessions = []
    for n in range(count):
        calls = ["cd", "read_file"] if n % 2 else ["post_tweet"]
        calls = ["book_flight", *calls] if n % 3 == 0 else calls
        sessions.append(conversation(f"n{n}", (f"task {n}: {CITIES[n % 12]} report", calls)))
    return sessions


def test_tools_called_after_another_are_learnt_per_distinct_task():
    found = {(a.feature, a.tool): (a.tasks, a.hits, a.kind) for a in call_associations(navigations(24))}
    assert found[("cd", "read_file")] == (12, 12, "after")
    assert ("read_file", "cd") not in found  # never after it
    assert not any(earlier == "book_flight" for earlier, _ in found)  # followed by either, as without it
    # One task in 24 sessions is one piece of evidence.
    repeated = [conversation(f"r{n}", ("same task", ["cd", "read_file"])) for n in range(24)]
    assert call_associations(repeated) == []
    groups, rules = request_rules(call_associations(navigations(24)), precision=0.5)
    assert rules == [{"name": "learnt: read_file", "keywords": [], "regex": None, "groups": ["tool-read_file"],
                      "after_tools": ["cd"]}]
    assert groups == {"tool-read_file": ["read_file"]}


def test_candidates_learn_rules_with_and_without_tools_called_before():
    found = {c.family: c for c in candidates(CATALOG, navigations(24), schema_tokens=COSTS)}
    with_calls = [c for family, c in found.items() if "after calls" in family]
    assert with_calls and all(any(rule.get("after_tools") == ["cd"] for rule in c.selection["context_rules"])
                              for c in with_calls)
    assert not any(rule.get("after_tools") for family, c in found.items() if "request rules" in family
                   and "after calls" not in family for rule in c.selection["context_rules"])


def test_on_words_and_tools_drawn_independently_nothing_is_significant():
    """Benjamini-Hochberg counts every word with every tool: pairs never seen together are tests
    too, so chance co-occurrences of rare words and rare tools are not rules."""
    import random

    rng = random.Random(3)
    vocabulary = [f"w{n}" for n in range(2000)]
    tools = [f"t{n}" for n in range(300)]
    sessions = [conversation(f"x{n}", (" ".join(rng.sample(vocabulary, 8)), rng.sample(tools, 2)))
                for n in range(600)]
    assert word_associations(task_examples(sessions)) == []


def test_each_task_message_is_matched_on_its_own_in_a_window():
    policy = {"selection": {"mode": "context_rules", "rule_window": 2,
                            "groups": {"deploy": ["book_flight"], "ny": ["get_weather"]},
                            "context_rules": [{"name": "deploy", "regex": "^/deploy", "groups": ["deploy"]},
                                              {"name": "ny", "keywords": ["new york"], "groups": ["ny"]}]}}
    state = SessionState()
    state.note_task("Look at what is new")
    # The anchored regex still matches the task's start; "new" + "York" across two messages is no phrase.
    assert select_tools(CATALOG, policy, state, "/deploy staging").names == ["book_flight"]
    assert select_tools(CATALOG, policy, state, "York is next").names == []
    state.note_task("/deploy staging")
    assert select_tools(CATALOG, policy, state, "I am USR001.").names == ["book_flight"]  # the one before


def test_a_tool_called_in_the_same_request_does_not_key_a_rule():
    same = [ReplaySession(f"s{n}", [RecordedTurn(message=f"task {n}", advertised=NAMES,
                                                 calls=[RecordedCall("cd"), RecordedCall("read_file")])])
            for n in range(12)] + [conversation(f"o{n}", (f"other {n}", ["post_tweet"])) for n in range(12)]
    assert call_associations(same) == []
    assert call_associations(navigations(24))  # in the requests after: keyed


def unforeseen(count: int, offset: int = 0) -> list[ReplaySession]:
    """The weather-then-mail tasks, and as many whose instruction is words of their own (no rule
    word, nothing a search matches) and which change directory: a tool only a core can send."""
    sessions = []
    for n, task in enumerate(weather_and_mail(count, offset)):
        sessions.append(task)
        word = "".join(chr(97 + (5 * (offset + n) + k) % 26) for k in range(7))
        sessions.append(conversation(f"u{offset + n}", (f"{word} {offset + n}", ["cd"])))
    return sessions


def widened(sessions: list[ReplaySession], extra: list[str]) -> list[ReplaySession]:
    """The sessions advertising `extra` tools before their own."""
    return [ReplaySession(session.key, [dataclasses.replace(turn, advertised=[*extra, *turn.advertised])
                                        for turn in session.turns]) for session in sessions]


def test_a_core_keeps_on_what_rules_and_search_both_miss():
    # 24 ledger tools ahead of the rest: a search matching nothing answers its top 20 from them
    # (an answer is never short; on a catalog of 7 it would hold every tool, cd included).
    ledger = [f"ledger_{n:02}" for n in range(24)]
    catalog = [{"name": name, "description": "Posts a ledger entry."} for name in ledger] + CATALOG
    costs = {**COSTS, **dict.fromkeys(ledger, 100)}
    fit, later = widened(unforeseen(16), ledger), widened(unforeseen(8, offset=40), ledger)
    scored = {c.family: c for c in evaluate(catalog, candidates(catalog, fit, schema_tokens=costs), later,
                                            schema_tokens=costs)}
    plain = scored["request rules (precision 0.05) + tool_search top 20"]
    cored = scored["request rules (precision 0.05) + always-on 4 they miss + tool_search top 20"]
    # Learnt on the fit's older tasks, replayed on its newer ones: only cd was missed hard.
    assert cored.selection["always_on"] == ["cd", "tool_search"]
    assert "always-on 1 they miss" in cored.name
    assert not any("always-on 8" in family for family in scored)  # a core of 8 would send the same: kept once
    assert plain.hard_misses == 8 and cored.hard_misses == 0  # every held-out cd, and none
    assert {rule["groups"][0] for rule in cored.selection["context_rules"]} >= {"tool-get_weather", "tool-send_email"}
