"""Token counting: exact BPE counts offline (toolscope.tokenizer) and schema rendering (engine.tokens)."""

from __future__ import annotations

import contextlib
import gzip
from collections.abc import Iterator
from pathlib import Path

import pytest
from tiktoken_ext import openai_public

from toolscope import tokenizer as tk

TIKTOKEN_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"


@contextlib.contextmanager
def tiktoken_reads_the_bundled_files(directory: Path) -> Iterator[list[tuple[str, str | None]]]:
    """Within it, tiktoken's own definitions of the encodings (`tiktoken_ext.openai_public`, which
    `tiktoken.get_encoding` runs) read bpe-openai's files instead of downloading: tiktoken's loader
    (`load_tiktoken_bpe`: its hash check, its parser) is handed a decompressed copy of the file the
    URL names, written under `directory`, with tiktoken's cache off. Yields the (url, expected hash)
    pairs tiktoken asked for.

    An independent reference for the tokenizer, which shares only the file with it."""
    load_tiktoken_bpe = openai_public.load_tiktoken_bpe
    asked: list[tuple[str, str | None]] = []

    def from_the_bundled_file(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        asked.append((url, expected_hash))
        encoding = url.rsplit("/", 1)[-1].removesuffix(".tiktoken")
        local = directory / f"{encoding}.tiktoken"
        if not local.exists():
            local.write_bytes(gzip.decompress(tk.vocabulary_file(encoding).read_bytes()))
        return load_tiktoken_bpe(str(local), expected_hash=expected_hash)

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIKTOKEN_CACHE_DIR", "")  # tiktoken's cache off: it neither reads nor writes one
        patch.setattr(openai_public, "load_tiktoken_bpe", from_the_bundled_file)
        yield asked
