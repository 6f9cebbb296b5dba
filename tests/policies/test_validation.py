"""Publishing refuses a draft an agent could not apply, and says every reason at once."""

from __future__ import annotations

import pytest

from tests.admin.builders import make_group, make_tool
from tests.policies.builders import make_rule
from toolscope.policies.models import CompactionRule
from toolscope.policies.services.validation import PolicyProblem, policy_validate


def _problems(policy) -> dict[str, str]:
    return {problem.field: problem.message for problem in policy_validate(policy=policy)}


def test_a_plain_draft_has_no_problems(policy):
    assert policy_validate(policy=policy) == []


def test_another_projects_tool_in_the_always_on_set_is_named(policy, other_project):
    policy.always_on.add(make_tool(other_project, "globex_deploy"))
    assert _problems(policy) == {"always_on": "not in this project's catalog: globex_deploy"}


def test_another_projects_tool_in_the_allowed_set_is_named(policy, tools, other_project):
    policy.allowed.set([tools["read_file"], tools["bash"], make_tool(other_project, "globex_deploy")])
    assert _problems(policy) == {"allowed": "not in this project's catalog: globex_deploy"}


def test_another_projects_tool_in_a_group_is_named_with_the_group(policy, other_project):
    make_group(policy, "release", tools=[make_tool(other_project, "globex_deploy")])
    assert _problems(policy) == {"groups.release": "not in this project's catalog: globex_deploy"}


def test_always_on_tools_must_be_allowed_when_the_allowed_set_is_restricted(policy, tools):
    policy.allowed.set([tools["read_file"]])
    assert _problems(policy) == {"always_on": "not in the allowed set: bash"}


def test_an_empty_allowed_set_allows_every_tool(policy):
    assert policy.allowed.count() == 0
    assert _problems(policy) == {}


def test_a_context_rule_needs_keywords_or_a_regex(policy):
    make_rule(policy, name="empty", keywords=[])
    assert _problems(policy) == {"context_rules.empty": "needs keywords, a regex or tools called before"}


def test_a_context_rule_on_tools_called_before_needs_no_keyword_but_names_tools(policy):
    make_rule(policy, name="after", keywords=[], after_tools=["git_status"])
    assert _problems(policy) == {}
    make_rule(policy, name="typo", keywords=[], after_tools=["git_stauts", "git_status"])
    assert _problems(policy) == {"context_rules.typo.after_tools": "not in this project's catalog: git_stauts"}
    policy.context_rules.filter(name="typo").delete()
    make_rule(policy, name="odd", keywords=["x"], after_tools=["", 3])
    assert _problems(policy) == {"context_rules.odd.after_tools": "must be a list of tool names"}


def test_keywords_must_be_a_list_of_words(policy):
    make_rule(policy, name="odd", keywords=["test", ""])
    assert _problems(policy) == {"context_rules.odd.keywords": "must be a list of non-empty strings"}


def test_an_invalid_regex_is_named_with_the_parser_message(policy):
    make_rule(policy, name="broken", regex="(unclosed")
    message = _problems(policy)["context_rules.broken.regex"]
    assert message.startswith("not a valid regular expression: missing ), unterminated subpattern")


@pytest.mark.parametrize("regex", ["(a+)+", "(a*)*", "(a|a)+", "(a|ab)+", "(x+x+)+y", "(a?)+", r"(\w+\s?)+$"])
def test_a_pathological_regex_is_refused(policy, regex):
    make_rule(policy, name="slow", regex=regex)
    assert "exponential time" in _problems(policy)["context_rules.slow.regex"]


@pytest.mark.parametrize("regex", [r"\w*\w*\w*\w*\w*!", r".*.*.*.*=", r"a*a*a*a*a*b", r".+.+"])
def test_adjacent_repeats_over_the_same_characters_are_refused(policy, regex):
    make_rule(policy, name="slow", regex=regex)
    assert "polynomial time" in _problems(policy)["context_rules.slow.regex"]


def test_a_regex_re2_cannot_compile_is_refused_naming_the_rule_and_field(policy):
    make_rule(policy, name="echo", regex=r"(\w+) \1")
    problems = [str(problem) for problem in policy_validate(policy=policy)]
    assert problems == [(
        "context_rules.echo.regex: RE2, which matches rules, cannot compile it (invalid escape sequence: \\1); "
        "back-references, lookarounds, atomic groups and possessive repeats are not supported"
    )]


def test_a_disabled_rule_is_not_checked_because_it_is_not_published(policy):
    make_rule(policy, name="off", regex="(a+)+", enabled=False)
    assert _problems(policy) == {}


def test_tool_search_mode_publishes_without_a_search_tool_of_the_catalog_always_on(policy, tools):
    """The engine sends the agent's `tool_search` in that mode, or toolscope's own (the SDK's
    selector and the gateway add it): nothing to require of the draft."""
    policy.mode = "tool_search"
    policy.save()
    assert _problems(policy) == {}
    policy.always_on.add(tools["tool_search"])
    assert _problems(policy) == {}


def test_a_compaction_glob_matching_no_catalog_tool_is_named(policy):
    CompactionRule.objects.create(policy=policy, tools="bash*", max_tokens=2000)
    CompactionRule.objects.create(policy=policy, tools="mcp_github_*", max_tokens=2000)
    assert _problems(policy) == {"compaction_rules[1].tools": "'mcp_github_*' matches no tool of the catalog"}


def test_search_top_k_may_not_exceed_its_maximum(policy):
    policy.search_top_k, policy.search_max_top_k = 12, 10
    policy.save()
    assert _problems(policy) == {"search_top_k": "12 is above search_max_top_k (10)"}


def test_every_problem_is_reported_at_once(policy, tools, other_project):
    policy.mode, policy.search_top_k, policy.search_max_top_k = "tool_search", 9, 3
    policy.save()
    policy.allowed.set([tools["read_file"]])
    make_group(policy, "release", tools=[make_tool(other_project, "globex_deploy")])
    make_rule(policy, name="slow", regex="(a+)+")
    CompactionRule.objects.create(policy=policy, tools="nothing*", max_tokens=100)
    problems = policy_validate(policy=policy)
    assert [problem.field for problem in problems] == [
        "always_on", "groups.release", "context_rules.slow.regex", "search_top_k", "compaction_rules[0].tools",
    ]
    assert all(isinstance(problem, PolicyProblem) and problem.message for problem in problems)
