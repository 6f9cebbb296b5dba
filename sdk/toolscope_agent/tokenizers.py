"""Token counters for the agent side: exact BPE when a tokenizer is installed, chars/4 otherwise.

The server counts every output with the exact BPE of the project's encoding (`o200k_base` or
`cl100k_base`, the policy document's ``encoding``), and it compacts an output only when that count
exceeds the rule's budget. An agent that counts differently compacts different outputs, and cuts
them at different places. `exact_counter` therefore looks for, in order:

1. ``bpe-openai`` (the package the server pins): its public encoder, which ships the
   vocabularies and never downloads anything;
2. ``tiktoken``: ``encode_ordinary``; tiktoken downloads a vocabulary on its first use unless its
   cache (``TIKTOKEN_CACHE_DIR``) holds it already;
3. `approximate_counter` (one token per four characters), the last resort.

Text is counted as ordinary text (``<|endoftext|>`` is its characters, never a special token) and
lone surrogates count as U+FFFD, as tiktoken and the server count them.
"""

from __future__ import annotations

import functools
import importlib
import logging
from collections.abc import Callable
from typing import Any

from toolscope_agent.engine.tokens import TokenCounter, approximate_counter

logger = logging.getLogger("toolscope_agent")

DEFAULT_ENCODING = "o200k_base"
ENCODINGS = ("o200k_base", "cl100k_base")

BPE_OPENAI = "bpe-openai"
TIKTOKEN = "tiktoken"
APPROXIMATE = "approximate"


def _without_surrogates(text: str) -> str:
    """What tiktoken encodes when `text` holds lone surrogates: each one becomes U+FFFD."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _bpe_openai(encoding: str) -> TokenCounter:
    # The package's public Encoding (its private Rust binding counts ~25% faster, but a release
    # may move it). It refuses texts of 1,000,000 characters or more: those are over any budget
    # by far, and counted one token per four characters.
    bpe: Any = importlib.import_module("bpe_openai")
    encode = bpe.get_encoding(encoding).encode_ordinary

    def counter(text: str) -> int:
        try:
            return len(encode(text))
        except (UnicodeError, ValueError):  # lone surrogates, or a text too long for it
            pass
        try:
            return len(encode(_without_surrogates(text)))
        except ValueError:
            return approximate_counter(text)

    return counter


def _tiktoken(encoding: str) -> TokenCounter:
    tiktoken: Any = importlib.import_module("tiktoken")
    encode = tiktoken.get_encoding(encoding).encode_ordinary

    def counter(text: str) -> int:
        return len(encode(text))

    return counter


_BACKENDS: tuple[tuple[str, Callable[[str], TokenCounter]], ...] = ((BPE_OPENAI, _bpe_openai), (TIKTOKEN, _tiktoken))


@functools.lru_cache(maxsize=len(ENCODINGS) + 1)
def exact_counter(encoding: str = DEFAULT_ENCODING) -> tuple[TokenCounter, str]:
    """A counter for `encoding` and the name of what counts: "bpe-openai", "tiktoken", or
    "approximate" (chars/4) when neither can be loaded or the encoding is unknown. Loaded once
    per process and encoding; loading bpe-openai's vocabulary takes about a second."""
    if encoding not in ENCODINGS:
        logger.warning("toolscope: unknown encoding %r; counting tokens as characters/4", encoding)
        return approximate_counter, APPROXIMATE
    for name, load in _BACKENDS:
        try:
            return load(encoding), name
        except ImportError:
            continue
        except Exception as exc:  # a broken install, or tiktoken unable to fetch its vocabulary
            logger.warning("toolscope: %s cannot count %s (%s); trying the next tokenizer", name, encoding, exc)
    logger.warning("toolscope: neither bpe-openai nor tiktoken is installed; counting tokens as characters/4, "
                   "so compaction can differ from the server's (pip install bpe-openai)")
    return approximate_counter, APPROXIMATE
