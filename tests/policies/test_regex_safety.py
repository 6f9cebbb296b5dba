"""The static check for regexes that backtrack catastrophically (pure: no database)."""

from __future__ import annotations

import re

import pytest

from toolscope.policies.services.regex_safety import ADJACENT, EMPTY_BODY, NESTED, OVERLAP, regex_problem


@pytest.mark.parametrize(("pattern", "problem"), [
    ("(a+)+", NESTED),
    ("(a*)*", NESTED),
    ("(a+)*b", NESTED),
    ("(.*a){20}", NESTED),
    ("(x+x+)+y", NESTED),
    ("(a{1,4}){1,8}", NESTED),
    ("(?:x(a+)b)*", NESTED),  # safe in fact: the check errs on the side of refusing
    ("(a|a)+", OVERLAP),
    ("(a|ab)+", OVERLAP),
    ("(ab|a.)+", OVERLAP),
    ("(a?)+", EMPTY_BODY),
    ("(|a)+", EMPTY_BODY),
])
def test_pathological_shapes_are_refused(pattern, problem):
    assert regex_problem(pattern, flags=re.IGNORECASE) == problem


@pytest.mark.parametrize("pattern", [
    r"\bpytest\b", r"\b(pytest|unittest|tox)\b", r"(test|spec)s?", r"^(git|hg) (diff|status|log)",
    r"(a|b)+", r"(\w|\d)+", r"[ab]+c+", r"(foo|bar)+", r"(\d{1,3}\.){3}\d{1,3}",
    r"deploy(ment)? to (prod|staging)", r"deploy\s+\w+", r"deploy.*to.*prod", r"\d+\D+", r"[0-9]+[a-z]*",
    r".*\n*", r"\d{1,3}\d{1,3}", r"(?P<env>prod|staging)-\d+",
])
def test_ordinary_patterns_pass(pattern):
    assert regex_problem(pattern, flags=re.IGNORECASE) is None


@pytest.mark.parametrize("pattern", [
    # The three the fuzzer published; each hangs Python's `re` on a 400-character message.
    r"\w*\w*\w*\w*\w*!", r".*.*.*.*=", r"a*a*a*a*a*b",
    r".+.+", r"\w*\w*", r"\w+\d+", r"a*A*",  # IGNORECASE: a and A are one character
    r"(\w*)\w+",  # through a group
    r"a*-?a*",  # past an item that can match nothing
    r"(?:x|\w+)\w*",  # an alternation that can end with a repeat
    r"(?s).*\n*",  # with DOTALL, "." matches the newline too
    r"\w{0,100}\w{0,100}",  # bounded, but with many choices
    r"\w*é+",  # Unicode: \w matches é
])
def test_adjacent_repeats_that_share_characters_are_refused(pattern):
    assert regex_problem(pattern, flags=re.IGNORECASE) == ADJACENT


def test_adjacent_case_sensitive_repeats_of_different_letters_pass():
    assert regex_problem(r"a*A*") is None


@pytest.mark.parametrize(("pattern", "reason"), [
    (r"(a)\1", "invalid escape sequence: \\1"),
    (r"(?<!\w)test", "invalid perl operator: (?<!"),
    (r"test(?=s)", "invalid perl operator: (?="),
    (r"(?>a+)b", "invalid perl operator: (?>"),
    (r"a++", "bad repetition operator: ++"),
    (r"end\Z", "invalid escape sequence: \\Z"),
])
def test_patterns_re2_cannot_compile_are_refused_with_its_reason(pattern, reason):
    problem = regex_problem(pattern, flags=re.IGNORECASE)
    assert problem is not None
    assert problem.startswith(f"RE2, which matches rules, cannot compile it ({reason})")


def test_a_refused_shape_is_refused_inside_a_larger_pattern():
    assert regex_problem(r"^deploy\s+((\w+)-)+\d+$") == NESTED


def test_patterns_are_capped_at_200_characters():
    assert regex_problem("a" * 200) is None
    assert regex_problem("a" * 201) == "longer than 200 characters"


def test_an_invalid_pattern_reports_the_parser_message():
    assert regex_problem("[z-a]") == "not a valid regular expression: bad character range z-a at position 1"
