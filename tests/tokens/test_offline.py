"""The vocabularies come from bpe-openai, genuine, through public interfaces: never from the network,
never through tiktoken's download cache, whatever TIKTOKEN_CACHE_DIR says."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys

import pytest
from tiktoken_ext import openai_public

from tests.tokens import TIKTOKEN_URL, tiktoken_reads_the_bundled_files
from toolscope import tokenizer as tk

ROOT = tk.__file__.rsplit("/toolscope/", 1)[0]

# Run in a fresh interpreter (the tokenizer keeps encodings per process), with every outbound
# connection refused and spies on tiktoken's file loader and its cache.
BLOCK_NETWORK = """
import json, os, socket, sys
def refuse(*args, **kwargs):
    raise OSError("network access attempted")
socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse
import tiktoken.load
downloads, cache_reads = [], []
_read_file, _read_file_cached = tiktoken.load.read_file, tiktoken.load.read_file_cached
def spy(path):
    downloads.append(path)
    return _read_file(path)
def cache_spy(path, expected_hash=None):
    cache_reads.append(path)
    return _read_file_cached(path, expected_hash)
tiktoken.load.read_file = spy
tiktoken.load.read_file_cached = cache_spy
"""

LOAD_BOTH = BLOCK_NETWORK + """
from toolscope import tokenizer as tk
text = "hello world <|endoftext|>"
counts = {name: tk.count_tokens(text, name) for name in tk.ENCODINGS}
references = {name: len(tk.encoding_for(name).encode_ordinary(text)) for name in tk.ENCODINGS}
print(json.dumps({"counts": counts, "references": references, "downloads": downloads, "cache_reads": cache_reads,
                  "TIKTOKEN_CACHE_DIR": os.environ.get("TIKTOKEN_CACHE_DIR")}))
"""

EXPECTED_COUNTS = {"o200k_base": 9, "cl100k_base": 8}


def run_python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"}}
    return {**env, **extra}


@pytest.mark.parametrize("encoding", tk.ENCODINGS)
def test_the_encodings_are_tiktokens_own(encoding, tmp_path):
    # tiktoken's definition, run on the bundled file: the hash it checks, its pattern, its special
    # tokens and its parse of the file are the tokenizer's.
    with tiktoken_reads_the_bundled_files(tmp_path) as asked:
        definition = openai_public.ENCODING_CONSTRUCTORS[encoding]()
    vocabulary = tk.VOCABULARIES[encoding]
    assert asked == [(TIKTOKEN_URL.format(encoding), vocabulary.sha256)]
    assert set(definition) == {"name", "pat_str", "mergeable_ranks", "special_tokens"}  # what the tokenizer passes
    assert definition["name"] == vocabulary.name == encoding
    assert definition["pat_str"] == vocabulary.pat_str
    assert definition["special_tokens"] == vocabulary.special_tokens
    assert definition["mergeable_ranks"] == tk.load_mergeable_ranks(encoding)


@pytest.mark.parametrize(("encoding", "sha256"), [
    ("o200k_base", "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"),
    ("cl100k_base", "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"),
])
def test_bundled_vocab_is_the_genuine_file(encoding, sha256):
    assert tk.VOCABULARIES[encoding].sha256 == sha256
    data = gzip.decompress(tk.vocabulary_file(encoding).read_bytes())
    assert hashlib.sha256(data).hexdigest() == sha256


def _tampered(data: bytes, how: str) -> bytes:
    lines = data.splitlines(keepends=True)
    if how == "two ranks swapped":
        first, second = lines[1000].split(), lines[1001].split()
        lines[1000] = first[0] + b" " + second[1] + b"\n"
        lines[1001] = second[0] + b" " + first[1] + b"\n"
    elif how == "truncated":
        lines = lines[: len(lines) // 2]
    else:  # a token added
        lines.append(b"dG9vbHNjb3Bl " + str(len(lines)).encode() + b"\n")
    return b"".join(lines)


@pytest.mark.parametrize("how", ["two ranks swapped", "truncated", "a token added"])
def test_a_tampered_vocabulary_is_refused(how, tmp_path, monkeypatch):
    genuine = gzip.decompress(tk.vocabulary_file("cl100k_base").read_bytes())
    tampered = tmp_path / "cl100k_base.tiktoken.gz"
    tampered.write_bytes(gzip.compress(_tampered(genuine, how)))
    monkeypatch.setattr(tk, "vocabulary_file", lambda encoding: tampered)
    monkeypatch.setattr(tk, "_encodings", {})  # as in a fresh process
    with pytest.raises(RuntimeError, match=r"not 223921b76ee9.* refusing to count with it"):
        tk.encoding_for("cl100k_base")
    assert tk._encodings == {}


def test_the_network_block_would_catch_a_download(tmp_path):
    # Control: plain tiktoken on a fresh cache tries to download, and the block stops it.
    code = BLOCK_NETWORK + """
import tiktoken
try:
    tiktoken.get_encoding("o200k_base")
except Exception as exc:
    print(json.dumps({"error": repr(exc), "downloads": downloads}))
"""
    result = run_python(code, clean_env(TIKTOKEN_CACHE_DIR=str(tmp_path / "fresh")))
    report = json.loads(result.stdout)
    assert "network access attempted" in report["error"]
    assert report["downloads"] == [TIKTOKEN_URL.format("o200k_base")]


@pytest.mark.parametrize("cache_dir", [None, "", "missing"], ids=["unset", "empty", "a directory not there"])
def test_offline_first_use_in_a_fresh_process(cache_dir, tmp_path):
    # Whatever TIKTOKEN_CACHE_DIR says (unset: tiktoken would use <tempdir>/data-gym-cache; empty:
    # no cache at all), the tokenizer neither downloads nor reads or writes tiktoken's cache.
    tempdir = tmp_path / "tmp"
    tempdir.mkdir()
    extra = {"TMPDIR": str(tempdir)}
    if cache_dir is not None:
        extra["TIKTOKEN_CACHE_DIR"] = cache_dir and str(tmp_path / cache_dir)
    result = run_python(LOAD_BOTH, clean_env(**extra))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["counts"] == report["references"] == EXPECTED_COUNTS
    assert report["downloads"] == [] and report["cache_reads"] == []
    assert report["TIKTOKEN_CACHE_DIR"] == extra.get("TIKTOKEN_CACHE_DIR")  # left as it was
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp"] and list(tempdir.iterdir()) == []


def test_concurrent_first_use_from_threads_in_a_fresh_process():
    code = BLOCK_NETWORK + """
import threading
from toolscope import tokenizer as tk
barrier = threading.Barrier(8)
results, errors = [], []
def work(i):
    name = tk.ENCODINGS[i % 2]
    try:
        barrier.wait()
        results.append((name, tk.count_tokens("hello world <|endoftext|>", name), id(tk.encoding_for(name)),
                        id(tk.fast_encoding_for(name))))
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps({"results": sorted(results), "errors": errors, "downloads": downloads, "cache_reads": cache_reads}))
"""
    result = run_python(code, clean_env())
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["errors"] == [] and report["downloads"] == [] and report["cache_reads"] == []
    assert len(report["results"]) == 8
    for name in tk.ENCODINGS:
        seen = {tuple(found) for n, *found in report["results"] if n == name}
        assert len(seen) == 1 and next(iter(seen))[0] == EXPECTED_COUNTS[name]  # one of each Encoding
