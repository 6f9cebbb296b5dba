"""Diffs between policy documents read as one line per change, each with its dotted path."""

from __future__ import annotations

import copy

from toolscope.policies.services.diff import document_diff

BASE = {
    "schema_version": 1, "project": "acme", "label": "production", "version": 3, "etag": '"v3-aaaa"',
    "published_at": "2026-11-22T10:00:00+00:00", "encoding": "o200k_base", "context_window": 200000,
    "selection": {
        "mode": "all", "allowed": None, "always_on": ["bash", "read_file", "web_fetch"],
        "groups": {"git": ["git_status"]},
        "context_rules": [
            {"name": "testing", "keywords": ["test"], "regex": None, "groups": ["testing"]},
            {"name": "git", "keywords": ["git"], "regex": None, "groups": ["git"]},
        ],
        "progressive": {"hint_prefix": "$"},
        "tool_search": {"top_k": 8, "max_top_k": 20, "provider_search": False},
        "sticky_discovered": True,
    },
    "outputs": {"duplicates": {"suppress": True}, "compaction": []},
    "tools": {"bash": {"scope": "write", "requires_approval": False, "redact": []}},
}


def _changed(**edits):
    document = copy.deepcopy(BASE)
    for path, value in edits.items():
        target = document
        *parents, leaf = path.split("__")
        for parent in parents:
            target = target[parent]
        target[leaf] = value
    return document


def _diff(**edits) -> list[str]:
    return document_diff(old=BASE, new=_changed(**edits))


def test_identical_documents_have_no_changes():
    assert document_diff(old=BASE, new=copy.deepcopy(BASE)) == []


def test_version_etag_label_and_publish_time_are_not_changes():
    assert _diff(version=4, etag='"v4-bbbb"', label="staging", published_at="2026-11-23T00:00:00+00:00") == []


def test_a_scalar_reads_old_arrow_new():
    assert _diff(selection__mode="context_rules") == ["selection.mode: all → context_rules"]


def test_a_tool_list_reads_additions_then_removals():
    assert _diff(selection__always_on=["bash", "git_diff", "read_file"]) == [
        "selection.always_on: + git_diff, - web_fetch"
    ]


def test_restricting_the_allowed_set_says_what_it_was():
    assert _diff(selection__allowed=["bash", "read_file"]) == [
        "selection.allowed: every catalog tool → [bash, read_file]"
    ]


def test_groups_added_removed_and_edited():
    assert _diff(selection__groups={"git": ["git_diff", "git_status"], "testing": ["run_tests"]}) == [
        "selection.groups.git: + git_diff",
        "selection.groups.testing: added [run_tests]",
    ]
    assert _diff(selection__groups={}) == ["selection.groups.git: removed (was [git_status])"]


def test_context_rules_are_matched_by_name():
    rules = [
        {"name": "git", "keywords": ["git"], "regex": None, "groups": ["git"]},
        {"name": "testing", "keywords": ["test", "spec"], "regex": r"\bpytest\b", "groups": ["testing"]},
        {"name": "web", "keywords": ["http"], "regex": None, "groups": []},
    ]
    assert _diff(selection__context_rules=rules) == [
        "selection.context_rules[testing].keywords: + spec",
        r"selection.context_rules[testing].regex: null → \bpytest\b",
        'selection.context_rules: added web {"groups": [], "keywords": ["http"], "regex": null}',
        "selection.context_rules: order testing, git → git, testing",
    ]


def test_compaction_rules_are_matched_by_their_glob():
    rule = {"tools": "bash*", "max_tokens": 2000, "strategy": "head_tail"}
    assert _diff(outputs__compaction=[rule]) == [
        'outputs.compaction: added bash* {"max_tokens": 2000, "strategy": "head_tail"}'
    ]
    edited = document_diff(old=_changed(outputs__compaction=[rule]),
                           new=_changed(outputs__compaction=[{**rule, "max_tokens": 1000}]))
    assert edited == ["outputs.compaction[bash*].max_tokens: 2000 → 1000"]


def test_per_tool_settings_use_the_tool_name_in_the_path():
    assert _diff(tools={"bash": {"scope": "write", "requires_approval": True, "redact": ["env"]}}) == [
        "tools.bash.requires_approval: false → true",
        "tools.bash.redact: + env",
    ]
