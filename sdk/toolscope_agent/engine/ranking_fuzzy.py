"""Ranker `fuzzy-1`: the first ranking of `tool_search`, kept so that a policy published with it
(every document without `selection.tool_search.ranker`) ranks as it did when it was published.
New policies use `bm25f-2` (engine/ranking.py); this one is frozen: do not tune it.

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

Speed: `FuzzyIndex` holds each tool's normalised forms and an inverted index from character
bigrams to description words, built once per catalog content.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any

VERSION = "fuzzy-1"
MIN_SCORE = 1.0
FUZZY_WORD_MIN = 0.5
_MAX_QUERY_WORDS = 12
_WORD = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset({"a", "an", "and", "are", "as", "at", "be", "by", "can", "for", "from", "in", "into", "is",
                        "it", "of", "on", "or", "that", "the", "this", "to", "use", "with"})


def _key(text: str) -> str:
    return "".join(_WORD.findall(text.lower()))


def _bigrams(text: str) -> frozenset[str]:
    return frozenset(text[i:i + 2] for i in range(len(text) - 1))


def _dice(a: frozenset[str], b: frozenset[str]) -> float:
    return 2.0 * len(a & b) / (len(a) + len(b)) if a and b else 0.0


def _words(text: str) -> list[str]:
    return [word for word in dict.fromkeys(_WORD.findall(text.lower())) if len(word) >= 2 and word not in _STOPWORDS]


class FuzzyIndex:
    """A catalog prepared for repeated searches (see the module docstring for the scoring).
    `entries` are (catalog position, name, tool) of distinct names; `history` is not used.

    Ranking touches only candidate tools: those sharing a bigram with the query's key (found
    through a bigram -> tools index), those with a fuzzy description-word hit (a bigram ->
    description words index), and those whose description contains the query (one `str.find`
    scan over all descriptions joined). Every other tool scores below MIN_SCORE by
    construction, so skipping it changes nothing.
    """

    def __init__(self, entries: Sequence[tuple[int, str, Mapping[str, Any]]],
                 history: Mapping[str, Sequence[str]] | None = None) -> None:
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
        for position, name, tool in entries:
            description = _description(tool)
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

    def scores(self, query: str) -> dict[int, float]:
        """Tool id -> score of the tools scoring at least MIN_SCORE (`_positions` maps ids to
        catalog positions, `_names` to names)."""
        phrase = " ".join(query.lower().replace("\0", " ").split())
        query_key = _key(phrase)
        if not query_key:
            return {}
        words = _words(phrase)[:_MAX_QUERY_WORDS]
        scores = self._name_scores(query_key, words)
        for tool, points in self._description_scores(phrase, words).items():
            scores[tool] = scores.get(tool, 0.0) + points
        return {tool: score for tool, score in scores.items() if score >= MIN_SCORE}

    @property
    def positions(self) -> list[int]:
        return self._positions

    @property
    def names(self) -> list[str]:
        return self._names


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


def _description(tool: Mapping[str, Any]) -> str:
    description = tool.get("description")
    return description if isinstance(description, str) else ""
