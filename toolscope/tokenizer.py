"""Exact BPE token counts (tiktoken), without any network access.

tiktoken downloads an encoding's vocabulary on first use and caches it in `TIKTOKEN_CACHE_DIR`
under the sha1 of the download URL, checking its sha256. The `bpe-openai` package ships the
genuine o200k_base and cl100k_base files, gzip'ed. On first use of an encoding this module puts
the decompressed file where tiktoken looks for it, after checking its sha256 against the hash
tiktoken expects, so tiktoken finds it cached and never downloads:

- the cache directory is `TIKTOKEN_CACHE_DIR` when set; otherwise `<tempdir>/toolscope-tiktoken`,
  and `TIKTOKEN_CACHE_DIR` is then set to it for this process (an empty `TIKTOKEN_CACHE_DIR`
  turns tiktoken's cache off, which would make it download: that is refused);
- the download URL and expected hash of each encoding are read from tiktoken's own definition
  (`tiktoken_ext.openai_public`), so the file name and hash follow the installed tiktoken;
- files are written to a temporary name in the same directory and renamed into place, so
  concurrent threads and processes never see a partial file; a file with the wrong content is
  replaced.

Text is encoded as ordinary text: a tool output containing `<|endoftext|>` counts the tokens of
those characters and never raises. What a tool definition's cost counts is documented in
`toolscope_agent.engine.tokens`.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import gzip
import hashlib
import importlib.util
import inspect
import os
import tempfile
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tiktoken
from toolscope_agent.engine.tokens import FLAVORS, render_tool

ENCODINGS = ("o200k_base", "cl100k_base")
DEFAULT_CACHE_DIR_NAME = "toolscope-tiktoken"
SCHEMA_CACHE_SIZE = 8192



@dataclass(frozen=True)
class VocabFile:
    """Where tiktoken fetches an encoding's vocabulary from, and what it must hash to."""

    encoding: str
    url: str
    sha256: str

    @property
    def cache_name(self) -> str:
        """The file name tiktoken's cache uses for it (`tiktoken.load.read_file_cached`)."""
        return hashlib.sha1(self.url.encode()).hexdigest()  # noqa: S324 -- tiktoken's naming, not security

    @property
    def bundled_path(self) -> Path:
        """The gzip'ed copy shipped by bpe-openai."""
        return _bpe_openai_data_dir() / f"{self.encoding}.tiktoken.gz"


def _check_encoding(name: str) -> None:
    if name not in ENCODINGS:
        raise ValueError(f"unknown encoding {name!r}; allowed: {', '.join(ENCODINGS)}")


@functools.cache
def vocab_file(encoding: str) -> VocabFile:
    """The URL and sha256 tiktoken uses for `encoding`, read from `tiktoken_ext.openai_public`.

    The module is parsed, not run: running the constructor is what downloads.
    """
    _check_encoding(encoding)
    from tiktoken_ext import openai_public

    tree = ast.parse(inspect.getsource(openai_public))
    for node in tree.body:
        if not (isinstance(node, ast.FunctionDef) and node.name == encoding):
            continue
        for call in ast.walk(node):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
                continue
            if call.func.id != "load_tiktoken_bpe" or not call.args:
                continue
            url = call.args[0]
            digest = next((kw.value for kw in call.keywords if kw.arg == "expected_hash"), None)
            if (
                isinstance(url, ast.Constant) and isinstance(url.value, str)
                and isinstance(digest, ast.Constant) and isinstance(digest.value, str)
            ):
                return VocabFile(encoding, url.value, digest.value)
    raise RuntimeError(
        f"tiktoken {tiktoken.__version__}: no load_tiktoken_bpe(<url>, expected_hash=<sha256>) call found in "
        f"tiktoken_ext.openai_public.{encoding}(); toolscope/tokenizer.py needs updating for this tiktoken"
    )


@functools.cache
def _bpe_openai_data_dir() -> Path:
    # find_spec on the top-level package locates it without importing it (and its native library).
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the bpe-openai package, which ships the vocabulary files, is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def cache_dir() -> Path:
    """The directory tiktoken reads its cache from: `TIKTOKEN_CACHE_DIR`, else toolscope's default.

    Sets `TIKTOKEN_CACHE_DIR` to the default when it is not set, so that tiktoken reads there.
    """
    configured = os.environ.get("TIKTOKEN_CACHE_DIR")
    if configured is None:
        default = os.path.join(tempfile.gettempdir(), DEFAULT_CACHE_DIR_NAME)
        configured = os.environ.setdefault("TIKTOKEN_CACHE_DIR", default)
    if not configured:
        raise RuntimeError(
            "TIKTOKEN_CACHE_DIR is empty, which turns tiktoken's cache off and makes it download its "
            "vocabulary; unset it or point it at a writable directory"
        )
    return Path(configured)


def _sha256_of_file(path: Path) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except FileNotFoundError:
        return None


def install_vocab(encoding: str, directory: Path | None = None) -> Path:
    """Put `encoding`'s vocabulary in tiktoken's cache (unless it is there already); its path.

    Raises RuntimeError if the bundled copy does not hash to what tiktoken expects.
    """
    vocab = vocab_file(encoding)
    directory = cache_dir() if directory is None else directory
    target = directory / vocab.cache_name
    if _sha256_of_file(target) == vocab.sha256:
        return target

    data = gzip.decompress(vocab.bundled_path.read_bytes())
    actual = hashlib.sha256(data).hexdigest()
    if actual != vocab.sha256:
        raise RuntimeError(
            f"{vocab.bundled_path} decompresses to sha256 {actual}, but tiktoken expects {vocab.sha256} "
            f"for {vocab.url}"
        )
    directory.mkdir(parents=True, exist_ok=True)
    temporary = directory / f".{vocab.cache_name}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
    try:
        with open(temporary, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
    return target


_encodings: dict[str, tiktoken.Encoding] = {}
_encodings_lock = threading.Lock()


def encoding_for(name: str) -> tiktoken.Encoding:
    """The tiktoken encoding `name` (one of ENCODINGS), loaded offline once per process."""
    encoding = _encodings.get(name)
    if encoding is not None:
        return encoding
    _check_encoding(name)
    with _encodings_lock:
        encoding = _encodings.get(name)
        if encoding is None:
            install_vocab(name)
            encoding = tiktoken.get_encoding(name)
            _encodings[name] = encoding
    return encoding


def _rust_counter(encoding: str) -> Callable[[str], int] | None:
    """bpe-openai's Rust counter for the same vocabulary, or None when it cannot be loaded.

    tiktoken counts 8-14 MB/s here; the Rust counter (same vocabulary file, same pre-tokenisation)
    30-70% faster and without building the token list. It is a private binding of a pinned
    package, so tests/tokens compare it with tiktoken over a corpus and random text; tiktoken
    stays the reference and the fallback.
    """
    try:
        from bpe_openai import _bindings

        return _bindings.tokenizer_for_encoding(encoding).count
    except Exception:  # an upgrade that moved the binding: counting still works, slower
        return None


@functools.cache
def counter(encoding: str) -> Callable[[str], int]:
    """A TokenCounter for `encoding` (loaded now, so an unknown name fails here)."""
    encode = encoding_for(encoding).encode_ordinary
    fast = _rust_counter(encoding)

    def count(text: str) -> int:
        if fast is not None:
            try:
                return fast(text)
            except (UnicodeError, ValueError):  # lone surrogates: tiktoken replaces them
                pass
        return len(encode(text))

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
