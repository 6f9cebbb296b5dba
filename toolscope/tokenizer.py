"""Exact BPE token counts, offline, through bpe-openai's and tiktoken's public interfaces.

Each encoding (o200k_base, cl100k_base) is loaded twice, from what the pinned `bpe-openai`
package ships, and tiktoken's download cache (`TIKTOKEN_CACHE_DIR`) is never read or written:

- counting: `bpe_openai.get_encoding(name).encode_ordinary`, bpe-openai's tiktoken-compatible
  `Encoding` (its Rust tokenizer carries the vocabulary). It refuses texts of 1,000,000 characters
  or more and texts of more than 200,000 tokens (ValueError); tiktoken counts those;
- the reference and that fallback: a `tiktoken.Encoding` made with tiktoken's public constructor
  from the vocabulary file bpe-openai ships (`bpe_openai/data/<name>.tiktoken.gz`, read with
  importlib.resources), refused unless it decompresses to the sha256 tiktoken checks a download
  of it against, and from the encoding's pattern and special tokens. The hashes, patterns and
  special tokens are `VOCABULARIES`, as tiktoken 0.14.0 defines the encodings in
  `tiktoken_ext.openai_public`; tests/tokens runs tiktoken's own definition on the bundled file
  and checks that they still agree (tiktoken publishes no constant for them, and calling its
  definition downloads).

bench/tokenizer_speed.py compares the paths; the two agree token for token (tests/tokens).

Text is encoded as ordinary text: a tool output containing `<|endoftext|>` counts the tokens of
those characters and never raises; a lone surrogate counts as U+FFFD, as tiktoken counts it. What
a tool definition's cost counts is documented in `toolscope_agent.engine.tokens`.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import importlib.resources
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from typing import Any

import bpe_openai
import tiktoken
from toolscope_agent.engine.tokens import FLAVORS, render_tool

ENCODINGS = ("o200k_base", "cl100k_base")
SCHEMA_CACHE_SIZE = 8192

# The package whose data files are the vocabularies, `<name>.tiktoken.gz` each.
VOCABULARY_PACKAGE = "bpe_openai.data"


@dataclass(frozen=True)
class Vocabulary:
    """What defines an encoding besides its ranks: the sha256 of its .tiktoken file (what
    tiktoken checks a download against), its pre-tokenisation pattern and its special tokens."""

    name: str
    sha256: str
    pat_str: str
    special_tokens: Mapping[str, int]


VOCABULARIES = {
    "o200k_base": Vocabulary(
        name="o200k_base",
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        pat_str="|".join(
            [
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""\p{N}{1,3}""",
                r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
                r"""\s*[\r\n]+""",
                r"""\s+(?!\S)""",
                r"""\s+""",
            ]
        ),
        special_tokens={"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    ),
    "cl100k_base": Vocabulary(
        name="cl100k_base",
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        pat_str="|".join(
            [
                r"""'(?i:[sdmt]|ll|ve|re)""",
                r"""[^\r\n\p{L}\p{N}]?+\p{L}++""",
                r"""\p{N}{1,3}+""",
                r""" ?[^\s\p{L}\p{N}]++[\r\n]*+""",
                r"""\s++$""",
                r"""\s*[\r\n]""",
                r"""\s+(?!\S)""",
                r"""\s""",
            ]
        ),
        special_tokens={
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
}


def _check_encoding(name: str) -> None:
    if name not in ENCODINGS:
        raise ValueError(f"unknown encoding {name!r}; allowed: {', '.join(ENCODINGS)}")


def vocabulary_file(encoding: str) -> Traversable:
    """The gzip'ed .tiktoken file of `encoding` that bpe-openai ships."""
    _check_encoding(encoding)
    return importlib.resources.files(VOCABULARY_PACKAGE) / f"{encoding}.tiktoken.gz"


def load_mergeable_ranks(encoding: str) -> dict[bytes, int]:
    """`encoding`'s ranks (token bytes -> rank) from bpe-openai's file, once its sha256 is checked.

    Raises RuntimeError when the file is not the genuine vocabulary. The format is tiktoken's: one
    `<base64 of the token's bytes> <rank>` a line.
    """
    vocabulary = VOCABULARIES[encoding]
    source = vocabulary_file(encoding)
    data = gzip.decompress(source.read_bytes())
    actual = hashlib.sha256(data).hexdigest()
    if actual != vocabulary.sha256:
        raise RuntimeError(
            f"{source} decompresses to sha256 {actual}, not {vocabulary.sha256} (the genuine {encoding} "
            f"vocabulary, as tiktoken checks it): refusing to count with it"
        )
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


_encodings: dict[str, tiktoken.Encoding] = {}
_fast_encodings: dict[str, bpe_openai.Encoding] = {}
_encodings_lock = threading.Lock()


def encoding_for(name: str) -> tiktoken.Encoding:
    """The tiktoken encoding `name` (one of ENCODINGS), built offline once per process."""
    encoding = _encodings.get(name)
    if encoding is not None:
        return encoding
    _check_encoding(name)
    with _encodings_lock:
        encoding = _encodings.get(name)
        if encoding is None:
            vocabulary = VOCABULARIES[name]
            encoding = tiktoken.Encoding(
                name,
                pat_str=vocabulary.pat_str,
                mergeable_ranks=load_mergeable_ranks(name),
                special_tokens=dict(vocabulary.special_tokens),
            )
            _encodings[name] = encoding
    return encoding


def fast_encoding_for(name: str) -> bpe_openai.Encoding:
    """bpe-openai's `Encoding` for `name` (one of ENCODINGS), loaded once per process."""
    encoding = _fast_encodings.get(name)
    if encoding is not None:
        return encoding
    _check_encoding(name)
    with _encodings_lock:
        encoding = _fast_encodings.get(name)
        if encoding is None:
            encoding = _fast_encodings[name] = bpe_openai.get_encoding(name)
    return encoding


@functools.cache
def counter(encoding: str) -> Callable[[str], int]:
    """A TokenCounter for `encoding` (both encodings loaded now, so an unknown name fails here)."""
    reference = encoding_for(encoding).encode_ordinary
    fast = fast_encoding_for(encoding).encode_ordinary

    def count(text: str) -> int:
        try:
            return len(fast(text))
        except ValueError:  # bpe-openai refuses 1,000,000+ characters and over 200,000 tokens
            return len(reference(text))

    return count


def count_tokens(text: str, encoding: str) -> int:
    """The number of tokens `text` encodes to, special-token-looking text counted as ordinary."""
    return counter(encoding)(text)


def count_many(texts: Sequence[str], encoding: str) -> list[int]:
    """count_tokens of each text, in order. A text repeated in `texts` (a duplicate output, the
    same arguments) is counted once."""
    count = counter(encoding)
    counted: dict[str, int] = {}
    result = []
    for text in texts:
        tokens = counted.get(text)
        if tokens is None:
            tokens = counted[text] = count(text)
        result.append(tokens)
    return result


_schema_cache: OrderedDict[tuple[str, str, str], int] = OrderedDict()
_schema_cache_lock = threading.Lock()
_schema_cache_stats = {"hits": 0, "misses": 0}


def schema_tokens(
    *,
    name: str,
    description: str,
    input_schema: Mapping[str, Any],
    schema_hash: str,
    encoding: str,
    flavor: str = "openai",
) -> int:
    """The estimated schema cost of one tool (see toolscope_agent.engine.tokens), memoised.

    `schema_hash` must be `schemas.schema_hash(name, description, input_schema)`: the count is
    cached under (schema_hash, encoding, flavor) for the process (LRU, SCHEMA_CACHE_SIZE entries),
    and a hit renders and encodes nothing.
    """
    key = (schema_hash, encoding, flavor)
    with _schema_cache_lock:
        cached = _schema_cache.get(key)
        if cached is not None:
            _schema_cache.move_to_end(key)
            _schema_cache_stats["hits"] += 1
            return cached
    _check_encoding(encoding)
    if flavor not in FLAVORS:
        raise ValueError(f"unknown flavor {flavor!r}; allowed: {', '.join(FLAVORS)}")
    tokens = count_tokens(render_tool(name, description, input_schema, flavor), encoding)
    with _schema_cache_lock:
        _schema_cache_stats["misses"] += 1
        _schema_cache[key] = tokens
        _schema_cache.move_to_end(key)
        while len(_schema_cache) > SCHEMA_CACHE_SIZE:
            _schema_cache.popitem(last=False)
    return tokens


def schema_tokens_cache_info() -> dict[str, int]:
    """Hits, misses and current size of schema_tokens' cache."""
    with _schema_cache_lock:
        return {**_schema_cache_stats, "size": len(_schema_cache), "maxsize": SCHEMA_CACHE_SIZE}


def schema_tokens_cache_clear() -> None:
    with _schema_cache_lock:
        _schema_cache.clear()
        _schema_cache_stats.update(hits=0, misses=0)
