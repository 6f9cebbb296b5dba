"""toolscope's `tool_search`: rank a catalog's tools against a short query, cheaply and repeatably.

No embeddings and no model call: string similarity over names and descriptions, so the agent
(executing a `tool_search` call) and the server (simulating a policy) rank alike.

Scoring. The query and each tool are normalised first: lowercased; the query's *key* and a
name's key are their letters and digits only ("git diff" and "git_diff" both key "gitdiff");
*words* are runs of letters and digits of two or more characters, minus a short list of English
stopwords. A tool's score is the sum of:

====================  ======  =============================================================
component             weight  fires when
====================  ======  =============================================================
exact name            10      query key == name key
name containment      4       one key contains the other (the contained one >= 3 characters)
name words            2 x f   f = share of query words found inside the name key
name similarity       3 x D   D = Sørensen-Dice of the character-bigram sets of the two keys
description phrase    1.5     the whole query (>= 3 characters) occurs in the description
                              (both lowercased, whitespace collapsed)
description words     2 x m   m = mean over query words of the best Dice between that word and
                              a description word, counting only Dice >= 0.5 (typos, plurals
                              and inflections still count; unrelated words sharing a bigram
                              do not)
====================  ======  =============================================================

So an exact name outranks everything, a name hit usually outranks a description hit, and a
description holding at least half the query's words (or close variants) finds a tool whose
name says nothing, as MCP tool names often do. Hits
scoring below MIN_SCORE (1.0) are dropped: search results are loaded into the session, and
every noise hit would cost its full schema on every later turn. Scores are rounded to 4
decimals and ranked by score descending, then name ascending, so ties never depend on
catalog order or platform.

Speed: `SearchIndex` holds each tool's normalised forms and an inverted index from character
bigrams to description words, built once per catalog content; `search_tools` keeps the last
few indexes, keyed by the (name, description) pairs themselves.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from typing import Any

from toolscope_agent.engine.render import first_sentence

DEFAULT_TOP_K = 8
MAX_TOP_K = 20
MIN_SCORE = 1.0
FUZZY_WORD_MIN = 0.5
_MAX_QUERY_WORDS = 12
_INDEX_CACHE_LIMIT = 8
_ENUM_SHOWN = 8
_WORD = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset({"a", "an", "and", "are", "as", "at", "be", "by", "can", "for", "from", "in", "into", "is",
                        "it", "of", "on", "or", "that", "the", "this", "to", "use", "with"})


@dataclass(frozen=True)
class SearchHit:
    """One ranked tool: `summary` is the line a tool_search result shows the model."""

    name: str
    score: float
    summary: str
    parameters: str


def _key(text: str) -> str:
    return "".join(_WORD.findall(text.lower()))


def _bigrams(text: str) -> frozenset[str]:
    return frozenset(text[i:i + 2] for i in range(len(text) - 1))


def _dice(a: frozenset[str], b: frozenset[str]) -> float:
    return 2.0 * len(a & b) / (len(a) + len(b)) if a and b else 0.0


def _words(text: str) -> list[str]:
    return [word for word in dict.fromkeys(_WORD.findall(text.lower())) if len(word) >= 2 and word not in _STOPWORDS]


class SearchIndex:
    """A catalog prepared for repeated searches (see the module docstring for the scoring).

    Ranking touches only candidate tools: those sharing a bigram with the query's key (found
    through a bigram -> tools index), those with a fuzzy description-word hit (a bigram ->
    description words index), and those whose description contains the query (one `str.find`
    scan over all descriptions joined). Every other tool scores below MIN_SCORE by
    construction, so skipping it changes nothing.
    """

    def __init__(self, catalog: Sequence[Mapping[str, Any]]) -> None:
        self.catalog = catalog
        self._names: list[str] = []
        self._keys: list[str] = []
        self._gram_counts: list[int] = []
        self._positions: list[int] = []  # tool id -> index into catalog
        self._by_key: dict[str, list[int]] = {}
        self._name_grams: dict[str, list[int]] = {}  # bigram -> tool ids whose name key has it
        self._vocabulary: dict[str, int] = {}
        self._postings: list[list[int]] = []  # description word id -> tool ids using it
        self._word_gram_counts: list[int] = []
        self._word_grams: dict[str, list[int]] = {}  # bigram -> description word ids
        descriptions: list[str] = []
        seen: set[str] = set()
        for position, tool in enumerate(catalog):
            name, description = _name_and_description(tool)
            if name is None or name in seen:
                continue
            seen.add(name)
            self._add(position, name, description)
            descriptions.append(" ".join(description.lower().split()))
        self._longest_key = max(map(len, self._keys), default=0)
        self._keys_blob, self._key_starts = _blob(self._keys)
        self._descriptions_blob, self._description_starts = _blob(descriptions)

    def _add(self, position: int, name: str, description: str) -> None:
        tool_id = len(self._names)
        key = _key(name)
        grams = _bigrams(key)
        self._names.append(name)
        self._keys.append(key)
        self._gram_counts.append(len(grams))
        self._positions.append(position)
        self._by_key.setdefault(key, []).append(tool_id)
        for gram in grams:
            self._name_grams.setdefault(gram, []).append(tool_id)
        for word in _words(description):
            word_id = self._vocabulary.get(word)
            if word_id is None:
                word_id = self._vocabulary[word] = len(self._postings)
                self._postings.append([])
                word_grams = _bigrams(word)
                self._word_gram_counts.append(len(word_grams))
                for gram in word_grams:
                    self._word_grams.setdefault(gram, []).append(word_id)
            self._postings[word_id].append(tool_id)

    def _name_scores(self, query_key: str, words: list[str]) -> dict[int, float]:
        """Tool id -> exact + containment + name-word + name-similarity points."""
        grams = _bigrams(query_key)
        shared = Counter(chain.from_iterable(self._name_grams.get(gram, ()) for gram in grams))
        size = len(grams)
        scores = {tool: 6.0 * count / (size + self._gram_counts[tool]) for tool, count in shared.items()}
        longest = min(len(query_key), self._longest_key)  # name keys inside the query: its substrings
        inside = {query_key[start:start + length] for length in range(3, longest + 1)
                  for start in range(len(query_key) - length + 1)}
        for key in inside.intersection(self._by_key):
            for tool in self._by_key[key]:
                scores[tool] = scores.get(tool, 0.0) + 4.0
        if len(query_key) >= 3:
            for tool in _occurrences(self._keys_blob, self._key_starts, query_key):
                if self._keys[tool] != query_key:  # an equal key got its 4 points just above
                    scores[tool] = scores.get(tool, 0.0) + 4.0
        for tool in self._by_key.get(query_key, ()):
            scores[tool] = scores.get(tool, 0.0) + 10.0
        for word in words:
            for tool in _occurrences(self._keys_blob, self._key_starts, word):
                scores[tool] = scores.get(tool, 0.0) + 2.0 / len(words)
        return scores

    def _description_scores(self, phrase: str, words: list[str]) -> dict[int, float]:
        """Tool id -> description phrase + fuzzy description-word points."""
        totals: dict[int, float] = {}
        for word in words:
            grams = _bigrams(word)
            shared = Counter(chain.from_iterable(self._word_grams.get(gram, ()) for gram in grams))
            matches = sorted((2.0 * count / (len(grams) + self._word_gram_counts[word_id]), word_id)
                             for word_id, count in shared.items())
            best: dict[int, float] = {}
            for dice, word_id in matches:  # ascending, so each tool ends with its best Dice
                if dice >= FUZZY_WORD_MIN:
                    best.update(dict.fromkeys(self._postings[word_id], 2.0 * dice / len(words)))
            if not totals:
                totals = best
                continue
            for tool, points in best.items():
                totals[tool] = totals.get(tool, 0.0) + points
        if len(phrase) >= 3:
            for tool in _occurrences(self._descriptions_blob, self._description_starts, phrase):
                totals[tool] = totals.get(tool, 0.0) + 1.5
        return totals

    def rank(self, query: str, top_k: int = DEFAULT_TOP_K, *, max_top_k: int = MAX_TOP_K) -> list[tuple[float, int]]:
        """(score, catalog position) of the best tools, best first; [] for a blank query."""
        phrase = " ".join(query.lower().replace("\0", " ").split())
        query_key = _key(phrase)
        if not query_key:
            return []
        words = _words(phrase)[:_MAX_QUERY_WORDS]
        scores = self._name_scores(query_key, words)
        for tool, points in self._description_scores(phrase, words).items():
            scores[tool] = scores.get(tool, 0.0) + points
        ranked = sorted((-round(score, 4), self._names[tool], tool) for tool, score in scores.items()
                        if score >= MIN_SCORE)
        return [(-negative, self._positions[tool]) for negative, _, tool in ranked[:clamp_top_k(top_k, max_top_k)]]

    def search(self, query: str, top_k: int = DEFAULT_TOP_K, *, max_top_k: int = MAX_TOP_K) -> list[SearchHit]:
        """The best tools of this index's catalog for `query` (see `search_tools`)."""
        return _hits(self.catalog, self.rank(query, top_k, max_top_k=max_top_k))


def _blob(texts: list[str]) -> tuple[str, list[int]]:
    """The texts joined by NUL (which no query contains) and each text's start offset."""
    starts, offset = [], 0
    for text in texts:
        starts.append(offset)
        offset += len(text) + 1
    return "\0".join(texts), starts


def _occurrences(blob: str, starts: list[int], needle: str) -> set[int]:
    """Ids of the texts in `blob` that contain `needle` (a C-speed scan, not a loop over texts)."""
    found: set[int] = set()
    at = blob.find(needle)
    while at >= 0:
        text = bisect_right(starts, at) - 1
        found.add(text)
        next_start = starts[text + 1] if text + 1 < len(starts) else len(blob)
        at = blob.find(needle, next_start)
    return found


def _name_and_description(tool: Mapping[str, Any]) -> tuple[str | None, str]:
    name = tool.get("name")
    description = tool.get("description")
    return (name if isinstance(name, str) and name else None,
            description if isinstance(description, str) else "")


def _hits(catalog: Sequence[Mapping[str, Any]], ranked: list[tuple[float, int]]) -> list[SearchHit]:
    hits = []
    for score, position in ranked:
        tool = catalog[position]
        name, description = _name_and_description(tool)
        parameters = parameter_summary(tool.get("input_schema"))
        sentence = first_sentence(description)
        summary = f"{name} — {sentence} — {parameters}" if sentence else f"{name} — {parameters}"
        hits.append(SearchHit(name=name or "", score=score, summary=summary, parameters=parameters))
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


_INDEXES: dict[tuple[tuple[Any, ...], tuple[Any, ...]], SearchIndex] = {}
_GET_NAME = itemgetter("name")
_GET_DESCRIPTION = itemgetter("description")


def _index_for(catalog: Sequence[Mapping[str, Any]]) -> SearchIndex:
    """A cached index for this catalog's content.

    Keyed by the names and descriptions themselves (C-level passes, no Python call per tool),
    so a rebuilt or mutated catalog gets a fresh index and an equal one reuses the cached one.
    A catalog with missing or unhashable names/descriptions is keyed by their cleaned forms.
    """
    try:
        key = (tuple(map(_GET_NAME, catalog)), tuple(map(_GET_DESCRIPTION, catalog)))
        index = _INDEXES.get(key)
    except (KeyError, TypeError, IndexError):
        pairs = [_name_and_description(tool) for tool in catalog]
        key = (tuple(name for name, _ in pairs), tuple(text for _, text in pairs))
        index = _INDEXES.get(key)
    if index is None:
        if len(_INDEXES) >= _INDEX_CACHE_LIMIT:  # clear, not evict: safe under threads, and rare
            _INDEXES.clear()
        index = _INDEXES[key] = SearchIndex(catalog)
    return index


def search_tools(catalog: Sequence[Mapping[str, Any]], query: str, top_k: int = DEFAULT_TOP_K, *,
                 max_top_k: int = MAX_TOP_K) -> list[SearchHit]:
    """At most `top_k` (clamped to 1..max_top_k, max_top_k to 1..20) tools of `catalog` that
    match `query`, best first (score descending, then name); [] for a blank query.

    Hits come from this catalog's own entries (their schemas, for the parameter summary), even
    when the ranking reuses a cached index built from an equal catalog.
    """
    if not query or not query.strip():
        return []
    return _hits(catalog, _index_for(catalog).rank(query, top_k, max_top_k=max_top_k))


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
