"""Secret rules: gitleaks' maintained rule set, vendored as data, plus the few shapes it lacks.

Contract: `secret_spans(text)` returns the (start, end) character spans of `text` that some rule
calls a secret, with gitleaks' semantics for each rule (data/gitleaks.json, MIT, see
data/gitleaks.LICENSE; regenerate with sdk/scripts/vendor_gitleaks_rules.py):
- a rule runs only when one of its `keywords` occurs in the text, case-insensitively. One RE2
  set pass finds every keyword at once, so text with nothing secret-looking costs one linear scan;
- the secret is the rule's `secretGroup`, else its first non-empty group, else the whole match;
- two deliberate differences, as telemetry is prose and ids more than source files: `_` before a
  pattern's leading `\\b` counts as a word start, since ids join words with it (`call_sk-proj-…`);
  and the end most rules require after a key (a quote, a space, `;`, end of text) also accepts
  punctuation, so a key that ends a sentence ("I used sk_live_….") is still one;
- a secret whose Shannon entropy is at most the rule's `entropy` is not one;
- the global allowlist and the rule's own: `regexes` tried on the secret, the match or the line
  (`regexTarget`), `stopwords` contained in the secret, `condition` AND/OR. Telemetry has no
  file path or commit, so an allowlist condition on them never holds and rules tied to a file
  path (`path`) are skipped.

Patterns compile with RE2 when google-re2 is installed (the server pins it): linear time whatever
the text. Without it (the SDK's default) Python's `re` compiles them after translating the two Go
constructs it refuses (`\\z`, flags in mid-pattern); a pattern that still fails is skipped, so the
SDK may redact less than the server, which redacts everything again before storing.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

try:
    import re2  # type: ignore[import-untyped, import-not-found, unused-ignore]
except ImportError:  # the SDK's default: no dependency beyond the standard library
    re2 = None

RULES_FILE = Path(__file__).with_name("data") / "gitleaks.json"
# No rule matches a secret in fewer characters than this, so shorter strings skip the scan.
MIN_SECRET_LENGTH = 8
TOGETHER_MAX_MEM = 64 << 20


class _Match(Protocol):
    def span(self, group: int = ...) -> tuple[int, int]: ...
    def groups(self) -> Sequence[str | None]: ...


class _Pattern(Protocol):
    def finditer(self, text: str) -> Iterator[_Match]: ...
    def search(self, text: str) -> _Match | None: ...


@dataclass(frozen=True)
class Allowlist:
    regexes: _Pattern | None = None
    target: str = "secret"  # secret | match | line
    stopwords: tuple[str, ...] = ()
    require_all: bool = False  # condition = "AND"
    impossible: bool = False  # an AND condition on a path or commit: never true without them

    def allows(self, secret: str, match: str, line: str) -> bool:
        if self.impossible:
            return False
        target = {"match": match, "line": line}.get(self.target, secret)
        checks = []
        if self.regexes is not None:
            checks.append(self.regexes.search(target) is not None)
        if self.stopwords:
            lowered = secret.lower()
            checks.append(any(word in lowered for word in self.stopwords))
        return all(checks) if self.require_all else any(checks)


@dataclass(frozen=True)
class Rule:
    id: str
    pattern: _Pattern
    keywords: tuple[str, ...]
    entropy: float = 0.0
    secret_group: int = 0
    allowlists: tuple[Allowlist, ...] = ()
    widened: bool = False  # its leading \b also accepts a "_", which is not part of the secret
    source: str = ""  # the pattern as compiled with RE2
    # toolscope's own rules may add a test on the match (e.g. "is the key named like a secret?").
    check: Callable[[_Match, str], bool] | None = field(default=None, compare=False)


def python_pattern(pattern: str) -> str:
    """A Go/RE2 pattern in Python's `re` syntax: `\\z` becomes `\\Z`; flags set mid-pattern, which
    Go applies to the rest of the enclosing group (across `|`), become scoped groups."""
    out: list[str] = []
    scoped: list[list[str]] = [[]]  # per open group: the flag groups opened in it
    i, in_class = 0, False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            pair = pattern[i:i + 2]
            out.append("\\Z" if pair == "\\z" and not in_class else pair)
            i += 2
            continue
        flags = None if in_class or i == 0 else re.match(r"\(\?([a-zA-Z]+)\)", pattern[i:])
        if in_class:
            in_class = char != "]"
        elif flags:
            out.append(f"(?{flags.group(1)}:")
            scoped[-1].append(flags.group(1))
            i += flags.end()
            continue
        elif char == "[":
            in_class = True
            lead = re.match(r"\[\^?\]?", pattern[i:])
            out.append(lead.group() if lead else char)
            i += len(lead.group()) if lead else 1
            continue
        elif char == "(":
            scoped.append([])
        elif char == ")" and len(scoped) > 1:
            out.append(")" * len(scoped.pop()))
        elif char == "|":
            out.append(")" * len(scoped[-1]) + "|" + "".join(f"(?{f}:" for f in scoped[-1]))
            i += 1
            continue
        out.append(char)
        i += 1
    out.append(")" * len(scoped[0]))
    return "".join(out)


def compile_pattern(pattern: str, max_mem: int | None = None) -> _Pattern | None:
    """RE2 when installed, else Python's `re`; None when the pattern cannot be compiled."""
    if re2 is not None:
        options = re2.Options()
        if max_mem is not None:
            options.max_mem = max_mem
        try:
            compiled: _Pattern = re2.compile(pattern, options)
        except re2.error:
            return None
        return compiled
    try:
        with warnings.catch_warnings():  # "possible nested set": Go's `[[` is a literal `[`
            warnings.simplefilter("ignore", FutureWarning)
            return re.compile(python_pattern(pattern), re.ASCII)
    except re.error:
        return None


def shannon_entropy(text: str) -> float:
    if not text:
        return 0.0
    size = len(text)
    return -sum(n / size * math.log2(n / size) for n in Counter(text).values())


def _allowlist(spec: dict[str, Any]) -> Allowlist | None:
    # Joined as gitleaks joins them (config/utils.go joinRegexOr), leaving out any that cannot compile.
    usable = [r for r in spec.get("regexes", ()) if compile_pattern(r) is not None]
    joined = compile_pattern("(?:" + "|".join(usable) + ")") if usable else None
    require_all = spec.get("condition", "OR").upper() == "AND"
    if not (joined or spec.get("stopwords") or (require_all and (spec.get("paths") or spec.get("commits")))):
        return None  # only paths or commits with OR: nothing to test on text
    return Allowlist(
        regexes=joined,
        target=spec.get("regexTarget", "secret"),
        stopwords=tuple(word.lower() for word in spec.get("stopwords", ())),
        require_all=require_all,
        impossible=require_all and bool(spec.get("paths") or spec.get("commits")),
    )


def _allowlists(specs: Iterable[dict[str, Any]]) -> tuple[Allowlist, ...]:
    return tuple(a for a in (_allowlist(spec) for spec in specs) if a is not None)


_LEADING_BOUNDARY = re.compile(r"^((?:\(\?[a-zA-Z]+\))?)\\b")
# Ends of keys in gitleaks' patterns, and the same with sentence and markup punctuation.
_KEY_ENDS_IN_PROSE = {
    r"""(?:[\x60'"\s;]|\\[nr]|$)""": r"""(?:[\x60'"\s;.,:!?)\]}>]|\\[nr]|$)""",
    r"""(?:$|[\\'"\x60\s<),])""": r"""(?:$|[\\'"\x60\s<),.;:!?\]}])""",  # azure-ad-client-secret
}
# The generic rule's value is any word with dots and `=` (`x=y, z=w)`), which punctuation would
# end in the middle of code: it keeps gitleaks' end.
_KEY_END_KEPT = frozenset({"generic-api-key"})


def rules_from_config(config: dict[str, Any]) -> tuple[Rule, ...]:
    """The content rules of a gitleaks config (as JSON), compiled; path rules skipped."""
    global_lists = _allowlists([config.get("allowlist", {}), *config.get("allowlists", ())])
    rules = []
    for spec in config.get("rules", ()):
        if "regex" not in spec or "path" in spec:
            continue
        regex = spec["regex"]
        if spec["id"] not in _KEY_END_KEPT:
            for end, in_prose in _KEY_ENDS_IN_PROSE.items():
                regex = regex.replace(end, in_prose)
        regex, widened = _LEADING_BOUNDARY.subn(r"\1(?:\\b|_)", regex)
        pattern = compile_pattern(regex)
        if pattern is None:
            continue
        rules.append(Rule(
            id=spec["id"], pattern=pattern, source=regex, widened=bool(widened),
            keywords=tuple(k.lower() for k in spec.get("keywords", ())),
            entropy=float(spec.get("entropy", 0.0)), secret_group=int(spec.get("secretGroup", 0)),
            allowlists=global_lists + _allowlists(spec.get("allowlists", ())),
        ))
    return tuple(rules)


def load_gitleaks_rules() -> tuple[Rule, ...]:
    return rules_from_config(json.loads(RULES_FILE.read_text(encoding="utf-8")))


def _line(text: str, start: int, end: int) -> str:
    return text[text.rfind("\n", 0, start) + 1:(text.find("\n", end) + 1 or len(text) + 1) - 1]


def finding_span(rule: Rule, match: _Match, text: str) -> tuple[int, int] | None:
    """The span of the secret in `match`, or None when entropy or an allowlist rules it out."""
    start, end = match.span()
    if rule.widened and text.startswith("_", start):
        start += 1
    whole = text[start:end].strip("\n")
    start = text.index(whole, start) if whole else start
    span = (start, start + len(whole))
    # The first non-empty group from secretGroup on (toolscope's rules put alternative spellings
    # of the secret in consecutive groups), or from the first group.
    groups = match.groups()
    first = max(rule.secret_group, 1)
    span = next((match.span(i) for i in range(first, len(groups) + 1) if groups[i - 1]), span)
    secret = text[span[0]:span[1]]
    if not secret or (rule.entropy and shannon_entropy(secret) <= rule.entropy):
        return None
    if rule.check is not None and not rule.check(match, text):
        return None
    line = _line(text, *match.span())
    if any(a.allows(secret, whole, line) for a in rule.allowlists):
        return None
    return span


class RuleSet:
    """Rules with their keyword prefilter: the only rules that run on a text are those with a
    keyword in it (and the rare rule without keywords).

    Some keywords are everyday words ("key", "api", "pass", "s.", "ey", "sk", "test_"), so their
    rules are chosen for most texts and rarely match. With RE2 those `frequent` rules are first
    tried together, as one alternation: one scan answers "no match" for all of them at once; only
    when it finds something do they run one by one. That regex gets a larger DFA budget than
    RE2's default (8 MB): with the default its DFA runs out of memory and RE2 falls back to a
    matcher ten times slower. It is one regex per process, so the budget is paid once."""

    def __init__(self, rules: Sequence[Rule], frequent: Collection[str] = ()) -> None:
        self.rules = tuple(rules)
        self._frequent = frozenset(frequent)
        sources = [f"(?:{rule.source})" for rule in self.rules if rule.id in self._frequent]
        self._together = compile_pattern("|".join(sources), max_mem=TOGETHER_MAX_MEM) if re2 and sources else None
        keywords = sorted({k for rule in self.rules for k in rule.keywords})
        self._by_keyword = [[r for r in self.rules if k in r.keywords] for k in keywords]
        self._always = [r for r in self.rules if not r.keywords]
        self._keywords = keywords
        self._set = self._keyword_set(keywords) if re2 is not None else None

    @staticmethod
    def _keyword_set(keywords: list[str]) -> Any:
        options = re2.Options()
        options.case_sensitive = False
        keyword_set = re2.Set.SearchSet(options)
        for keyword in keywords:
            keyword_set.Add(re2.escape(keyword))
        keyword_set.Compile()
        return keyword_set

    def candidates(self, text: str) -> list[Rule]:
        if self._set is not None:
            hits: Iterable[int] = self._set.Match(text) or ()
        else:
            lowered = text.lower()
            hits = (i for i, keyword in enumerate(self._keywords) if keyword in lowered)
        chosen = {rule.id: rule for i in hits for rule in self._by_keyword[i]}
        return [*self._always, *chosen.values()]

    def _without_silent_frequent_rules(self, text: str, rules: list[Rule]) -> list[Rule]:
        frequent = [rule for rule in rules if rule.id in self._frequent]
        if self._together is None or len(frequent) < 2 or self._together.search(text) is not None:
            return rules
        return [rule for rule in rules if rule.id not in self._frequent]

    def spans(self, text: str) -> list[tuple[int, int]]:
        if len(text) < MIN_SECRET_LENGTH:
            return []
        rules = self._without_silent_frequent_rules(text, self.candidates(text))
        found = []
        for rule in rules:
            for match in rule.pattern.finditer(text):
                span = finding_span(rule, match, text)
                if span is not None and span[1] > span[0]:
                    found.append(span)
        return found
