"""Context-rule regexes (engine/selection.py): RE2 when installed, else `re` on a bounded text."""

from __future__ import annotations

import subprocess
import sys

import pytest
from toolscope_agent.engine import selection
from toolscope_agent.engine.bytecache import ByteDict
from toolscope_agent.engine.selection import (
    FALLBACK_TEXT_LIMIT,
    SessionState,
    rule_regex,
    rule_regex_matches,
    select_tools,
)

CATALOG = [{"name": name, "description": f"The {name} tool."} for name in ("bash", "git_diff", "run_tests")]


def rules_policy(regex: str, keywords: list[str] | None = None) -> dict:
    return {"selection": {
        "mode": "context_rules", "always_on": ["bash"], "groups": {"git": ["git_diff"]},
        "context_rules": [{"name": "git", "keywords": keywords or [], "regex": regex, "groups": ["git"]}],
    }}


@pytest.fixture
def without_re2(monkeypatch):
    """The engine as the SDK's plain install runs it: no RE2, so `re` on the bounded text."""
    monkeypatch.setattr(selection, "re2", None)
    monkeypatch.setattr(selection, "_RULE_CACHE", ByteDict(1 << 20))


def test_rules_run_on_re2_where_it_is_installed():
    assert selection.REGEX_ENGINE == "re2"
    assert type(rule_regex(r"\bgit\b")).__module__.startswith("re2")


@pytest.mark.parametrize("regex", [r"\w*\w*\w*\w*\w*!", r".*.*.*.*=", r"a*a*a*a*a*b", r"(a+)+$x", r"(a|aa)*c"])
def test_catastrophic_patterns_answer_a_100_kb_message_with_re2(regex):
    # Python's `re` never finishes any of these on this text: a fallback to it hangs this test.
    chosen = select_tools(CATALOG, rules_policy(regex), SessionState(), "a" * 100_000)
    assert chosen.names == ["bash"]


def test_re2_reads_the_whole_message():
    message = "x" * 50_000 + " git diff"
    assert select_tools(CATALOG, rules_policy(r"\bgit\b"), SessionState(), message).reasons["git_diff"] == "rule:git"


def test_re2_matches_case_insensitively_like_re_did():
    assert rule_regex_matches(r"\bGIT\s+diff\b", "please run git DIFF now")


def test_a_pattern_re2_cannot_compile_never_matches_and_never_raises():
    assert rule_regex(r"(\w+) \1") is None
    assert not rule_regex_matches(r"(\w+) \1", "again again")
    doc = rules_policy(r"(?<=x)git")
    assert select_tools(CATALOG, doc, SessionState(), "xgit").names == ["bash"]


@pytest.mark.usefixtures("without_re2")
def test_without_re2_a_regex_sees_only_the_first_characters():
    assert FALLBACK_TEXT_LIMIT == 1_000
    before = "x" * (FALLBACK_TEXT_LIMIT - 4) + "git"
    after = "x" * FALLBACK_TEXT_LIMIT + "git"
    assert rule_regex_matches("git", before)
    assert not rule_regex_matches("git", after)
    assert select_tools(CATALOG, rules_policy("git"), SessionState(), after).names == ["bash"]


@pytest.mark.usefixtures("without_re2")
def test_without_re2_keywords_still_read_the_whole_message():
    after = "x " * FALLBACK_TEXT_LIMIT + "git"
    assert select_tools(CATALOG, rules_policy("", keywords=["git"]), SessionState(), after).reasons == {
        "bash": "always_on", "git_diff": "rule:git"}


@pytest.mark.usefixtures("without_re2")
def test_without_re2_python_syntax_compiles_with_re():
    assert type(rule_regex(r"(\w+) \1")).__module__ == "re"
    assert rule_regex_matches(r"(\w+) \1", "again again")


def test_the_plain_install_imports_and_falls_back_to_re():
    # A fresh interpreter in which `import re2` fails, as in `pip install toolscope-agent`.
    code = ("import sys; sys.modules['re2'] = None\n"
            "from toolscope_agent.engine import selection as s\n"
            "print(s.REGEX_ENGINE, s.rule_regex_matches('git', 'x' * 2000 + 'git'),\n"
            "      s.rule_regex_matches('GIT', 'git'))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["re", "False", "True"]
