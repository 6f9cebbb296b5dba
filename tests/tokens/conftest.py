from __future__ import annotations

import pytest
import tiktoken
from tiktoken_ext import openai_public

from tests.tokens import tiktoken_reads_the_bundled_files
from toolscope import tokenizer as tk


@pytest.fixture(scope="session")
def tiktoken_reference(tmp_path_factory):
    """tiktoken's own encodings (its definitions, its loader), on bpe-openai's files: name -> Encoding."""
    with tiktoken_reads_the_bundled_files(tmp_path_factory.mktemp("tiktoken")):
        return {name: tiktoken.Encoding(**openai_public.ENCODING_CONSTRUCTORS[name]()) for name in tk.ENCODINGS}
