"""Words for ranking: how tool names, descriptions and queries become index terms.

One analysis for documents and queries, so a word means the same on both sides:

1. Identifiers are split where their writers split them: non-alphanumerics (`git_diff`,
   `math.factorial`, `list-files`), lower-to-upper case changes (`getUserInfo` -> get user info,
   `HTTPServer` -> http server) and letter/digit changes (`s3bucket` -> s 3 bucket).
2. Words are lowercased; English stopwords, words of one character and bare numbers are dropped
   (numbers in requests are values, "5" or "2023", not what a tool does).
3. What is left is stemmed with the Snowball English stemmer (`snowballstemmer`, which runs
   PyStemmer's C implementation of the same algorithm when that is installed), so "finding",
   "finds" and "find" are one term, and "march" stays "march".

The stemmer is the only dependency; everything here is deterministic, and the SDK and the server
pin the same version so they index alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import snowballstemmer  # type: ignore[import-untyped]

from toolscope_agent.engine.bytecache import ByteDict

_CHUNK = re.compile(r"[^\W_]+")  # runs of letters and digits, in any script
_ASCII_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")  # camelCase, HTTPServer, s3
# The common function words of English requests ("could you please get me the ..."): a query's
# intent is in its other words. IDF would shrink these anyway; dropping them keeps postings short.
STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being
below between both but by can could did do does doing done down during each either etc every few
for from further get gets had has have having he her here hers herself him himself his how i if
in into is it its itself just let lets like me might more most must my myself need needs no nor
not now of off on once only or other our ours ourselves out over own please same shall she should
so some such than that the their theirs them themselves then there these they this those through
to too under until up us use used uses using very via want wants was we were what when where
which while who whom whose why will with within without would you your yours yourself
""".split())  # noqa: SIM905 (a word list reads better as text)

_stemmer = snowballstemmer.stemmer("english")


# Bounded by bytes (engine/bytecache.py): a "word" may be a whole base64 blob.
_STEMS: ByteDict[str, str] = ByteDict(4 * 1024 * 1024)


def stem(word: str) -> str:
    """The Snowball English stem of a lowercase word."""
    found = _STEMS.get(word)
    if found is None:
        found = _STEMS.add(word, str(_stemmer.stemWord(word)), 4 * len(word) + 150)
    return found


def words(text: str) -> Iterator[str]:
    """The lowercase words of `text`, identifiers split, before stopwords are dropped."""
    if text.isascii():  # the common case: one C-level pass (the part pattern skips the rest)
        for part in _ASCII_PART.findall(text):
            yield part.lower()
        return
    for chunk in _CHUNK.findall(text):
        if chunk.isascii():
            for part in _ASCII_PART.findall(chunk):
                yield part.lower()
        else:
            yield chunk.lower()


# word as written -> its term, "" when dropped: indexing meets the same words again and again.
_TERMS: ByteDict[str, str] = ByteDict(16 * 1024 * 1024)


def terms(text: str) -> list[str]:
    """`text`'s index terms in order: split, lowercased, stopwords and numbers dropped, stemmed."""
    parts = _ASCII_PART.findall(text) if text.isascii() else list(words(text))
    found = []
    for part in parts:
        term = _TERMS.get(part)
        if term is None:
            term = _TERMS.add(part, _term(part.lower()), 4 * len(part) + 150)
        if term:
            found.append(term)
    return found


def _term(word: str) -> str:
    if len(word) < 2 or word.isdigit() or word in STOPWORDS:
        return ""
    return stem(word)


def name_key(text: str) -> str:
    """A name or query reduced to its lowercase letters and digits: `git_diff` and "Git diff"
    both read `gitdiff`."""
    return "".join(words(text))
