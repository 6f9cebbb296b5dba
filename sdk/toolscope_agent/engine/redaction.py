"""Redaction: what must never leave the agent or reach a database.

Two rules, applied by the SDK before sending and by the server before storing:
- argument keys a tool's settings name (`redact`) lose their values, at any depth;
- any string that looks like a secret (provider API keys, bearer tokens, passwords in URLs,
  private keys, JWTs, `password=...` assignments) has that substring replaced by [REDACTED].

Scanning runs on the ingest hot path over every output. Python's regex engine scans text without a
literal prefix at ~20 MB/s, so each rule instead finds its literal marker with str.find (memchr
speed) and runs its pattern only at those positions with `match`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

REDACTED = "[REDACTED]"


@dataclass(frozen=True)
class _Rule:
    marker: str  # literal where a match starts, found with str.find
    pattern: re.Pattern[str]  # matched there on the original text; group "secret" is what is cut
    fold: bool = False  # marker is lowercase and searched in the lowered text
    word_start: bool = True  # the match must not follow a letter, digit or underscore


def _rule(marker: str, pattern: str, *, fold: bool = False, word_start: bool = True) -> _Rule:
    return _Rule(marker, re.compile(pattern, re.S | (re.I if fold else 0)), fold, word_start)


# Case-sensitive formats get exact markers: a short or case-folded marker ("gh", "sk") occurs in
# ordinary words so often that the pattern attempts would cost more than the scan.
_ASSIGNED = r"[\w\-]*['\"]?\s*[=:]\s*['\"]?(?P<secret>[^\s'\",;]{8,})"
_HEADER = r"\s+(?P<secret>[A-Za-z0-9._~+/\-]{16,}=*)"
_RULES: tuple[_Rule, ...] = (
    _rule("-----BEGIN ", r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
          word_start=False),
    _rule("sk-", r"sk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
    _rule("sk_", r"sk_(?:live|test)_[A-Za-z0-9]{16,}"),
    _rule("rk_", r"rk_(?:live|test)_[A-Za-z0-9]{16,}"),
    _rule("AKIA", r"AKIA[0-9A-Z]{16}(?![0-9A-Z])"),
    _rule("ASIA", r"ASIA[0-9A-Z]{16}(?![0-9A-Z])"),
    *(_rule(f"gh{kind}_", rf"gh{kind}_[A-Za-z0-9]{{36,}}") for kind in "pousr"),
    _rule("github_pat_", r"github_pat_[A-Za-z0-9_]{22,}"),
    _rule("glpat-", r"glpat-[A-Za-z0-9_\-]{20,}"),
    _rule("xox", r"xox[abposr]-[A-Za-z0-9\-]{10,}"),
    _rule("AIza", r"AIza[0-9A-Za-z_\-]{35}"),
    _rule("hf_", r"hf_[A-Za-z0-9]{30,}"),
    _rule("eyJ", r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    _rule("://", r"://[^\s:/@]+:(?P<secret>[^\s@/]+)@", word_start=False),
    _rule("bearer", r"bearer" + _HEADER, fold=True),
    _rule("basic", r"basic\s+(?P<secret>[A-Za-z0-9+/]{16,}=*)", fold=True),
    # "token" starts both `Token abc…` headers and `auth_token=…` assignments.
    _rule("token", r"token(?:" + _HEADER + "|" + _ASSIGNED.replace("secret", "assigned") + ")", fold=True,
          word_start=False),
    *(_rule(word, word + _ASSIGNED, fold=True, word_start=False)
      for word in ("api_key", "api-key", "apikey", "secret", "password", "passwd", "private_key")),
)
# No pattern matches fewer characters than this, so shorter strings skip the scan.
_MIN_SECRET_LENGTH = 8


def _prefilter() -> Callable[[str], object] | None:
    """With google-re2 installed (the server has it), one linear-time pass over all the rules at
    once answers "could anything here be a secret?" about ten times faster than the marker scans.
    It matches a superset of what the rules match (no word-start or lookahead conditions), so the
    answer to "what is redacted" is the same with or without it."""
    try:
        import re2  # type: ignore[import-untyped, import-not-found, unused-ignore]
    except ImportError:  # the SDK's default: no dependency beyond the standard library
        return None
    parts = []
    for rule in _RULES:
        pattern = rule.pattern.pattern.replace("(?P<secret>", "(").replace("(?P<assigned>", "(")
        pattern = pattern.replace("(?![0-9A-Z])", "").replace(r"\Z", r"\z")
        parts.append(f"(?{'is' if rule.fold else 's'}:{pattern})")
    search: Callable[[str], object] = re2.compile("|".join(parts)).search
    return search


_could_hold_secret = _prefilter()


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def _match_span(rule: _Rule, text: str, pos: int) -> tuple[int, int] | None:
    if rule.word_start and pos > 0 and _is_word_char(text[pos - 1]):
        return None
    match = rule.pattern.match(text, pos)
    if match is None:
        return None
    for group in ("secret", "assigned"):
        if group in rule.pattern.groupindex and match.group(group) is not None:
            return match.span(group)
    return match.span()


def _spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    lowered = text.lower()
    for rule in _RULES:
        haystack = lowered if rule.fold else text
        pos = haystack.find(rule.marker)
        while pos != -1:
            span = _match_span(rule, text, pos)
            if span:
                spans.append(span)
            pos = haystack.find(rule.marker, span[1] if span else pos + 1)
    return spans


def redact_text(text: str) -> str:
    """`text` with every secret-looking substring replaced by [REDACTED]."""
    if len(text) < _MIN_SECRET_LENGTH:
        return text
    if _could_hold_secret is not None and _could_hold_secret(text) is None:
        return text
    spans = _spans(text)
    if not spans:
        return text
    spans.sort()
    pieces: list[str] = []
    cursor = 0
    for start, end in spans:
        if end <= cursor:  # inside a span already cut
            continue
        if start >= cursor:
            pieces.append(text[cursor:start])
            pieces.append(REDACTED)
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces)


def redact_value(value: Any) -> Any:
    """A copy of a JSON value with secret-looking substrings of every string redacted."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {key: redact_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [redact_value(item) for item in value]
    return value


def redact_arguments(arguments: Any, keys: Collection[str]) -> Any:
    """Arguments with the values of `keys` (at any depth) and secret-looking strings redacted."""
    if isinstance(arguments, dict):
        return {
            key: REDACTED if key in keys else redact_arguments(item, keys)
            for key, item in arguments.items()
        }
    if isinstance(arguments, list):
        return [redact_arguments(item, keys) for item in arguments]
    return redact_value(arguments)
