"""Counts and token ids equal tiktoken's, for both encodings.

The pinned ids come from tests published upstream and were checked against tiktoken 0.14.0:
- openai/tiktoken tests/test_encoding.py (test_simple, test_simple_regex, test_basic_encode,
  test_encode_surrogate_pairs): cl100k_base;
- openai/harmony tests/test_harmony.py (test_encode_allowed_special): o200k_base, whose
  ordinary vocabulary o200k_harmony shares.
"""

from __future__ import annotations

import json

import bpe_openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolscope import tokenizer as tk

PUBLISHED = [
    ("cl100k_base", "hello world", [15339, 1917]),
    ("cl100k_base", "rer", [38149]),
    ("cl100k_base", "'rer", [2351, 81]),
    ("cl100k_base", "today\n ", [31213, 198, 220]),
    ("cl100k_base", "today\n \n", [31213, 27907]),
    ("cl100k_base", "today\n  \n", [31213, 14211]),
    ("cl100k_base", " \x850", [220, 126, 227, 15]),
    ("cl100k_base", "👍", [9468, 239, 235]),
    ("cl100k_base", "\ud83d\udc4d", [9468, 239, 235]),  # a surrogate pair becomes its code point
    ("o200k_base", "hello world", [24912, 2375]),
    ("o200k_base", "<|start|>", [27, 91, 5236, 91, 29]),  # harmony's special token, as ordinary text
]

CODE = '''def handler(request):
    """Answer one request."""
    payload = json.loads(request.body or b"{}")
    if not payload.get("items"):
        return JsonResponse({"error": "no items"}, status=400)
    return JsonResponse({"count": len(payload["items"])}, status=200)
'''
SHELL = (
    "$ pytest -q tests/api\n"
    "........................................................................ [ 72%]\n"
    "FAILED tests/api/test_ingest.py::test_gzip_body - AssertionError: assert 400 == 202\n"
    "1 failed, 99 passed in 3.21s\n"
    "drwxr-xr-x  5 dev dev  4096 Mar  3 10:12 .\n"
)
JSON_TEXT = json.dumps(
    {"results": [{"id": i, "path": f"src/módulo_{i}.py", "score": i / 7, "tags": ["a", "b"]} for i in range(5)]},
    indent=2,
    ensure_ascii=False,
)
TEXTS = [
    "",
    "hello world",
    "Grüße aus Köln — naïve café, 日本語とEnglish 12345!\n",
    "Привет, мир. مرحبا بالعالم. नमस्ते दुनिया. 안녕하세요 세계. 😊👋🏾👨‍👩‍👧‍👦🇺🇸",
    CODE,
    SHELL,
    JSON_TEXT,
    "a" + " " * 500 + "b\n\n\n\t\t\t   \r\n" + "\n" * 100,
    "x" * 20_000,
    "<|endoftext|>",
    "before <|endoftext|> after <|fim_prefix|><|endofprompt|> <|start|>",
    "lone surrogate \ud800 here",
]


@pytest.mark.parametrize(("encoding", "text", "ids"), PUBLISHED)
def test_published_vectors(encoding, text, ids):
    enc = tk.encoding_for(encoding)
    assert enc.encode_ordinary(text) == ids
    assert tk.count_tokens(text, encoding) == len(ids)
    assert enc.decode(ids) == text.encode("utf-16", "surrogatepass").decode("utf-16")


@pytest.mark.parametrize("encoding", tk.ENCODINGS)
@pytest.mark.parametrize("text", TEXTS)
def test_counts_equal_tiktoken(encoding, text, tiktoken_reference):
    reference = tiktoken_reference[encoding].encode(text, disallowed_special=())
    assert tk.encoding_for(encoding).encode_ordinary(text) == reference
    assert tk.count_tokens(text, encoding) == len(reference)
    assert tk.counter(encoding)(text) == len(reference)


@pytest.mark.parametrize(
    ("encoding", "ids"),
    [
        # As ordinary text, the special token's characters; never its special id, never an error.
        ("cl100k_base", [27, 91, 8862, 728, 428, 91, 29]),
        ("o200k_base", [27, 91, 419, 1440, 919, 91, 29]),
    ],
)
def test_special_token_text_is_ordinary_text(encoding, ids):
    enc = tk.encoding_for(encoding)
    assert enc.encode_ordinary("<|endoftext|>") == ids
    assert enc.eot_token not in ids
    assert tk.count_tokens("<|endoftext|>", encoding) == 7
    with pytest.raises(ValueError, match="disallowed special token"):
        enc.encode("<|endoftext|>")  # what plain encode() would have done


@pytest.mark.parametrize("encoding", tk.ENCODINGS)
def test_count_many_equals_count_tokens(encoding):
    many = TEXTS * 20
    assert tk.count_many(many, encoding) == [tk.count_tokens(text, encoding) for text in many]
    assert tk.count_many(TEXTS[:3], encoding) == [tk.count_tokens(text, encoding) for text in TEXTS[:3]]
    assert tk.count_many([], encoding) == []
    assert tk.count_many(("hello world",), encoding) == [2]


@pytest.mark.parametrize("encoding", tk.ENCODINGS)
def test_the_fast_counter_is_in_use_and_agrees_with_tiktoken_on_every_text(encoding):
    fast = tk.fast_encoding_for(encoding)
    assert isinstance(fast, bpe_openai.Encoding) and fast.name == encoding
    encode = tk.encoding_for(encoding).encode_ordinary
    for text in [*TEXTS, CODE * 30, SHELL * 30, JSON_TEXT * 30, "\ud800 lone surrogate", "<|endoftext|>" * 3]:
        assert tk.count_tokens(text, encoding) == len(fast.encode_ordinary(text)) == len(encode(text))


@pytest.mark.parametrize("encoding", tk.ENCODINGS)
@pytest.mark.parametrize(("text", "refusal"), [
    (CODE * 4_000, "Input too long"),  # 1,000,000 characters or more
    ("7" * 700_000, "exceeds chunk limit 200000"),  # under a million characters, over 200,000 tokens
], ids=["a million characters", "over 200,000 tokens"])
def test_texts_bpe_openai_refuses_are_counted_by_tiktoken(encoding, text, refusal):
    with pytest.raises(ValueError, match=refusal):
        tk.fast_encoding_for(encoding).encode_ordinary(text)
    assert tk.count_tokens(text, encoding) == len(tk.encoding_for(encoding).encode_ordinary(text))
    assert tk.count_many([text, "hello world"], encoding) == [tk.count_tokens(text, encoding), 2]


@settings(max_examples=400, deadline=None)
@given(text=st.text(alphabet=st.characters(), max_size=200))
def test_counts_equal_tiktoken_for_any_text(text):
    for encoding in tk.ENCODINGS:
        assert tk.count_tokens(text, encoding) == len(tk.encoding_for(encoding).encode_ordinary(text))


def test_encodings_are_loaded_once_per_process():
    assert tk.encoding_for("o200k_base") is tk.encoding_for("o200k_base")
    assert tk.encoding_for("cl100k_base").name == "cl100k_base"


@pytest.mark.parametrize("call", [
    lambda: tk.encoding_for("p50k_base"),
    lambda: tk.count_tokens("hi", "gpt-4o"),
    lambda: tk.count_many(["hi"], "O200K_BASE"),
    lambda: tk.counter(""),
])
def test_unknown_encodings_are_refused_naming_the_allowed_ones(call):
    with pytest.raises(ValueError, match="allowed: o200k_base, cl100k_base"):
        call()
