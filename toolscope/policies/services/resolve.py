"""What an agent should send: the server side of the engine, for `POST /api/v1/policy/resolve`
and `POST /api/v1/tools/search`. The same engine functions run in the SDK's ToolSelector, so the
answers are identical for the same catalog, policy, state and message."""

from __future__ import annotations

import base64
import json
from typing import Any

from toolscope_agent.engine.bytecache import ByteLRU
from toolscope_agent.engine.render import render, selection_cost
from toolscope_agent.engine.search import DEFAULT_RANKER, confident, ranker_for, search_tools, searchable
from toolscope_agent.engine.selection import SessionState, search_tool_added, select_tools
from toolscope_agent.semantic import text_key, tool_text, vector_bytes

from toolscope.policies.selectors import (
    policy_label_served,
    policy_label_version,
    tool_catalog,
    tool_catalog_revision,
)
from toolscope.policies.services.semantic_search import semantic_identity, semantic_index, semantic_model
from toolscope.telemetry.models import Project
from toolscope.tokenizer import counter

# Longest task message /policy/resolve takes (characters). Rules match it with RE2 in linear
# time, so this bounds a request's matching work, not its correctness; a longer message is a 400.
MAX_MESSAGE_LENGTH = 100_000
# Longest query /tools/search takes. Ranking costs one postings walk per distinct query term, so
# this bounds a request's work; the SDK itself reads every word of any query.
MAX_QUERY_LENGTH = 4000


class PolicyNotPublished(LookupError):
    pass


def policy_document_for_label(*, project: Project, label: str) -> dict[str, Any]:
    version = policy_label_version(project_id=project.pk, name=label)
    if version is None:
        raise PolicyNotPublished(f"No policy version carries the label {label!r} in this project.")
    return {**version.document, "label": label, "version": version.number, "etag": version.etag}


def policy_resolve(
    *, project: Project, label: str, message: str, state: dict[str, Any] | None, output_format: str,
    advertised: list[dict[str, Any]] | None = None, source: str | None = None,
) -> dict[str, Any]:
    """The tools to send for `message`, rendered in `output_format`, and what they cost against
    sending every allowed tool. Of a name several sources define, the definition rendered is the
    one the agent advertises (`advertised`, `source`; selectors.tool_catalog). A searching policy
    (`tool_search` mode, or `tool_search` always on) over a catalog without a `tool_search` tool
    gets toolscope's, as the SDK's selector adds it (its calls are answered by `tools_search`);
    what sending everything costs leaves it out. The state returned has noted `message` as the
    session's task."""
    document = policy_document_for_label(project=project, label=label)
    catalog = tool_catalog(project=project, advertised=advertised, source=source)
    session = SessionState.from_dict(state)
    selection = select_tools(search_tool_added(catalog, document), document, session, message)
    # The state handed back remembers the task (a later rule_window) and, kept lists, what was sent.
    session.note_request(message, selection)
    everything = select_tools(catalog, {"selection": {"mode": "all", **_allowed(document)}}, SessionState(), "")
    flavor = "anthropic" if output_format == "anthropic" else "openai"
    count = counter(project.encoding)
    selected, total = selection_cost(selection, count, flavor), selection_cost(everything, count, flavor)
    return {
        "label": label,
        "version": document["version"],
        "mode": selection.mode,
        "tools": render(selection, output_format, document),
        "menu": selection.menu,
        "reasons": selection.reasons,
        "state": session.to_dict(),
        "tokens": {"selected": selected, "all": total, "saved": total - selected},
    }


def _allowed(document: dict[str, Any]) -> dict[str, Any]:
    allowed = document.get("selection", {}).get("allowed")
    return {} if allowed is None else {"allowed": allowed}



def tools_search(*, project: Project, query: str, top_k: int, label: str = "production") -> dict[str, Any]:
    """The catalog ranked as an agent applying `label`'s version ranks it: its ranker, the
    project's learned history when the version turns it on, and the semantic fusion when it
    turns that on and this server has the model it was published with. With no such version:
    the default ranker alone. `ranking` names what ranked."""
    ranker, learned, semantic = DEFAULT_RANKER, None, None
    served = policy_label_served(project_id=project.pk, name=label)
    if served is not None:
        version, history = served
        settings = version.document.get("selection", {}).get("tool_search")
        settings = settings if isinstance(settings, dict) else {}
        ranker, semantic = ranker_for(settings), settings.get("semantic")
        learned = history if history is not None and settings.get("learned") else None
    searchable_now = _searchable(project, learned)
    catalog, history_tools = searchable_now.catalog, searchable_now.history
    fused = searchable_now.fused(semantic, ranker) if semantic else None
    hits = (fused.search(query, top_k) if fused is not None
            else search_tools(catalog, query, top_k, ranker=ranker, history=history_tools))
    return {
        "ranking": f"{ranker}+semantic" if fused is not None else ranker,
        "confident": confident(hits),
        "results": [{"name": hit.name, "score": round(hit.score, 4), "summary": hit.summary,
                     "parameters": hit.parameters, "matched": hit.matched} for hit in hits],
    }


def tools_embeddings(*, project: Project, label: str = "production") -> dict[str, Any]:
    """The stored embeddings of the project's catalog for an agent that ranks `label`'s version
    by meaning itself (the SDK's selector with a local copy of the model): {"model", "dimension",
    "vectors": {SHA-256 of the embedded text: base64 float32}}. "model" is None (and nothing is
    served) unless the version turns semantic search on with the model this server has. Texts not
    embedded yet are embedded here, once (services/embeddings.py)."""
    served = policy_label_served(project_id=project.pk, name=label)
    settings = served[0].document.get("selection", {}).get("tool_search") if served is not None else None
    semantic = settings.get("semantic") if isinstance(settings, dict) else None
    identity, model = semantic_identity(), semantic_model()
    if not isinstance(semantic, dict) or semantic.get("model") != identity or model is None or identity is None:
        return {"model": None, "dimension": 0, "vectors": {}}
    texts = [tool_text(tool) for tool in searchable(tool_catalog(project=project))]
    vectors = model.tool_embeddings(texts)
    return {"model": identity, "dimension": model.dimension,
            "vectors": {text_key(text): base64.b64encode(vector_bytes(vector)).decode()
                        for text, vector in zip(texts, vectors, strict=True)}}


class _Searchable:
    """A project's catalog as searches rank it (never tool_search itself), with the learned
    history it was read with and the fused indexes built over it, kept per process while the
    catalog is unchanged (selectors.tool_catalog_revision): a search at 2,000 tools no longer
    reads and parses every definition, nor builds its indexes, each time."""

    def __init__(self, catalog: list[dict[str, Any]], history: dict[str, list[str]] | None) -> None:
        self.catalog, self.history = catalog, history
        self.indexes: dict[tuple[Any, ...], Any] = {}

    def fused(self, semantic: Any, ranker: str) -> Any:
        key = (json.dumps(semantic, sort_keys=True, default=str), ranker)
        if key not in self.indexes:
            self.indexes[key] = semantic_index(self.catalog, semantic, ranker=ranker, history=self.history)
        return self.indexes[key]


def _searchable_bytes(key: Any, value: _Searchable) -> int:
    """Estimated: a definition as parsed, about 2 kB; a fused index's vectors, 1.6 kB a tool."""
    return len(value.catalog) * (2000 + 1600 * max(1, len(value.indexes)))


_SEARCHABLE: ByteLRU[tuple[Any, ...], _Searchable] = ByteLRU(128 * 1024 * 1024, sizeof=_searchable_bytes)


def _searchable(project: Project, learned: Any) -> _Searchable:
    key = (project.pk, tool_catalog_revision(project=project), learned.revision if learned is not None else None)
    found = _SEARCHABLE.get(key)
    if found is None:
        found = _SEARCHABLE.put(key, _Searchable(searchable(tool_catalog(project=project)),
                                                 learned.tools if learned is not None else None))
    return found
