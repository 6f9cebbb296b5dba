"""toolscope's tool_search ranking (engine/search.py, engine/ranking.py) and parameter summaries.

The ranking's own behaviour (BM25F, stems, bonuses, history) is in test_ranking.py; this file
covers what every ranker shares: top_k, ties, caching, hits, summaries."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from toolscope_agent.engine.search import (
    LOW_CONFIDENCE,
    SearchHit,
    SearchIndex,
    answer_text,
    clamp_top_k,
    confident,
    parameter_summary,
    search_tools,
)

READ_SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}, "offset": {"type": "integer"},
                                                "limit": {"type": "integer"}}, "required": ["path"]}
CATALOG = [
    {"name": "read", "description": "Read a file from disk and return its contents.", "input_schema": READ_SCHEMA},
    {"name": "write", "description": "Write content to a file on disk.", "input_schema": {
        "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"]}},
    {"name": "bash", "description": "Run a shell command.", "input_schema": {}},
    {"name": "websearch", "description": "Search the web with a query and return ranked URLs.", "input_schema": {}},
    {"name": "git_diff", "description": "Show changes between commits.\n\nLong usage notes.", "input_schema": {}},
    {"name": "git_status", "description": "Show the working tree status.", "input_schema": {}},
]


def names(hits: list[SearchHit]) -> list[str]:
    """The tools the query matched; the unmatched ones that fill an answer are `everything`'s."""
    return [hit.name for hit in hits if hit.matched]


def everything(hits: list[SearchHit]) -> list[str]:
    return [hit.name for hit in hits]


@pytest.mark.parametrize(("query", "first"), [
    ("read", "read"),
    ("READ", "read"),
    ("search the web", "websearch"),
    ("git diff", "git_diff"),
    ("git_diff", "git_diff"),
    ("shell command", "bash"),
    ("status", "git_status"),
])
def test_the_obvious_tool_ranks_first(query, first):
    assert names(search_tools(CATALOG, query))[0] == first


def test_an_exact_name_outranks_a_name_sharing_a_word():
    hits = search_tools(CATALOG, "git_status")
    assert names(hits)[:2] == ["git_status", "git_diff"]
    assert hits[0].score > 10 > hits[1].score


def test_a_typo_finds_the_word_one_edit_away():
    assert names(search_tools(CATALOG, "comand")) == ["bash"]
    assert names(search_tools(CATALOG, "shel comand")) == ["bash"]


def test_a_meaningless_query_matches_nothing_yet_is_answered_and_blank_queries_are_empty():
    hits = search_tools([{"name": "xyz", "description": "yyy yyy"}], "qwwwq")
    assert everything(hits) == ["xyz"] and names(hits) == [] and not confident(hits)
    assert search_tools(CATALOG, "") == [] and search_tools(CATALOG, "   \n") == []
    assert names(search_tools(CATALOG, "!!!")) == [] and len(search_tools(CATALOG, "!!!")) == len(CATALOG)


def test_an_answer_is_never_empty_the_matches_first_then_the_nearest_by_spelling():
    catalog = [{"name": f"tool_{i}", "description": "Does a thing."} for i in range(30)]
    catalog += [{"name": "git_status", "description": "Working tree status."},
                {"name": "git_commit", "description": "Record changes."},
                {"name": "calendar", "description": "Shows the agenda."}]
    hits = search_tools(catalog, "working tree", top_k=5)
    assert names(hits) == ["git_status"] and len(hits) == 5 and confident(hits)
    assert hits[0].score > 0 and all(hit.score == 0 and not hit.matched for hit in hits[1:])
    # Two edits away: no word matches, the nearest spelling comes first.
    typo = search_tools(catalog, "kalendr", top_k=3)
    assert names(typo) == [] and everything(typo)[0] == "calendar" and not confident(typo)
    # The matched head is what the ranking alone answers, in the same order.
    index = SearchIndex(catalog)
    assert index.rank("record changes", 20)[:1] == index.ranked("record changes", 20)


def test_the_answer_text_says_when_nothing_matched():
    catalog = [{"name": "git_status", "description": "Working tree status."}, {"name": "calendar"}]
    found, unsure = search_tools(catalog, "working tree"), search_tools(catalog, "zzyzx qwv")
    assert answer_text(found).startswith("Tools found:\ngit_status — Working tree status.")
    assert answer_text(unsure).startswith(LOW_CONFIDENCE + "\n")
    assert answer_text([]) == "The catalog has no tools."


def test_top_k_is_clamped():
    catalog = [{"name": f"file_tool_{i}", "description": "Works on a file."} for i in range(40)]
    assert len(search_tools(catalog, "file", top_k=1)) == 1
    assert len(search_tools(catalog, "file", top_k=0)) == 1
    assert len(search_tools(catalog, "file", top_k=100)) == 20
    assert len(search_tools(catalog, "file", top_k=100, max_top_k=50)) == 20
    assert len(search_tools(catalog, "file", top_k=15, max_top_k=5)) == 5
    assert clamp_top_k("5") == 5 and clamp_top_k("x") == 8 and clamp_top_k(None, None) == 8
    assert clamp_top_k(True) == 8 and clamp_top_k(3.9) == 3


def test_ties_are_broken_by_name_not_catalog_order():
    catalog = [{"name": n, "description": "Fetch a page."} for n in ("fetch_c", "fetch_a", "fetch_b")]
    hits = search_tools(catalog, "fetch")
    assert names(hits) == ["fetch_a", "fetch_b", "fetch_c"]
    assert len({hit.score for hit in hits}) == 1


def test_a_hit_summarises_name_first_sentence_and_parameters():
    hit = search_tools(CATALOG, "read")[0]
    assert hit.parameters == "{path: string, offset?: integer, limit?: integer}"
    assert hit.summary == ("read — Read a file from disk and return its contents. — "
                           "{path: string, offset?: integer, limit?: integer}")
    diff = search_tools(CATALOG, "git_diff")[0]
    assert diff.summary == "git_diff — Show changes between commits. — {}"


def test_repeated_names_keep_the_first_entry_and_nameless_entries_are_skipped():
    catalog = [{"description": "read"}, {"name": "read", "description": "first"},
               {"name": "read", "description": "second"}]
    hits = search_tools(catalog, "read")
    assert names(hits) == ["read"] and "first" in hits[0].summary


def test_the_cached_index_follows_catalog_changes():
    catalog = copy.deepcopy(CATALOG)
    assert names(search_tools(catalog, "deploy")) == []
    catalog.append({"name": "deploy", "description": "Ship it."})
    assert names(search_tools(catalog, "deploy")) == ["deploy"]
    catalog[-1]["description"] = "Ship it to production."
    assert "production" in search_tools(catalog, "deploy")[0].summary
    catalog[0]["input_schema"] = {"type": "object", "properties": {"p": {"type": "string"}}}
    assert search_tools(catalog, "read")[0].parameters == "{p?: string}"


def test_search_index_matches_search_tools():
    index = SearchIndex(CATALOG)
    assert index.search("git", 3) == search_tools(CATALOG, "git", 3)


def test_odd_catalog_entries_do_not_break_search():
    catalog = [{"name": ["x"], "description": 3}, {"name": "ok", "description": None}, {"name": "ok2"}]
    assert names(search_tools(catalog, "ok")) == ["ok", "ok2"]


@pytest.mark.parametrize(("schema", "summary"), [
    (READ_SCHEMA, "{path: string, offset?: integer, limit?: integer}"),
    ({"properties": {"mode": {"enum": ["fast", "slow"]}}, "required": ["mode"]}, "{mode: fast|slow}"),
    ({"properties": {"mode": {"type": "string", "enum": list("abcdefghij")}}}, "{mode?: a|b|c|d|e|f|g|h|…}"),
    ({"properties": {"files": {"type": "array", "items": {"type": "string"}}}}, "{files?: string[]}"),
    ({"properties": {"rows": {"type": "array", "items": {"type": "object", "properties": {}}}}}, "{rows?: object[]}"),
    ({"properties": {"opts": {"type": "object", "properties": {"a": {"type": "string"}}}}}, "{opts?: object}"),
    ({"properties": {"v": {"type": ["string", "null"]}}}, "{v?: string|null}"),
    ({"properties": {"v": {"anyOf": [{"type": "integer"}, {"type": "string"}]}}}, "{v?: integer|string}"),
    ({"properties": {"v": {"type": "array", "items": {"type": ["integer", "string"]}}}}, "{v?: (integer|string)[]}"),
    ({"properties": {"v": {"const": 3}, "w": {}}}, "{v?: 3, w?: any}"),
    ({"type": "object"}, "{}"),
    (None, "{}"),
    ("junk", "{}"),
])
def test_parameter_summary(schema, summary):
    assert parameter_summary(schema) == summary


catalogs = st.lists(st.fixed_dictionaries({
    "name": st.text(alphabet="abcdefgh_ij", min_size=1, max_size=12),
    "description": st.text(alphabet="abcdefgh ij.", max_size=40),
}), max_size=25)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalog=catalogs, query=st.text(alphabet="abcdefgh _ij", max_size=15), top_k=st.integers(-5, 40))
def test_search_returns_at_most_top_k_hits_sorted_and_stable(catalog, query, top_k):
    hits = search_tools(catalog, query, top_k)
    distinct = len({tool["name"] for tool in catalog})
    assert len(hits) == (0 if not query.strip() else min(max(1, min(top_k, 20)), distinct))
    matched = [hit for hit in hits if hit.matched]
    assert hits[:len(matched)] == matched and all(hit.score > 0 for hit in matched)
    assert all(hit.score == 0 for hit in hits[len(matched):])
    assert [(-h.score, h.name) for h in matched] == sorted((-h.score, h.name) for h in matched)
    assert len(set(everything(hits))) == len(hits)
    assert search_tools(copy.deepcopy(catalog), query, top_k) == hits
    assert SearchIndex(catalog).search(query, top_k) == hits


@settings(max_examples=200, deadline=None)
@given(schema=st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                               st.sampled_from(["type", "properties", "items", "enum", "required", "anyOf", "x"]),
                               inner, max_size=4), max_leaves=20))
def test_parameter_summary_never_fails(schema):
    assert parameter_summary(schema).startswith("{")


def test_an_index_is_reused_for_the_same_history_and_rebuilt_for_another():
    from toolscope_agent.engine.search import search_index

    catalog = [{"name": "git_log", "description": "Show commits."}, {"name": "read_file", "description": "Read."}]
    history = {"git_log": ["what changed lately"]}
    first = search_index(catalog, "bm25f-2", history)
    assert search_index(catalog, "bm25f-2", history) is first
    assert search_index(catalog, "bm25f-2", {"git_log": ["what changed lately"]}) is first  # equal texts
    other = search_index(catalog, "bm25f-2", {"git_log": ["who wrote this"]})
    assert other is not first and search_index(catalog, "bm25f-2", None) is not first
