"""tool_search's optional semantic ranking on the server: the configured model, its identity, and
the fused search a policy with `tool_search.semantic` gets.

The model is the directory TOOL_SEARCH_MODEL names (a sentence-transformers model on local
disk, never downloaded), loaded once per process on first use. Its *identity* (directory name
and the first 12 hex digits of its weights' SHA-256) is frozen into a document published with
semantic search on, so a version ranks with the model it was published with: a server whose
configured model differs answers that version with the lexical ranking alone and says so
(`ranking`), rather than silently changing what the version finds.

Tool embeddings are kept per tool text in the process (SemanticRanker), so the first search
over a catalog embeds it (about 10 ms per tool on 2 cores) and later ones only the query.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Any

from django.conf import settings
from toolscope_agent.semantic import CONVEX_ALPHA, DEFAULT_FUSION, HybridIndex, SemanticRanker

WEIGHTS_FILE = "model.safetensors"


def semantic_model() -> SemanticRanker | None:
    """The configured model, loaded once per process; None when TOOL_SEARCH_MODEL is unset."""
    path = settings.TOOL_SEARCH_MODEL
    return _load(path) if path else None


def semantic_identity() -> str | None:
    """`<directory>@<12 hex of the weights' SHA-256>` of the configured model; None when unset."""
    path = settings.TOOL_SEARCH_MODEL
    return _identity(path) if path else None


def semantic_settings() -> dict[str, Any] | None:
    """What a document published now with semantic search on records: the model and the fusion."""
    identity = semantic_identity()
    return {"model": identity, "fusion": DEFAULT_FUSION, "alpha": CONVEX_ALPHA} if identity else None


def semantic_index(catalog: list[dict[str, Any]], semantic: Any, *, ranker: str,
                   history: dict[str, list[str]] | None) -> HybridIndex | None:
    """The fused index a document's `semantic` section asks for, or None when this server cannot
    rank as it was published (no model, or another one)."""
    if not isinstance(semantic, dict) or semantic.get("model") != semantic_identity():
        return None
    model = semantic_model()
    if model is None:
        return None
    fusion = semantic.get("fusion", DEFAULT_FUSION)
    alpha = semantic.get("alpha", CONVEX_ALPHA)
    return HybridIndex(catalog, model, ranker=ranker, history=history,
                       method=fusion if fusion in ("convex", "rrf") else DEFAULT_FUSION,
                       alpha=alpha if isinstance(alpha, (int, float)) and 0 <= alpha <= 1 else CONVEX_ALPHA)


@lru_cache(maxsize=2)
def _load(path: str) -> SemanticRanker:
    return SemanticRanker(path)


@lru_cache(maxsize=2)
def _identity(path: str) -> str:
    digest = hashlib.sha256()
    with open(Path(path) / WEIGHTS_FILE, "rb") as weights:
        for block in iter(lambda: weights.read(1 << 20), b""):
            digest.update(block)
    return f"{Path(path).resolve().name}@{digest.hexdigest()[:12]}"
