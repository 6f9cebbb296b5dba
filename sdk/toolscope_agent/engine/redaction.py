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
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

REDACTED = "[REDACTED]"


@dataclass(frozen=True)
class _Rule:
    marker: str  # lowercase literal where a match starts, found with str.find in the lowered text
    pattern: re.Pattern[str]  # matched on the original text there; group "secret" is what is cut
    word_start: bool = True  # the match must not follow a letter, digit or underscore


def _rule(marker: str, pattern: str, *, fold: bool = False, word_start: bool = True) -> _Rule:
    return _Rule(marker, re.compile(pattern, re.S | (re.I if fold else 0)), word_start)


_ASSIGNED = r"[\w\-]*['\"]?\s*[=:]\s*['\"]?(?P<secret>[^\s'\",;]{8,})"
_RULES: tuple[_Rule, ...] = (
    _rule("-----begin ", r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
          word_start=False),
    _rule("sk", r"sk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
    _rule("sk", r"sk_(?:live|test)_[A-Za-z0-9]{16,}"),
    _rule("rk_", r"rk_(?:live|test)_[A-Za-z0-9]{16,}"),
    _rule("akia", r"AKIA[0-9A-Z]{16}(?![0-9A-Z])"),
    _rule("asia", r"ASIA[0-9A-Z]{16}(?![0-9A-Z])"),
    _rule("gh", r"gh[pousr]_[A-Za-z0-9]{36,}"),
    _rule("gith", r"github_pat_[A-Za-z0-9_]{22,}"),
    _rule("glpat-", r"glpat-[A-Za-z0-9_\-]{20,}"),
    _rule("xox", r"xox[abposr]-[A-Za-z0-9\-]{10,}"),
    _rule("aiza", r"AIza[0-9A-Za-z_\-]{35}"),
    _rule("hf_", r"hf_[A-Za-z0-9]{30,}"),
    _rule("eyj", r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    _rule("://", r"://[^\s:/@]+:(?P<secret>[^\s@/]+)@", word_start=False),
    _rule("bearer", r"bearer\s+(?P<secret>[A-Za-z0-9._~+/\-]{16,}=*)", fold=True),
    _rule("basic", r"basic\s+(?P<secret>[A-Za-z0-9+/]{16,}=*)", fold=True),
    # "token" starts both `Token abc…` headers and `auth_token=…` assignments.
    _rule("token", r"token(?:\s+(?P<secret>[A-Za-z0-9._~+/\-]{16,}=*)|" + _ASSIGNED.replace("secret", "assigned") + ")",
          fold=True, word_start=False),
    _rule("api", r"api[_\-]?key" + _ASSIGNED, fold=True, word_start=False),
    _rule("secret", r"secret" + _ASSIGNED, fold=True, word_start=False),
    _rule("passw", r"passw(?:or)?d" + _ASSIGNED, fold=True, word_start=False),
    _rule("private", r"private_key" + _ASSIGNED, fold=True, word_start=False),
)
_BY_MARKER: dict[str, tuple[_Rule, ...]] = {}
for _r in _RULES:
    _BY_MARKER[_r.marker] = (*_BY_MARKER.get(_r.marker, ()), _r)
# No pattern matches fewer characters than this, so shorter strings skip the scan.
_MIN_SECRET_LENGTH = 8


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
    for marker, rules in _BY_MARKER.items():
        pos = lowered.find(marker)
        while pos != -1:
            found = next((span for rule in rules if (span := _match_span(rule, text, pos))), None)
            if found:
                spans.append(found)
            pos = lowered.find(marker, found[1] if found else pos + 1)
    return spans


def redact_text(text: str) -> str:
    """`text` with every secret-looking substring replaced by [REDACTED]."""
    if len(text) < _MIN_SECRET_LENGTH:
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
