"""toolscope's `tool_search`: rank a catalog's tools against a query, repeatably.

No model call: a lexical ranking over each tool's name, description and parameters (and, when the
policy ships one, the project's learned history), so the agent executing a `tool_search` call and
the server simulating a policy rank alike. The ranking is versioned: a policy document names its
ranker in `selection.tool_search.ranker`, and a document without one was published before
versions existed and keeps the ranking it had.

=========  ==========================  ================================================
version    module                      what
=========  ==========================  ================================================
bm25f-2    engine/ranking.py           BM25F over name, description, parameters and
                                       history, Snowball stems; the default
fuzzy-1    engine/ranking_fuzzy.py     the first ranking (character-bigram similarity);
                                       frozen, for documents published with it
=========  ==========================  ================================================

An unknown version (a document from a newer server) ranks with the default: the agent still gets
results, and `ranker_for` says which ranking it used.

Never an empty answer: an agent that gets nothing back cannot recover, so a search answers its
`top_k` whatever the scores. When fewer tools than that match the query's words, the rest are
the nearest by spelling (the character-bigram ranking of fuzzy-1, which forgives typos and word
fragments), then the catalog's order; those hits have `matched` False, score 0, and come after
every matching one, so what a version found before is still found, in the same order. An answer
none of whose hits matched is a low-confidence one (`confident`), and the text an agent reads
says so.

Speed: an index is built once per catalog content, history and ranker; `search_tools` keeps the
last few (up to 64 MB of indexes and the catalogs they hold), keyed by the (name, description)
pairs, a digest of the history (computed once per history object) and the ranker.
"""

from __future__ import annotations

import hashlib
import heapq
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Protocol

from toolscope_agent.engine import ranking, ranking_fuzzy
from toolscope_agent.engine.bytecache import ByteDict, ByteLRU
from toolscope_agent.engine.render import SEARCH_TOOL_NAME, first_sentence

DEFAULT_TOP_K = 8
MAX_TOP_K = 20
DEFAULT_RANKER = ranking.VERSION
LEGACY_RANKER = ranking_fuzzy.VERSION
# Bounded by bytes (engine/bytecache.py): an index holds its catalog, a history key its history.
_INDEX_CACHE_BYTES = 64 * 1024 * 1024
_HISTORY_CACHE_BYTES = 8 * 1024 * 1024
_ENUM_SHOWN = 8


class _Ranker(Protocol):
    @property
    def positions(self) -> list[int]: ...

    @property
    def names(self) -> list[str]: ...

    def scores(self, query: str) -> dict[int, float]: ...


RANKERS: dict[str, Any] = {ranking.VERSION: ranking.Bm25fIndex, ranking_fuzzy.VERSION: ranking_fuzzy.FuzzyIndex}


@dataclass(frozen=True)
class SearchHit:
    """One ranked tool: `summary` is the line a tool_search result shows the model."""

    name: str
    score: float
    summary: str
    parameters: str
    # False when the query did not match this tool (a nearest-by-spelling filler; see the module docstring).
    matched: bool = True


def confident(hits: Sequence[SearchHit]) -> bool:
    """Whether an answer holds at least one tool the query matched (an empty one does not)."""
    return any(hit.matched for hit in hits)


LOW_CONFIDENCE = "No tool matched that closely; the nearest are:"


def answer_text(hits: Sequence[SearchHit], found: str = "Tools found:") -> str:
    """What a tool_search call answers the model: its hits' summary lines under `found`, or under
    LOW_CONFIDENCE when none of them matched."""
    heading = found if confident(hits) else LOW_CONFIDENCE
    return heading + "\n" + "\n".join(hit.summary for hit in hits) if hits else "The catalog has no tools."


def ranker_for(settings: Any) -> str:
    """The ranker a policy's `selection.tool_search` section asks for: its `ranker` when known,
    the legacy ranking when the section predates versions (no `ranker`), else the default."""
    if not isinstance(settings, Mapping):
        return DEFAULT_RANKER
    if "ranker" not in settings:
        return LEGACY_RANKER
    version = settings["ranker"]
    return version if isinstance(version, str) and version in RANKERS else DEFAULT_RANKER


class SearchIndex:
    """A catalog prepared for repeated searches with one ranker (see the module docstring).

    Of several entries with one name the first counts; entries without a string name are
    skipped. `history` maps tool names to the texts that led the project's agents to them.
    """

    def __init__(self, catalog: Sequence[Mapping[str, Any]], *, ranker: str = DEFAULT_RANKER,
                 history: Mapping[str, Sequence[str]] | None = None) -> None:
        if ranker not in RANKERS:
            raise ValueError(f"unknown ranker {ranker!r}; known: {', '.join(sorted(RANKERS))}")
        self.catalog = catalog
        self.ranker = ranker
        entries, seen = [], set()
        for position, tool in enumerate(catalog):
            name = tool.get("name") if isinstance(tool, Mapping) else None
            if isinstance(name, str) and name and name not in seen:
                seen.add(name)
                entries.append((position, name, tool))
        self._entries = entries
        self._index: _Ranker = RANKERS[ranker](entries, history)
        self._spelling: _Ranker | None = None  # built on the first answer that needs fillers

    def rank(self, query: str, top_k: int = DEFAULT_TOP_K, *, max_top_k: int = MAX_TOP_K) -> list[tuple[float, int]]:
        """(score, catalog position) of the best tools, best first, always `top_k` of them (or the
        whole catalog) for a query that is not blank: tools the query did not match fill the rest
        with score 0 (`fillers`); [] for a blank query."""
        if not query or not query.strip():
            return []
        limit = clamp_top_k(top_k, max_top_k)
        ranked = self.ranked(query, limit)
        return ranked + self.fillers(query, ranked, limit) if len(ranked) < limit else ranked

    def ranked(self, query: str, limit: int) -> list[tuple[float, int]]:
        """`rank` without the 1..20 clamp: the best `limit` tools (for a fusion that reads deeper)."""
        if not query or not query.strip():
            return []
        index = self._index
        ranked = heapq.nsmallest(max(0, limit), ((-round(score, 4), index.names[tool], tool)
                                                 for tool, score in index.scores(query).items()))
        return [(-negative, index.positions[tool]) for negative, _, tool in ranked]

    def fillers(self, query: str, ranked: Sequence[tuple[float, int]], limit: int) -> list[tuple[float, int]]:
        """(0.0, position) of the tools `ranked` lacks, up to `limit` in all: the nearest to the
        query by spelling first, then in catalog order."""
        taken = {position for _, position in ranked}
        wanted = limit - len(ranked)
        if wanted <= 0 or len(taken) >= len(self._entries):
            return []
        spelling: _Ranker = self._spelling or self._spelling_index()
        near = sorted(spelling.scores(query).items(), key=lambda item: (-round(item[1], 4), spelling.names[item[0]]))
        order = [spelling.positions[tool] for tool, _ in near] + [position for position, _, _ in self._entries]
        out: list[tuple[float, int]] = []
        for position in order:
            if position not in taken:
                taken.add(position)
                out.append((0.0, position))
                if len(out) == wanted:
                    break
        return out

    def _spelling_index(self) -> _Ranker:
        spelling: _Ranker = (self._index if self.ranker == ranking_fuzzy.VERSION
                             else ranking_fuzzy.FuzzyIndex(self._entries, None))
        self._spelling = spelling
        return spelling

    def search(self, query: str, top_k: int = DEFAULT_TOP_K, *, max_top_k: int = MAX_TOP_K) -> list[SearchHit]:
        """The best tools of this index's catalog for `query` (see `search_tools`)."""
        return search_hits(self.catalog, self.rank(query, top_k, max_top_k=max_top_k))


def search_hits(catalog: Sequence[Mapping[str, Any]], ranked: list[tuple[float, int]],
                matched: Any = None) -> list[SearchHit]:
    """The hits of a ranking of (score, catalog position): name, score, summary line, parameters.
    A hit is `matched` when its position is in `matched`, or, without it, when it scored above 0."""
    hits = []
    for score, position in ranked:
        tool = catalog[position]
        name = tool["name"]
        description = tool.get("description")
        parameters = parameter_summary(tool.get("input_schema"))
        sentence = first_sentence(description if isinstance(description, str) else "")
        summary = f"{name} — {sentence} — {parameters}" if sentence else f"{name} — {parameters}"
        hits.append(SearchHit(name=name, score=score, summary=summary, parameters=parameters,
                              matched=score > 0 if matched is None else position in matched))
    return hits


def clamp_top_k(top_k: Any, max_top_k: Any = MAX_TOP_K) -> int:
    """top_k as an int in 1..max_top_k, max_top_k itself in 1..20; junk reads as the default.

    top_k usually comes from the model's tool_search arguments, so "5" or 5.0 must work too.
    """
    ceiling = max(1, min(_as_int(max_top_k, MAX_TOP_K), MAX_TOP_K))
    return max(1, min(_as_int(top_k, DEFAULT_TOP_K), ceiling))


def _as_int(value: Any, default: int) -> int:
    if isinstance(value, bool):
        return default
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return default


_INDEXES: ByteLRU[tuple[Any, ...], SearchIndex] = ByteLRU(_INDEX_CACHE_BYTES)
_GET_NAME = itemgetter("name")
_GET_DESCRIPTION = itemgetter("description")


def search_index(catalog: Sequence[Mapping[str, Any]], ranker: str = DEFAULT_RANKER,
                 history: Mapping[str, Sequence[str]] | None = None) -> SearchIndex:
    """A cached index for this catalog's content, history and ranker.

    Keyed by the names and descriptions themselves (C-level passes, no Python call per tool),
    so a rebuilt or mutated catalog gets a fresh index and an equal one reuses the cached one.
    A catalog with missing or unhashable names/descriptions is keyed by their cleaned forms.
    Parameters are not in the key: an agent's catalog changes a schema only with its name or
    description far more often than alone, and `SearchIndex` is there for exact control.
    """
    try:
        content: tuple[Any, ...] = (tuple(map(_GET_NAME, catalog)), tuple(map(_GET_DESCRIPTION, catalog)))
        key = (ranker, _history_key(history), *content)
        index = _INDEXES.get(key)
    except (KeyError, TypeError, IndexError):
        pairs = [_name_and_description(tool) for tool in catalog]
        key = (ranker, _history_key(history), tuple(name for name, _ in pairs), tuple(text for _, text in pairs))
        index = _INDEXES.get(key)
    if index is None:
        index = _INDEXES.put(key, SearchIndex(catalog, ranker=ranker, history=history), _index_bytes(key))
    return index


def _index_bytes(key: tuple[Any, ...]) -> int:
    """An index's weight in the cache, estimated without walking it (that cost more than building
    a small catalog's index): its key's texts twice (the key, the catalog it holds) and 1.5 kB of
    postings and schema per tool; tests/engine/test_bytecache.py measures it against tracemalloc."""
    names, descriptions = key[-2], key[-1]
    texts = sum(len(text) for text in (*names, *descriptions) if isinstance(text, str))
    return 2 * (texts + 120 * len(names)) + 1500 * len(names) + len(key[1])


_HISTORY_KEYS: ByteDict[int, tuple[Any, str]] = ByteDict(_HISTORY_CACHE_BYTES)


def _history_key(history: Mapping[str, Sequence[str]] | None) -> str:
    """A digest of the history's texts, computed once per history object: a served history is
    up to 256,000 characters, and keying each search by the texts themselves cost more than the
    search. A history is read, never changed in place (a new document brings a new one)."""
    if not history:
        return ""
    cached = _HISTORY_KEYS.get(id(history))
    if cached is not None and cached[0] is history:
        return cached[1]
    texts = [(name, list(texts) if isinstance(texts, (list, tuple)) else []) for name, texts in history.items()]
    serialized = json.dumps(texts, ensure_ascii=False, default=str)
    digest = hashlib.sha256(serialized.encode()).hexdigest()
    _HISTORY_KEYS.add(id(history), (history, digest), 2 * len(serialized) + 1000)
    return digest


def _name_and_description(tool: Any) -> tuple[Any, Any]:
    if not isinstance(tool, Mapping):
        return None, None
    name, description = tool.get("name"), tool.get("description")
    return (name if isinstance(name, str) else None, description if isinstance(description, str) else None)


def searchable(catalog: Sequence[Mapping[str, Any]]) -> Sequence[Mapping[str, Any]]:
    """The index a search ranks: `catalog` without the search tool itself (a search never
    answers with `tool_search`, whether the agent's own or toolscope's). `search_tools` applies it,
    so the SDK, `POST /api/v1/tools/search` and the simulator rank the same tools for a catalog
    with or without one; the catalog itself when it has none (no copy)."""
    try:
        present = SEARCH_TOOL_NAME in map(_GET_NAME, catalog)
    except (KeyError, TypeError, IndexError):
        present = any(_name_and_description(tool)[0] == SEARCH_TOOL_NAME for tool in catalog)
    if not present:
        return catalog
    return [tool for tool in catalog if _name_and_description(tool)[0] != SEARCH_TOOL_NAME]


def search_tools(catalog: Sequence[Mapping[str, Any]], query: str, top_k: int = DEFAULT_TOP_K, *,
                 max_top_k: int = MAX_TOP_K, ranker: str = DEFAULT_RANKER,
                 history: Mapping[str, Sequence[str]] | None = None) -> list[SearchHit]:
    """`top_k` (clamped to 1..max_top_k, max_top_k to 1..20) tools of `catalog` for `query`, best
    first (score descending, then name), fewer only when the catalog is smaller; those the query
    did not match come last, `matched` False (the module docstring); [] for a blank query.
    `tool_search` itself is never ranked (`searchable`).

    Hits come from this catalog's own entries (their schemas, for the parameter summary), even
    when the ranking reuses a cached index built from an equal catalog.
    """
    if not query or not query.strip():
        return []
    catalog = searchable(catalog)
    return search_hits(catalog, search_index(catalog, ranker, history).rank(query, top_k, max_top_k=max_top_k))


def parameter_summary(input_schema: Any) -> str:
    """A JSON Schema's top-level parameters on one line: `{path: string, offset?: integer}`.

    Required parameters are plain, optional ones end in `?`; an enum reads `a|b` (at most 8
    values, then `|…`), a const its value, a type list or anyOf/oneOf its alternatives joined
    by `|`, an array `<item type>[]`, a nested object `object`, anything untyped `any`.
    Properties keep the schema's order. No properties (or no schema) gives `{}`.
    """
    if not isinstance(input_schema, Mapping):
        return "{}"
    properties = input_schema.get("properties")
    if not isinstance(properties, Mapping):
        return "{}"
    required = input_schema.get("required")
    required_names = {name for name in required if isinstance(name, str)} if isinstance(required, list) else set()
    parts = [f"{name}{'' if name in required_names else '?'}: {_type_label(schema)}"
             for name, schema in properties.items()]
    return "{" + ", ".join(parts) + "}"


def _literal(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _type_label(schema: Any, depth: int = 0) -> str:
    if not isinstance(schema, Mapping) or depth > 4:
        return "any"
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        shown = "|".join(_literal(value) for value in enum[:_ENUM_SHOWN])
        return shown + ("|…" if len(enum) > _ENUM_SHOWN else "")
    if "const" in schema:
        return _literal(schema["const"])
    kind = schema.get("type")
    if isinstance(kind, str):
        return _single_type(kind, schema, depth)
    if isinstance(kind, list) and kind:
        return "|".join(dict.fromkeys(_single_type(k, schema, depth) for k in kind if isinstance(k, str))) or "any"
    for combinator in ("anyOf", "oneOf"):
        variants = schema.get(combinator)
        if isinstance(variants, list) and variants:
            return "|".join(dict.fromkeys(_type_label(variant, depth + 1) for variant in variants))
    if "properties" in schema:
        return "object"
    if "items" in schema:
        return _single_type("array", schema, depth)
    return "any"


def _single_type(kind: str, schema: Mapping[str, Any], depth: int) -> str:
    if kind != "array":
        return kind
    inner = _type_label(schema.get("items"), depth + 1)
    return f"({inner})[]" if "|" in inner else f"{inner}[]"
