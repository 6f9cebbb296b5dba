"""The static check for regexes that backtrack catastrophically (pure: no database)."""

from __future__ import annotations

import re

import pytest

from toolscope.policies.services.regex_safety import EMPTY_BODY, NESTED, OVERLAP, regex_problem


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
    r"(a|b)+", r"(\w|\d)+", r"[ab]+c+", r"(foo|bar)+", r"(\d{1,3}\.){3}\d{1,3}", r"(a++)+", r"(?>a+)+",
    r"deploy(ment)? to (prod|staging)", r"(?P<q>a)(?(q)b|c)+",
])
def test_ordinary_patterns_pass(pattern):
    assert regex_problem(pattern, flags=re.IGNORECASE) is None


def test_a_refused_shape_is_refused_inside_a_larger_pattern():
    assert regex_problem(r"^deploy\s+((\w+)-)+\d+$") == NESTED


def test_patterns_are_capped_at_200_characters():
    assert regex_problem("a" * 200) is None
    assert regex_problem("a" * 201) == "longer than 200 characters"


def test_an_invalid_pattern_reports_the_parser_message():
    assert regex_problem("[z-a]") == "not a valid regular expression: bad character range z-a at position 1"
