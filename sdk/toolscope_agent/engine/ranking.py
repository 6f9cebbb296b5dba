"""Ranker `bm25f-2`: BM25F over a tool's fields, the default ranking of `tool_search`.

A tool is a document of three fields, each analysed by `engine.text` (identifiers split,
stopwords dropped, Snowball stems):

===========  ======  ====  ==================================================================
field        weight  b     text
===========  ======  ====  ==================================================================
name         3.0     0.3   the tool's name (`git_diff_unstaged` -> git diff unstag)
description  1.0     0.75  the description
parameters   0.5     0.75  top-level parameter names, their descriptions and string enum values
===========  ======  ====  ==================================================================

Score (Robertson & Zaragoza's BM25F, one saturation over the weighted fields):

    tf~(t, d)   = sum over fields f of  weight_f * tf_f(t, d) / (1 - b_f + b_f * len_f(d) / avglen_f)
    score(q, d) = sum over distinct query terms t of  idf(t) * tf~(t, d) / (K1 + tf~(t, d))
    idf(t)      = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

with K1 = 1.2 and df counted over whole documents. A rare word ("stylist") weighs far more than a
common one ("file"), a word in the name more than one in the description, and no query length
limit applies. Two bonuses, on whole words only:

- exact name, +EXACT_NAME: the query's letters and digits equal the name's (`git diff`,
  `git_diff`, `GitDiff` all name `git_diff`);
- whole name, +NAME_WORDS x share: every word of a name of two or more words occurs in the query
  (`create a pull request` for `create_pull_request`), scaled by the share of the query's terms
  the name covers, so a long request that happens to hold a two-word name moves it only a little.

A query term absent from every document (a typo, "comand") matches the indexed terms one edit
away (a deletion, insertion, substitution or swap of adjacent letters; terms of five or more
letters only) at half weight.

The project's learned history (engine/history.py: task messages and tool_search queries that
led to each tool) adds, per tool, HISTORY_WEIGHT x the best lexical score of the query x the
share by which its most similar past text exceeds HISTORY_MIN_SIMILARITY (idf-weighted Dice
between the query's terms and that one text's): a near repeat of a past request lifts its tool
to the top; a loose resemblance adds nothing. Pooling a tool's texts as a fourth field helped
the tools with history and buried those without (BFCL time split, bench/RESULTS.md).

There is no score floor: the best top_k tools that share a term
with the query come back, and a query sharing none gets nothing. Scores are rounded to 4
decimals and ties broken by name, so the order never depends on catalog order or platform.

Speed: the index keeps, per term, the (tool, weight) pairs already saturated and multiplied by
idf, so a query costs one dictionary walk per distinct query term.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from toolscope_agent.engine.text import name_key, terms

VERSION = "bm25f-2"
K1 = 1.2
EXACT_NAME = 10.0
NAME_WORDS = 4.0
FUZZY_WEIGHT = 0.5
FUZZY_MIN_LENGTH = 5
HISTORY_WEIGHT = 1.0
HISTORY_MIN_SIMILARITY = 0.4
# (field, weight, b): see the module docstring.
FIELDS: tuple[tuple[str, float, float], ...] = (
    ("name", 3.0, 0.3),
    ("description", 1.0, 0.75),
    ("parameters", 0.5, 0.75),
)


def tool_fields(tool: Mapping[str, Any]) -> dict[str, list[str]]:
    """The terms of each field of one catalog entry."""
    name = tool.get("name")
    description = tool.get("description")
    return {
        "name": terms(name) if isinstance(name, str) else [],
        "description": terms(description) if isinstance(description, str) else [],
        "parameters": terms(" ".join(_parameter_texts(tool.get("input_schema")))),
    }


def _parameter_texts(schema: Any) -> Iterable[str]:
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        return
    for name, spec in properties.items():
        yield str(name)
        if not isinstance(spec, Mapping):
            continue
        if isinstance(spec.get("description"), str):
            yield spec["description"]
        enum = spec.get("enum")
        if isinstance(enum, list):
            yield from (value for value in enum if isinstance(value, str))


class Bm25fIndex:
    """A catalog's BM25F index. `entries` are (catalog position, name, tool) of distinct names;
    `history` maps a tool name to the texts that led to it."""

    def __init__(self, entries: Sequence[tuple[int, str, Mapping[str, Any]]],
                 history: Mapping[str, Sequence[str]] | None = None) -> None:
        self.positions = [position for position, _, _ in entries]
        self.names = [name for _, name, _ in entries]
        documents = [tool_fields(tool) for _, _, tool in entries]
        self.postings = _postings(documents)
        self._history = HistoryIndex(self.names, history or {})
        self._name_terms = [frozenset(document["name"]) for document in documents]
        self._by_key: dict[str, list[int]] = {}
        for tool, name in enumerate(self.names):
            self._by_key.setdefault(name_key(name), []).append(tool)
        self._neighbours: dict[str, list[str]] | None = None  # built on the first unknown term

    def scores(self, query: str) -> dict[int, float]:
        """Tool id -> score, for every tool sharing a term with the query (or named by it)."""
        query_terms = list(dict.fromkeys(terms(query)))
        totals: dict[int, float] = {}
        for term in query_terms:
            self._add(totals, term, 1.0)
        self._add_bonuses(totals, query, frozenset(query_terms))
        if self._history.texts:
            # Relative to the best lexical score, so it weighs alike for short and long queries.
            scale = HISTORY_WEIGHT * max(totals.values(), default=1.0)
            for tool, similarity in self._history.similarities(query_terms).items():
                if similarity > HISTORY_MIN_SIMILARITY:
                    boost = (similarity - HISTORY_MIN_SIMILARITY) / (1.0 - HISTORY_MIN_SIMILARITY)
                    totals[tool] = totals.get(tool, 0.0) + scale * boost
        return totals

    def _add(self, totals: dict[int, float], term: str, factor: float) -> None:
        postings = self.postings.get(term)
        if postings is None:
            if len(term) >= FUZZY_MIN_LENGTH:
                for neighbour in self._neighbours_of(term):
                    self._add(totals, neighbour, FUZZY_WEIGHT)
            return
        for tool, weight in postings:
            totals[tool] = totals.get(tool, 0.0) + factor * weight

    def _add_bonuses(self, totals: dict[int, float], query: str, query_terms: frozenset[str]) -> None:
        for tool in self._by_key.get(name_key(query), ()):
            totals[tool] = totals.get(tool, 0.0) + EXACT_NAME
        if not query_terms:
            return
        for tool in list(totals):
            name_terms = self._name_terms[tool]
            if len(name_terms) >= 2 and name_terms <= query_terms:
                totals[tool] += NAME_WORDS * len(name_terms) / len(query_terms)

    def _neighbours_of(self, term: str) -> list[str]:
        """Indexed terms one edit from `term` (which is not indexed), in a fixed order."""
        if self._neighbours is None:
            self._neighbours = {}
            for indexed in self.postings:
                if len(indexed) >= FUZZY_MIN_LENGTH - 1:
                    for variant in _deletions(indexed) | {indexed}:
                        self._neighbours.setdefault(variant, []).append(indexed)
        found: set[str] = set()
        for variant in _deletions(term) | {term}:
            found.update(self._neighbours.get(variant, ()))
        return sorted(found - {term})


class HistoryIndex:
    """A project's learned texts (engine/history.py), each kept whole: a query is compared with
    every single past text, not with a tool's texts pooled, so a tool gains only when one past
    request resembles this one. Pooling let a tool with many past requests match any query
    through their generic words and crowd out the tools that have none (measured on BFCL's
    time split, bench/RESULTS.md)."""

    def __init__(self, names: Sequence[str], history: Mapping[str, Sequence[str]]) -> None:
        owners: list[int] = []  # text id -> tool id
        term_texts: dict[str, list[int]] = {}
        for tool, name in enumerate(names):
            for text in _texts(history.get(name)):
                text_terms = set(terms(text))
                if text_terms:
                    for term in sorted(text_terms):
                        term_texts.setdefault(term, []).append(len(owners))
                    owners.append(tool)
        count = len(owners)
        self.idf = {term: math.log(1.0 + (count - len(ids) + 0.5) / (len(ids) + 0.5))
                    for term, ids in term_texts.items()}
        mass = [0.0] * count
        for term, ids in term_texts.items():
            for text_id in ids:
                mass[text_id] += self.idf[term]
        self.texts: list[tuple[int, float]] = list(zip(owners, mass, strict=True))  # (tool id, idf mass)
        self.term_texts = term_texts

    def similarities(self, query_terms: Sequence[str]) -> dict[int, float]:
        """Tool id -> the best Dice similarity (idf-weighted) between the query and one of its
        texts, for the tools with a text sharing a term with the query."""
        known = [term for term in query_terms if term in self.idf]
        if not known:
            return {}
        query_mass = sum(self.idf[term] for term in known)
        shared: dict[int, float] = {}
        for term in known:
            for text in self.term_texts[term]:
                shared[text] = shared.get(text, 0.0) + self.idf[term]
        best: dict[int, float] = {}
        for text, mass in sorted(shared.items()):
            tool, text_mass = self.texts[text]
            similarity = 2.0 * mass / (query_mass + text_mass)
            if similarity > best.get(tool, 0.0):
                best[tool] = similarity
        return best


def _texts(value: Any) -> Sequence[str]:
    return [text for text in value if isinstance(text, str)] if isinstance(value, (list, tuple)) else ()


def _deletions(term: str) -> set[str]:
    """`term` with one character removed, every way. Two terms one edit apart share a member of
    their sets-plus-self (SymSpell's symmetric deletions)."""
    return {term[:i] + term[i + 1:] for i in range(len(term))}


def _postings(documents: list[dict[str, list[str]]]) -> dict[str, list[tuple[int, float]]]:
    """term -> [(tool id, idf x saturated weighted frequency)] in tool id order."""
    count = len(documents)
    average = {field: sum(len(doc[field]) for doc in documents) / count if count else 0.0
               for field, _, _ in FIELDS}
    saturated: list[dict[str, float]] = []
    frequency: Counter[str] = Counter()
    for document in documents:
        pseudo: dict[str, float] = {}
        for field, weight, b in FIELDS:
            field_terms = document[field]
            if not field_terms:
                continue
            scale = weight / (1.0 - b + b * len(field_terms) / average[field])
            for term in field_terms:
                pseudo[term] = pseudo.get(term, 0.0) + scale
        frequency.update(pseudo.keys())
        saturated.append({term: value / (K1 + value) for term, value in pseudo.items()})
    idf = {term: math.log(1.0 + (count - df + 0.5) / (df + 0.5)) for term, df in frequency.items()}
    postings: dict[str, list[tuple[int, float]]] = {}
    for tool, values in enumerate(saturated):
        for term, value in values.items():
            postings.setdefault(term, []).append((tool, idf[term] * value))
    return postings
