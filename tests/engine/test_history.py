"""Learned search history (engine/history.py): which texts led to which tools, within bounds."""

from __future__ import annotations

from toolscope_agent.engine.history import MAX_TEXT_CHARS, RecordedSession, learn_history


def session(task: str, *calls) -> RecordedSession:
    return RecordedSession(task_message=task, calls=[(name, args) for name, args in calls])


def test_a_task_message_leads_to_every_tool_its_session_called():
    history = learn_history([session("Fix the flaky login test", ("read_file", {}), ("run_tests", {}))])
    assert history == {"read_file": ["Fix the flaky login test"], "run_tests": ["Fix the flaky login test"]}


def test_a_search_query_leads_to_the_calls_after_it_until_the_next_search():
    history = learn_history([session(
        "", ("read_file", {}), ("tool_search", {"query": "rotate keys"}), ("x7", {}),
        ("tool_search", {"query": "page the on-call"}), ("pager", {}), ("x7", {}))])
    assert history == {"pager": ["page the on-call"], "x7": ["rotate keys", "page the on-call"]}


def test_tool_search_is_never_a_target_and_blank_or_odd_texts_are_skipped():
    history = learn_history([session("  ", ("tool_search", {"query": 3}), ("bash", {})),
                             session("", ("tool_search", {"query": "   "}), ("bash", "not a dict"))])
    assert history == {}


def test_texts_are_bounded_newest_sessions_first_and_deduplicated():
    sessions = [session(f"task {i}", ("bash", {})) for i in range(20)] + [session("task 0", ("bash", {}))]
    history = learn_history(sessions, max_texts=3)
    assert history == {"bash": ["task 0", "task 1", "task 2"]}
    long = learn_history([session("x" * 5000, ("bash", {}))])
    assert long["bash"] == ["x" * MAX_TEXT_CHARS]


def test_the_least_called_tools_are_left_out_beyond_max_tools():
    sessions = [session("a", ("common", {}), ("rare", {})), session("b", ("common", {}))]
    assert list(learn_history(sessions, max_tools=1)) == ["common"]


def test_whitespace_is_collapsed_and_the_result_is_ordered_by_tool_name():
    history = learn_history([session("fix\n  the   bug", ("zeta", {}), ("alpha", {}))])
    assert list(history) == ["alpha", "zeta"] and history["alpha"] == ["fix the bug"]


def test_the_whole_map_is_bounded_in_characters_keeping_the_most_called_tools():
    sessions = [session("a" * 100, ("busy", {}), ("quiet", {})), session("b" * 100, ("busy", {}))]
    assert list(learn_history(sessions, max_chars=250)) == ["busy"]
    assert list(learn_history(sessions, max_chars=300)) == ["busy", "quiet"]


def test_each_call_is_linked_to_the_task_of_its_own_request():
    # Issue 25, item 1: a chat's later instruction leads to the calls made after it.
    history = learn_history([RecordedSession(
        task_message="Find the bug",
        calls=[("read_file", {}), ("run_migrations", {}), ("create_pr", {}), ("bash", {})],
        call_tasks=["Find the bug", "Apply the migrations", "Open a pull request"])])
    assert history == {"read_file": ["Find the bug"], "run_migrations": ["Apply the migrations"],
                       "create_pr": ["Open a pull request"], "bash": ["Find the bug"]}
