"""Tool embeddings computed once per definition and stored (issue 30, item 3).

tool_search's semantic side needs every catalog tool's embedding. Computing them in the web
process at the first search cost about 10 ms per tool (20 s for a 2,000-tool catalog, in a
request); here a worker embeds a project's definitions when its catalog changes
(`tool_embeddings_soon`, enqueued by catalog_upsert) and hourly for active projects (a sweep, in
case a message was lost), and stores them in ToolEmbedding keyed by model and text hash. The
server's SemanticRanker reads them through `StoredVectors`, so a search embeds only its query; a
definition no worker has embedded yet is embedded by the search that needs it, and stored.
`manage.py embed_tools` does the same for every project, with progress.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from toolscope_agent.semantic import text_key, tool_text

from toolscope.policies.models import Tool, ToolEmbedding
from toolscope.policies.services.semantic_search import READ_CHUNK, StoredVectors, semantic_identity, semantic_model
from toolscope.tasks import task_send

logger = logging.getLogger(__name__)

EMBED_TASK = "workers.tool_embeddings"
_CHUNK = 64  # texts embedded (and stored) at a time: progress, and a worker that dies keeps what it did


def catalog_texts(*, project_ids: Iterable[int]) -> list[str]:
    """The distinct texts the semantic side embeds for these projects' definitions (every source's)."""
    rows = Tool.objects.filter(project_id__in=list(project_ids)).values("name", "description", "input_schema")
    return list(dict.fromkeys(tool_text(row) for row in rows))


def texts_embed(texts: Sequence[str], *, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Embed and store those of `texts` the configured model has no stored vector for.
    {"model", "texts", "embedded"}; a server without a model embeds nothing."""
    model, identity = semantic_model(), semantic_identity()
    if model is None or identity is None:
        return {"model": None, "texts": len(texts), "embedded": 0}
    keys = {text_key(text): text for text in texts}
    have: set[str] = set()
    hashes = list(keys)
    for start in range(0, len(hashes), READ_CHUNK):
        have.update(ToolEmbedding.objects.filter(model=identity, text_sha256__in=hashes[start:start + READ_CHUNK])
                    .values_list("text_sha256", flat=True))
    missing = [text for digest, text in keys.items() if digest not in have]
    store = StoredVectors(identity)
    for start in range(0, len(missing), _CHUNK):
        chunk = missing[start:start + _CHUNK]
        store.save(dict(zip(chunk, model.embed(chunk), strict=True)))
        if progress is not None:
            progress(start + len(chunk), len(missing))
    return {"model": identity, "texts": len(texts), "embedded": len(missing)}


def project_embed(*, project_id: int) -> dict[str, Any]:
    """What the worker runs when a project's catalog changed."""
    return texts_embed(catalog_texts(project_ids=[project_id]))


def active_embed(*, days: int = 1) -> int:
    """The hourly sweep: embed what projects whose tools were seen in the last `days` lack.
    Returns the number of texts embedded."""
    since = timezone.now() - timedelta(days=days)
    projects = Tool.objects.filter(last_seen_at__gte=since).values_list("project_id", flat=True).distinct()
    return sum(project_embed(project_id=project_id)["embedded"] for project_id in projects)


def tool_embeddings_soon(*, project_id: int) -> None:
    """After this transaction commits, ask a background worker to embed the project's new
    definitions; nothing when the server has no model. A broker outage is logged: the hourly
    sweep, or the first search, embeds them."""
    if not settings.TOOL_SEARCH_MODEL:
        return

    def send() -> None:
        try:
            task_send(EMBED_TASK, project_id, queue=settings.SIMULATION_QUEUE)
        except Exception:
            logger.warning("could not enqueue tool embeddings of project %s; the sweep will", project_id,
                           exc_info=True)

    transaction.on_commit(send, robust=True)
