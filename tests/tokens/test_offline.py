"""The vocabularies come from bpe-openai, genuine and in tiktoken's cache, never from the network."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from tiktoken_ext import openai_public

from toolscope import tokenizer as tk

ROOT = Path(__file__).resolve().parents[2]

# Run in a fresh interpreter (tiktoken keeps encodings per process), with every outbound
# connection refused and a spy on tiktoken's downloader.
BLOCK_NETWORK = """
import json, os, socket, sys
def refuse(*args, **kwargs):
    raise OSError("network access attempted")
socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse
import tiktoken.load
downloads = []
_read_file = tiktoken.load.read_file
def spy(path):
    downloads.append(path)
    return _read_file(path)
tiktoken.load.read_file = spy
"""

LOAD_BOTH = BLOCK_NETWORK + """
from toolscope import tokenizer as tk
counts = {name: tk.count_tokens("hello world <|endoftext|>", name) for name in tk.ENCODINGS}
cache = os.environ["TIKTOKEN_CACHE_DIR"]
print(json.dumps({"counts": counts, "downloads": downloads, "cache": cache, "files": sorted(os.listdir(cache))}))
"""

EXPECTED_COUNTS = {"o200k_base": 9, "cl100k_base": 8}


def run_python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"}}
    return {**env, **extra}


def cache_names() -> set[str]:
    return {tk.vocab_file(name).cache_name for name in tk.ENCODINGS}


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network access attempted")

    for target, name in [(socket.socket, "connect"), (socket.socket, "connect_ex"),
                         (socket, "create_connection"), (socket, "getaddrinfo")]:
        monkeypatch.setattr(target, name, refuse)


@pytest.mark.parametrize("encoding", tk.ENCODINGS)
def test_vocab_source_is_read_from_tiktoken(encoding, monkeypatch):
    # What tiktoken's own constructor asks for, captured instead of downloaded.
    asked = []
    monkeypatch.setattr(
        openai_public, "load_tiktoken_bpe", lambda url, expected_hash: asked.append((url, expected_hash))
    )
    openai_public.ENCODING_CONSTRUCTORS[encoding]()
    vocab = tk.vocab_file(encoding)
    assert asked == [(vocab.url, vocab.sha256)]
    assert vocab.url == f"https://openaipublic.blob.core.windows.net/encodings/{encoding}.tiktoken"
    assert vocab.cache_name == hashlib.sha1(vocab.url.encode()).hexdigest()  # noqa: S324 -- tiktoken's cache naming


@pytest.mark.parametrize(("encoding", "sha256"), [
    ("o200k_base", "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"),
    ("cl100k_base", "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"),
])
def test_bundled_vocab_is_the_genuine_file(encoding, sha256):
    assert tk.vocab_file(encoding).sha256 == sha256
    data = gzip.decompress(tk.vocab_file(encoding).bundled_path.read_bytes())
    assert hashlib.sha256(data).hexdigest() == sha256


def test_install_writes_verified_files_without_network(tmp_path, no_network):
    for name in tk.ENCODINGS:
        path = tk.install_vocab(name, tmp_path / "cache")
        assert path.name == tk.vocab_file(name).cache_name
        assert hashlib.sha256(path.read_bytes()).hexdigest() == tk.vocab_file(name).sha256
    assert {p.name for p in (tmp_path / "cache").iterdir()} == cache_names()  # no temporary left behind


def test_install_replaces_a_corrupt_file_and_keeps_a_good_one(tmp_path):
    vocab = tk.vocab_file("cl100k_base")
    target = tmp_path / vocab.cache_name
    target.write_bytes(b"truncated")
    tk.install_vocab("cl100k_base", tmp_path)
    assert hashlib.sha256(target.read_bytes()).hexdigest() == vocab.sha256
    before = target.stat().st_mtime_ns, target.stat().st_ino
    tk.install_vocab("cl100k_base", tmp_path)
    assert (target.stat().st_mtime_ns, target.stat().st_ino) == before


def test_install_refuses_a_bundled_file_that_is_not_genuine(tmp_path, monkeypatch):
    fake = tk.VocabFile("o200k_base", "https://example.invalid/o200k_base.tiktoken", "0" * 64)
    monkeypatch.setattr(tk, "vocab_file", lambda name: fake)
    with pytest.raises(RuntimeError, match="but tiktoken expects 0000"):
        tk.install_vocab("o200k_base", tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_concurrent_installs_from_threads(tmp_path, no_network):
    barrier = threading.Barrier(8)
    errors = []

    def install(name):
        try:
            barrier.wait()
            tk.install_vocab(name, tmp_path)
        except Exception as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=install, args=(tk.ENCODINGS[i % 2],)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert {p.name for p in tmp_path.iterdir()} == cache_names()
    for name in tk.ENCODINGS:
        data = (tmp_path / tk.vocab_file(name).cache_name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == tk.vocab_file(name).sha256


def test_cache_dir_defaults_under_tempdir_and_is_exported(tmp_path, monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "restored after the test")
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    assert tk.cache_dir() == tmp_path / "toolscope-tiktoken"
    assert os.environ["TIKTOKEN_CACHE_DIR"] == str(tmp_path / "toolscope-tiktoken")


def test_cache_dir_respects_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "mine"))
    assert tk.cache_dir() == tmp_path / "mine"
    assert os.environ["TIKTOKEN_CACHE_DIR"] == str(tmp_path / "mine")


def test_an_empty_cache_dir_is_refused(monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    with pytest.raises(RuntimeError, match="TIKTOKEN_CACHE_DIR is empty"):
        tk.cache_dir()


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
    assert report["downloads"] == [tk.vocab_file("o200k_base").url]


def test_offline_first_use_in_a_fresh_process(tmp_path):
    cache = tmp_path / "fresh"
    result = run_python(LOAD_BOTH, clean_env(TIKTOKEN_CACHE_DIR=str(cache)))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["counts"] == EXPECTED_COUNTS
    assert report["downloads"] == []
    assert report["cache"] == str(cache)
    assert set(report["files"]) == cache_names()


def test_offline_first_use_with_the_default_cache_dir(tmp_path):
    result = run_python(LOAD_BOTH, clean_env(TMPDIR=str(tmp_path)))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["counts"] == EXPECTED_COUNTS
    assert report["downloads"] == []
    assert report["cache"] == str(tmp_path / "toolscope-tiktoken")
    assert set(report["files"]) == cache_names()


def test_concurrent_first_use_from_threads_in_a_fresh_process(tmp_path):
    code = BLOCK_NETWORK + """
import threading
from toolscope import tokenizer as tk
barrier = threading.Barrier(8)
results, errors = [], []
def work(i):
    name = tk.ENCODINGS[i % 2]
    try:
        barrier.wait()
        results.append((name, tk.count_tokens("hello world <|endoftext|>", name), id(tk.encoding_for(name))))
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps({"results": sorted(results), "errors": errors, "downloads": downloads,
                  "files": sorted(os.listdir(os.environ["TIKTOKEN_CACHE_DIR"]))}))
"""
    result = run_python(code, clean_env(TIKTOKEN_CACHE_DIR=str(tmp_path / "fresh")))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["errors"] == [] and report["downloads"] == []
    assert len(report["results"]) == 8
    for name in tk.ENCODINGS:
        seen = {(count, ident) for n, count, ident in report["results"] if n == name}
        assert len(seen) == 1 and next(iter(seen))[0] == EXPECTED_COUNTS[name]  # one Encoding object
    assert set(report["files"]) == cache_names()


def test_concurrent_first_use_from_processes(tmp_path):
    env = clean_env(TIKTOKEN_CACHE_DIR=str(tmp_path / "shared"))
    processes = [
        subprocess.Popen([sys.executable, "-c", LOAD_BOTH], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    for process in processes:
        stdout, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr
        report = json.loads(stdout)
        assert report["counts"] == EXPECTED_COUNTS and report["downloads"] == []
    assert {p.name for p in (tmp_path / "shared").iterdir()} == cache_names()
