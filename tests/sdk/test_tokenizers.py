"""The agent counts tokens as the server does: bpe-openai when installed, then tiktoken, then
characters/4 -- and says which."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from toolscope_agent import ToolSelector, tokenizers
from toolscope_agent.engine.tokens import approximate_counter

from tests.tokens import tiktoken_reads_the_bundled_files
from toolscope.tokenizer import count_tokens

SAMPLES = [
    "",
    "def add(a, b):\n    return a + b\n",
    "naïve café — 東京 🚀 <|endoftext|> \t\t  trailing   \n\n",
    "\ud800 a lone surrogate and \udfff another",
    Path(tokenizers.__file__).read_text(),
]


@pytest.fixture(autouse=True)
def fresh_counters():
    tokenizers.exact_counter.cache_clear()
    yield
    tokenizers.exact_counter.cache_clear()


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_bpe_openai_is_preferred_and_counts_what_the_server_counts(encoding):
    count, name = tokenizers.exact_counter(encoding)
    assert name == "bpe-openai"
    assert [count(text) for text in SAMPLES] == [count_tokens(text, encoding) for text in SAMPLES]


def test_tiktoken_counts_when_bpe_openai_is_missing(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "bpe_openai", None)
    with tiktoken_reads_the_bundled_files(tmp_path):  # tiktoken.get_encoding without a download
        count, name = tokenizers.exact_counter("o200k_base")
    assert name == "tiktoken"
    assert [count(text) for text in SAMPLES] == [count_tokens(text, "o200k_base") for text in SAMPLES]


def test_characters_over_four_only_when_no_tokenizer_is_installed(monkeypatch, caplog):
    for module in ("bpe_openai", "tiktoken"):
        monkeypatch.setitem(sys.modules, module, None)
    assert tokenizers.exact_counter("o200k_base") == (approximate_counter, "approximate")
    assert "pip install bpe-openai" in caplog.text


def test_lone_surrogates_and_texts_bpe_openai_refuses_are_still_counted():
    count, _ = tokenizers.exact_counter("o200k_base")
    assert count("ok \ud800 fine") == count_tokens("ok \ufffd fine", "o200k_base")
    huge = "word " * 250_000  # 1,250,000 characters: over what bpe-openai's public encoder takes
    assert count(huge) == approximate_counter(huge)


def test_the_selector_follows_the_policys_encoding():
    o200k = ToolSelector([], {"encoding": "o200k_base"})
    cl100k = ToolSelector([], {"encoding": "cl100k_base"})
    text = SAMPLES[2]
    assert (o200k.tokenizer, cl100k.tokenizer) == ("bpe-openai", "bpe-openai")
    assert o200k.counter(text) == count_tokens(text, "o200k_base")
    assert cl100k.counter(text) == count_tokens(text, "cl100k_base")
    assert o200k.counter(text) != cl100k.counter(text)
    assert ToolSelector([], {}).encoding == "o200k_base"


def test_an_unknown_encoding_falls_back_to_characters_over_four():
    assert ToolSelector([], {"encoding": "p50k_base"}).tokenizer == "approximate"


def test_the_gateway_extra_installs_the_tokenizer_the_server_pins():
    # A gateway installed with `pip install "./sdk[gateway]"` counts as the server does, without a
    # warning at startup that bpe-openai is missing (issue 27, item 8).
    import tomllib

    from packaging.requirements import Requirement

    root = Path(__file__).resolve().parents[2]
    extras = tomllib.loads((root / "sdk" / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pinned = next(line.split("==")[1].split()[0] for line in (root / "requirements.txt").read_text().splitlines()
                  if line.startswith("bpe-openai=="))
    for extra in ("gateway", "tokens"):
        wanted = {Requirement(text).name: Requirement(text) for text in extras[extra]}
        assert tokenizers.BPE_OPENAI in wanted, extra
        assert wanted[tokenizers.BPE_OPENAI].specifier.contains(pinned), (extra, pinned)
