"""tool_search's optional semantic ranking on the server: the configured model, its identity, and
the fused search a policy with `tool_search.semantic` gets.

The model is the directory TOOL_SEARCH_MODEL names (a sentence-transformers model on local
disk, never downloaded), loaded once per process on first use. Its *identity* (directory name
and the first 12 hex digits of its weights' SHA-256) is frozen into a document published with
semantic search on, so a version ranks with the model it was published with: a server whose
configured model differs answers that version with the lexical ranking alone and says so
(`ranking`), rather than silently changing what the version finds.

Tool embeddings are computed once per definition and stored (services/embeddings.py: a worker
embeds a catalog when it changes); a process reads them on its first search over a catalog and
keeps them (SemanticRanker), so a search embeds only its query.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from django.conf import settings
from toolscope_agent.semantic import (
    CONVEX_ALPHA,
    DEFAULT_FUSION,
    HybridIndex,
    SemanticRanker,
    model_identity,
    text_key,
    vector_bytes,
    vector_from_bytes,
)

from toolscope.policies.models import ToolEmbedding

READ_CHUNK = 2000  # text hashes per lookup query


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


class StoredVectors:
    """A toolscope_agent.semantic.VectorStore over ToolEmbedding, for one model."""

    def __init__(self, model: str) -> None:
        self.model = model

    def load(self, texts: Sequence[str]) -> dict[str, Any]:
        keys = {text_key(text): text for text in texts}
        found: dict[str, Any] = {}
        hashes = list(keys)
        for start in range(0, len(hashes), READ_CHUNK):
            rows = ToolEmbedding.objects.filter(model=self.model, text_sha256__in=hashes[start:start + READ_CHUNK])
            for digest, vector in rows.values_list("text_sha256", "vector"):
                found[keys[digest]] = vector_from_bytes(bytes(vector))
        return found

    def save(self, vectors: Mapping[str, Any]) -> None:
        ToolEmbedding.objects.bulk_create(
            [ToolEmbedding(model=self.model, text_sha256=text_key(text), vector=vector_bytes(vector))
             for text, vector in vectors.items()],
            ignore_conflicts=True, batch_size=500)


@lru_cache(maxsize=2)
def _load(path: str) -> SemanticRanker:
    return SemanticRanker(path, store=StoredVectors(_identity(path)))


@lru_cache(maxsize=2)
def _identity(path: str) -> str:
    return model_identity(path)
