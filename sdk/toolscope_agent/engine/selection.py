"""Which tool definitions an agent sends on a turn: the policy's `selection` section applied.

The server (policy resolve, simulation) and the SDK (the agent itself) both call `select_tools`,
so the same catalog, policy, state and message always give the same Selection: no clock, no
randomness, no I/O, and every output in catalog order.

Contract (docs/policy.md), with the choices the document leaves open:

- Candidates are `catalog ∩ allowed` (`allowed` null or absent: the whole catalog). Nothing else
  is ever sent, whatever the always-on list, a group, a hint or a search result names. A catalog
  entry without a string name is ignored; of two entries with one name, the first counts.
- Always-on tools among the candidates are always sent, in every mode.
- `all`: every candidate. `context_rules`: always-on + the groups of every matching rule. A
  rule reads the task message, and, with `rule_window` n > 1, the session's n - 1 task messages
  before it too (SessionState.tasks): a follow-up ("I am USR001.", "the file is report.txt")
  continues the instruction before it. A rule with `after_tools` also matches once the session
  has called one of them (SessionState.discovered: an agent that called `cd` will call `ls`),
  whatever the message.
  `progressive`: always-on + activated tools, and a menu of every candidate. `tool_search`:
  the `tool_search` tool (when the catalog has one) + always-on.
- In every mode but `all`, tools loaded by earlier searches join (a search result is useless if
  its tool never arrives, and the example document pairs `context_rules` with a `tool_search`
  always-on tool), and so do tools called earlier when `sticky_discovered` (default true).
- `tool_list` says how a session's list may change from request to request, which decides what
  the provider's prompt cache keeps (the tool list heads every cached prefix, so a list that
  changes re-writes the whole conversation after it): `per_request` (the default) chooses each
  request's list anew; `append_only` keeps every tool once sent for the rest of the session, so
  the list changes only when it grows; `fixed` reads the context rules on the session's first
  request only and then grows only by what the session loads or calls (SessionState.sent, noted
  by `SessionState.note_request`).
- Every candidate not sent goes to `Selection.deferred` (progressive's menu, Anthropic's
  defer_loading).
- A missing or malformed section falls back to its default; an unknown mode means `all`; an
  invalid regex in a rule never matches. Agents apply documents they did not validate, and a
  selection that degrades beats an agent that stops.
- A rule's regex runs on RE2 (`google-re2`, the `toolscope-agent[re2]` extra; the server always
  has it) when it is importable: linear time in the message, whatever the pattern, and a pattern
  RE2 cannot compile (back-references, lookarounds) never matches. Without RE2 it runs on
  Python's backtracking `re` over the first `FALLBACK_TEXT_LIMIT` characters of the message
  only, which bounds what a pattern that backtracks polynomially can cost (publishing refuses
  the shapes that backtrack, so only older or hand-made documents carry them). Keywords always
  run on `re` over the whole message: they are escaped literals, linear by construction.

`select_tools` never mutates the state: the agent calls `SessionState.observe` after the model
answers, so what a turn loads or activates joins from the next `select_tools`.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress
from operator import itemgetter, not_
from typing import Any, Protocol, TypeVar

from toolscope_agent.engine.bytecache import ByteDict
from toolscope_agent.engine.render import SEARCH_TOOL, SEARCH_TOOL_NAME, menu_from_names
from toolscope_agent.engine.schemas import normalize_tool

try:
    import re2  # type: ignore[import-untyped, import-not-found, unused-ignore]  # no type hints
except ImportError:  # the SDK's plain install: rules fall back to `re` on a bounded text
    re2 = None

MODES: tuple[str, ...] = ("all", "context_rules", "progressive", "tool_search")
PER_REQUEST, APPEND_ONLY, FIXED = "per_request", "append_only", "fixed"
TOOL_LISTS: tuple[str, ...] = (PER_REQUEST, APPEND_ONLY, FIXED)
DEFAULT_MODE = "all"
DEFAULT_HINT_PREFIX = "$"
_STATE_FORMAT = 1
_HINT_NAME = r"([A-Za-z0-9_.-]+)"
_CACHE_BYTES = 16 * 1024 * 1024
TASK_MEMORY = 2  # task messages a SessionState keeps: rule_window's largest value
TASK_CHARS = 2_000  # of each, the first characters (rules name what a task is about early)
_V = TypeVar("_V")
# Without RE2, a rule's regex sees this many characters of the message. Python's `re` backtracks:
# a pattern like `\w*\w*!` costs O(n^3) on a text of n characters, and publishing's static check
# refuses the known shapes, but a document the agent did not get from a current server may carry
# one. Task messages name what they are about early, so the start of the text is what rules need.
FALLBACK_TEXT_LIMIT = 1_000
# Which matcher runs context-rule regexes in this process: "re2" (linear time) or "re".
REGEX_ENGINE = "re" if re2 is None else "re2"


class RuleRegex(Protocol):
    """A compiled rule regex, from RE2 or `re`: only `search` is used."""

    def search(self, text: str, /) -> object: ...


# Compiled once per pattern (and once per keyword list): rules are re-applied on every turn.
# None records a pattern that does not compile, so it is not retried either.
# Bounded by bytes (engine/bytecache.py): a compiled program grows with its pattern.
_REGEX_CACHE: ByteDict[str, re.Pattern[str] | None] = ByteDict(_CACHE_BYTES)
_RULE_CACHE: ByteDict[str, RuleRegex | None] = ByteDict(_CACHE_BYTES)
_KEYWORD_CACHE: ByteDict[tuple[str, ...], re.Pattern[str] | None] = ByteDict(_CACHE_BYTES)
_HINT_CACHE: ByteDict[str, re.Pattern[str]] = ByteDict(_CACHE_BYTES)


def _pattern_bytes(pattern: str | tuple[str, ...]) -> int:
    """An estimate of a compiled pattern's weight with its key."""
    text = pattern if isinstance(pattern, str) else "".join(pattern)
    return 40 * len(text) + 2000


def _cached(cache: ByteDict[str, _V], pattern: str, build: Callable[[str], _V]) -> _V:
    """`cache[pattern]`, built (and the cache emptied first when full) on a miss."""
    try:
        return cache[pattern]
    except KeyError:
        pass
    return cache.add(pattern, build(pattern), _pattern_bytes(pattern))


def _compile_re(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern, re.IGNORECASE)
    except (re.error, OverflowError, RecursionError):
        return None


def _compiled(pattern: str) -> re.Pattern[str] | None:
    return _cached(_REGEX_CACHE, pattern, _compile_re)


def _re2_options() -> Any:
    options = re2.Options()
    options.case_sensitive = False
    options.log_errors = False  # a pattern RE2 refuses is an expected outcome, not a log line
    return options


def rule_regex(pattern: str) -> RuleRegex | None:
    """A context rule's regex compiled case-insensitively with RE2 when it is installed, else `re`;
    None when the matcher cannot compile it (such a rule's regex never matches)."""
    return _cached(_RULE_CACHE, pattern, _compile_rule)


def _compile_rule(pattern: str) -> RuleRegex | None:
    if re2 is None:
        return _compiled(pattern)
    try:
        return re2.compile(pattern, _re2_options())  # type: ignore[no-any-return]
    except (re2.error, TypeError, ValueError):
        return None


def rule_regex_matches(pattern: str, message: str) -> bool:
    """Whether a rule's regex finds a match in `message`: in linear time with RE2, else on the
    first FALLBACK_TEXT_LIMIT characters with `re`; False for a pattern that does not compile."""
    compiled = rule_regex(pattern)
    if compiled is None:
        return False
    text = message if re2 is not None else message[:FALLBACK_TEXT_LIMIT]
    return compiled.search(text) is not None


def keyword_pattern(keywords: tuple[str, ...]) -> re.Pattern[str] | None:
    """One regex matching any keyword as a whole word (case-insensitive), or None for no keywords.

    "Whole word" means not preceded or followed by a letter, digit or underscore, so "test"
    matches "fix the test" and "test." but not "latest", "tests" or "test_utils" (no stemming:
    list "tests" too if it should count). Spaces inside a keyword match any run of whitespace.
    """
    cached = _KEYWORD_CACHE.get(keywords)
    if cached is not None or keywords in _KEYWORD_CACHE:
        return cached
    words = [r"\s+".join(re.escape(part) for part in word.split()) for word in keywords if word.strip()]
    pattern = _compiled(r"(?<!\w)(?:" + "|".join(words) + r")(?!\w)") if words else None
    return _KEYWORD_CACHE.add(keywords, pattern, _pattern_bytes(keywords))


def _hint_pattern(prefix: str) -> re.Pattern[str]:
    pattern = _HINT_CACHE.get(prefix)
    if pattern is None:
        pattern = _HINT_CACHE.add(prefix, re.compile(re.escape(prefix) + _HINT_NAME), _pattern_bytes(prefix))
    return pattern


def _append_new(target: list[str], names: Iterable[str]) -> None:
    if len(target) < 32:  # a short list is searched faster than a set of it is built
        for name in names:
            if name not in target:
                target.append(name)
        return
    seen = set(target)
    for name in names:
        if name not in seen:
            seen.add(name)
            target.append(name)


def _names(value: Any) -> list[str]:
    """The strings of a JSON list (others dropped), first occurrence kept; [] for a non-list."""
    if not isinstance(value, list | tuple):
        return []
    return list(dict.fromkeys(item for item in value if isinstance(item, str)))


@dataclass
class SessionState:
    """What the session has learnt about its tools; it grows and never shrinks.

    - loaded: names tool_search returned; they join the selection from the next select_tools.
    - discovered: names the model called; sent again when the policy says `sticky_discovered`.
    - activated: progressive mode's hints (`$name` in the model's text) and calls.
    - turns: model answers observed.
    - tasks: the session's latest TASK_MEMORY distinct task messages (each cut to TASK_CHARS),
      oldest first, as `note_task` saw them: what a policy's `rule_window` reads.
    - sent: under a policy that keeps its list (`tool_list` append_only or fixed), every tool
      sent so far, as `note_request` saw them.

    Lists keep first-seen order without duplicates, so a state serialises the same way on the
    agent and on the server. Names outside the catalog are kept (a later catalog may have them)
    but never selected, since selection intersects with the catalog.
    """

    loaded: list[str] = field(default_factory=list)
    discovered: list[str] = field(default_factory=list)
    activated: list[str] = field(default_factory=list)
    turns: int = 0
    tasks: list[str] = field(default_factory=list)
    sent: list[str] = field(default_factory=list)

    def note_request(self, message: str, selection: Selection) -> None:
        """After selecting for a request: its task (note_task) and, when the policy keeps its
        list, what it sent. The selector, `POST /policy/resolve` and the simulator call it."""
        self.note_task(message)
        if selection.keeps:
            self.note_sent(selection.reasons)

    def note_sent(self, names: Iterable[str]) -> None:
        """Tools a request sent, under a policy that keeps its list (note_request)."""
        _append_new(self.sent, names)

    def note_task(self, message: str) -> None:
        """Remember `message` as the session's current task (a repeat of the latest is not new).
        The selector, `POST /policy/resolve` and the simulator note each request's task after
        selecting for it."""
        text = message[:TASK_CHARS] if isinstance(message, str) else ""
        if text.strip() and (not self.tasks or self.tasks[-1] != text):
            self.tasks.append(text)
            del self.tasks[:-TASK_MEMORY]

    def earlier_tasks(self, message: str, count: int) -> list[str]:
        """The `count` task messages before `message` (not counting a latest one equal to it)."""
        tasks = self.tasks[:-1] if self.tasks and self.tasks[-1] == message[:TASK_CHARS] else self.tasks
        return tasks[-count:] if count > 0 else []

    def observe(self, model_output: str = "", tool_calls: Sequence[Mapping[str, Any]] = (), *,
                hint_prefix: str = DEFAULT_HINT_PREFIX) -> None:
        """Record one model answer: its text and the tool calls it made (with their results).

        A call is {"name", "arguments", "results"?} (an OpenAI {"function": {"name"}} works too).
        Every called name is discovered and activated; `<hint_prefix><name>` in the text
        activates `name` (a trailing "." is taken as punctuation, an empty prefix disables
        hints); a `tool_search` call's `results` (names, or objects with a "name") are loaded.
        """
        called: list[str] = []
        loaded: list[str] = []
        for call in tool_calls:
            name = call.get("name")
            function = call.get("function")  # an OpenAI-shaped call names its tool one level down
            if name is None and isinstance(function, Mapping):
                name = function.get("name")
            if not isinstance(name, str) or not name:
                continue
            called.append(name)
            if name == SEARCH_TOOL_NAME:
                loaded.extend(_result_names(call.get("results")))
        self.record(called, loaded, model_output, hint_prefix=hint_prefix)

    def record(self, called: Sequence[str], loaded: Sequence[str], model_output: str = "", *,
               hint_prefix: str = DEFAULT_HINT_PREFIX) -> None:
        """`observe` with its calls read: the names called, in order, and the names their
        `tool_search` calls returned (the simulator, which knows them, calls this directly)."""
        hinted = _hints(model_output, hint_prefix)
        if called:
            _append_new(self.discovered, called)
        if hinted or called:
            _append_new(self.activated, [*hinted, *called] if hinted else called)
        if loaded:
            _append_new(self.loaded, loaded)
        self.turns += 1

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form; `from_dict` reads it back."""
        return {"format": _STATE_FORMAT, "loaded": list(self.loaded), "discovered": list(self.discovered),
                "activated": list(self.activated), "turns": self.turns, "tasks": list(self.tasks),
                "sent": list(self.sent)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> SessionState:
        """A state from `to_dict`'s output; missing or malformed keys read as empty."""
        data = data if isinstance(data, Mapping) else {}
        turns = data.get("turns")
        tasks = data.get("tasks")
        tasks = [task[:TASK_CHARS] for task in tasks if isinstance(task, str)] if isinstance(tasks, list) else []
        return cls(loaded=_names(data.get("loaded")), discovered=_names(data.get("discovered")),
                   activated=_names(data.get("activated")),
                   turns=turns if isinstance(turns, int) and not isinstance(turns, bool) and turns > 0 else 0,
                   tasks=tasks[-TASK_MEMORY:], sent=_names(data.get("sent")))

    def copy(self) -> SessionState:
        return SessionState(list(self.loaded), list(self.discovered), list(self.activated), self.turns,
                            list(self.tasks), list(self.sent))


def _result_names(results: Any) -> list[str]:
    if not isinstance(results, list | tuple):
        return []
    names = (item.get("name") if isinstance(item, Mapping) else item for item in results)
    return [name for name in names if isinstance(name, str) and name]


def _hints(text: str, prefix: str) -> list[str]:
    if not text or not prefix or prefix not in text:
        return []
    names = (match.rstrip(".") for match in _hint_pattern(prefix).findall(text))
    return [name for name in names if name]


@dataclass(frozen=True)
class Selection:
    """What to send this turn.

    - tools: full definitions to send, in catalog order (the catalog's own mappings: do not
      mutate them).
    - deferred: the other allowed tools, in catalog order: progressive's menu lists them,
      Anthropic's provider search marks them defer_loading.
    - menu: progressive mode's menu text (None in other modes, "" never).
    - mode: the mode applied (an unknown mode is applied, and reported, as "all").
    - reasons: why each sent tool is in, keyed by name in catalog order: "always_on",
      "search_tool", "rule:<name>" (the first matching rule that has it), "activated", "loaded",
      "discovered", "kept" (sent earlier, under a `tool_list` that keeps it) or "all" (first
      that applies, in that order).
    - keeps: the policy keeps its list (`tool_list`): `SessionState.note_request` notes it.
    - allowed: every allowed tool, in catalog order (tools and deferred together): a provider's
      deferred loading renders the list in one order whatever moves between the two.
    """

    tools: list[Mapping[str, Any]]
    deferred: list[Mapping[str, Any]]
    menu: str | None
    mode: str
    reasons: dict[str, str]
    keeps: bool = False
    allowed: list[Mapping[str, Any]] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        """Names of the tools sent in full, in order."""
        return list(self.reasons)


_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class _RuleIndex:
    """Every rule's one-word keywords in one regex, so a message is scanned once however many
    rules there are (a learnt policy has one rule per tool): `words` maps each keyword,
    lowercased, to the positions of the rules that list it; `alone` are the rules with a keyword
    of several words or of punctuation (two such keywords can match at one place), matched one
    by one as before."""

    pattern: re.Pattern[str] | None
    words: Mapping[str, tuple[int, ...]]
    alone: frozenset[int]
    ascii: bool  # every keyword is ASCII
    written: Mapping[str, tuple[int, ...]]
    """Each keyword as written: re's case-insensitive match pairs characters one to one, and
    outside ASCII one text can match keywords that `lower` tells apart (dotted I, long s, the
    Kelvin sign), so there each match is checked against every keyword of its length (compiled
    on the first message that needs it)."""
    _by_length: dict[int, tuple[tuple[re.Pattern[str], tuple[int, ...]], ...]] = field(
        default_factory=dict, compare=False, repr=False)
    _matched: dict[str, frozenset[int]] = field(default_factory=dict, compare=False, repr=False)
    """`matching`'s answers for the messages seen last (a replay asks about each task once per
    candidate policy, and candidates with the same keywords share this index), up to _RUNS_SIZE."""

    def _of_length(self, length: int) -> tuple[tuple[re.Pattern[str], tuple[int, ...]], ...]:
        found = self._by_length.get(length)
        if found is None:
            found = tuple((re.compile(re.escape(word), re.IGNORECASE), positions)
                          for word, positions in self.written.items() if len(word) == length)
            self._by_length[length] = found
        return found

    def matching(self, message: str) -> frozenset[int]:
        """The positions of the rules whose one-word keywords occur in `message` as whole words."""
        found = self._matched.get(message)
        if found is None:
            if len(self._matched) >= _RUNS_SIZE:
                self._matched.clear()
            found = self._matched[message] = frozenset(self._match(message))
        return found

    def _match(self, message: str) -> set[int]:
        found: set[int] = set()
        if self.pattern is None:
            return found
        if self.ascii and message.isascii():
            # ASCII keywords in ASCII text: a whole-word match is a run of word characters equal
            # to the keyword but for case, so a dict lookup per run is what the regex would find.
            words = self.words
            for run in _runs(message):
                rules = words.get(run)
                if rules is not None:
                    found.update(rules)
            return found
        for match in self.pattern.finditer(message):
            text = match.group(0)
            for keyword, positions in self._of_length(len(text)):
                if keyword.fullmatch(text):
                    found.update(positions)
        return found


_RUNS: dict[str, frozenset[str]] = {}
_RUNS_SIZE = 20_000


def _runs(message: str) -> frozenset[str]:
    """An ASCII message's distinct runs of word characters, lowercased: kept for the messages seen
    last (a replay matches each task against every candidate policy), up to _RUNS_SIZE of them."""
    found = _RUNS.get(message)
    if found is None:
        if len(_RUNS) >= _RUNS_SIZE:
            _RUNS.clear()
        found = _RUNS[message] = frozenset(run.lower() for run in _WORD.findall(message))
    return found


_RULE_INDEX_CACHE: ByteDict[tuple[Any, ...], _RuleIndex] = ByteDict(_CACHE_BYTES)


def _rule_index(rules: list[Any]) -> _RuleIndex | None:
    """The rules' keyword index, cached by their keyword lists; None when a list is not hashable
    (odd documents take the rule-by-rule path)."""
    try:
        key = tuple(tuple(rule["keywords"]) if isinstance(rule, Mapping)
                    and isinstance(rule.get("keywords"), list | tuple) else None for rule in rules)
        return _RULE_INDEX_CACHE[key]
    except KeyError:
        pass
    except TypeError:
        return None
    written: dict[str, list[int]] = {}
    alone = set()
    for position, keywords in enumerate(key):
        for word in keywords or ():
            if not isinstance(word, str):
                continue
            parts = word.split()
            if len(parts) == 1 and _WORD.fullmatch(parts[0]):
                written.setdefault(parts[0], []).append(position)
            elif parts:
                alone.add(position)
    words: dict[str, list[int]] = {}
    for word, positions in written.items():
        words.setdefault(word.lower(), []).extend(positions)
    alternatives = "|".join(re.escape(word) for word in sorted(written))
    pattern = _compiled(r"(?<!\w)(?:" + alternatives + r")(?!\w)") if written else None
    index = _RuleIndex(pattern, {word: tuple(positions) for word, positions in words.items()}, frozenset(alone),
                       all(word.isascii() for word in written),
                       {word: tuple(positions) for word, positions in written.items()})
    # The alternation's compiled program, the two maps, and the keyword patterns a non-ASCII
    # message compiles: about three times a single keyword pattern's estimate.
    return _RULE_INDEX_CACHE.add(key, index, 3 * _pattern_bytes(tuple(written)) + 100 * len(written))


def _checked_matches(rule: Mapping[str, Any], alone: bool, texts: Sequence[str]) -> bool:
    """Whether a rule the index cannot decide matches one of `texts`: all of it (`alone`: a
    keyword of several words or punctuation), else its regex (its keywords are the index's)."""
    if alone:
        return any(_rule_matches(rule, text) for text in texts)
    regex = rule.get("regex")
    return isinstance(regex, str) and bool(regex) and any(rule_regex_matches(regex, text) for text in texts)


def _rule_matches(rule: Mapping[str, Any], message: str) -> bool:
    keywords = rule.get("keywords")
    if isinstance(keywords, list | tuple) and keywords:
        try:  # the common case, one dict lookup; odd keyword lists take the filtering path
            pattern = _KEYWORD_CACHE[tuple(keywords)]
        except (KeyError, TypeError):
            pattern = keyword_pattern(tuple(word for word in keywords if isinstance(word, str)))
        if pattern is not None and pattern.search(message):
            return True
    regex = rule.get("regex")
    return isinstance(regex, str) and bool(regex) and rule_regex_matches(regex, message)


@dataclass(frozen=True)
class SelectionSettings:
    """The `selection` section of a policy with defaults filled in.

    Rules and groups stay as the document has them and are read only when a rule matches:
    parsing a large policy eagerly on every turn would cost more than applying it.
    """

    mode: str
    allowed: frozenset[str] | None
    always_on: list[Any]
    groups: Mapping[str, Any]
    rules: list[Any]
    hint_prefix: str
    sticky: bool
    rule_window: int = 1
    index: _RuleIndex | None = None
    """The rules' one-word keywords in one pass (None: the rules are matched one by one)."""
    after: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """With an index: each tool named in a rule's `after_tools`, the positions of those rules."""
    checked: tuple[int, ...] = ()
    """With an index: the rules the index cannot decide alone (a keyword of several words or of
    punctuation, or a regex), matched one by one."""
    tool_list: str = PER_REQUEST


def _section(policy: Mapping[str, Any]) -> Mapping[str, Any]:
    """The `selection` section of a full document, or the policy itself when it is a bare section."""
    section = policy.get("selection")
    if isinstance(section, Mapping):
        return section
    return policy if "mode" in policy else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else list(value) if isinstance(value, tuple) else []


def policy_settings(policy: Mapping[str, Any]) -> SelectionSettings:
    """The selection settings of a policy document (or of a bare `selection` section)."""
    section = _section(policy if isinstance(policy, Mapping) else {})
    mode = section.get("mode")
    allowed = section.get("allowed")
    groups = section.get("groups")
    progressive = section.get("progressive")
    prefix = progressive.get("hint_prefix") if isinstance(progressive, Mapping) else None
    sticky = section.get("sticky_discovered")
    window = section.get("rule_window")
    tool_list = section.get("tool_list")
    rules = _list(section.get("context_rules"))
    index = _rule_index(rules) if mode == "context_rules" and rules else None
    after: dict[str, list[int]] = {}
    checked: list[int] = []
    if index is not None:
        for position, rule in enumerate(rules):
            if not isinstance(rule, Mapping):
                continue
            names = rule.get("after_tools")
            for name in dict.fromkeys(names) if isinstance(names, list | tuple) else ():
                if isinstance(name, str):
                    after.setdefault(name, []).append(position)
            regex = rule.get("regex")
            if position in index.alone or (isinstance(regex, str) and regex):
                checked.append(position)
    return SelectionSettings(
        mode=mode if mode in MODES else DEFAULT_MODE,
        allowed=frozenset(_names(allowed)) if isinstance(allowed, list | tuple) else None,
        always_on=_list(section.get("always_on")),
        groups=groups if isinstance(groups, Mapping) else {},
        rules=rules,
        hint_prefix=prefix if isinstance(prefix, str) else DEFAULT_HINT_PREFIX,
        sticky=sticky if isinstance(sticky, bool) else True,
        rule_window=min(window, TASK_MEMORY) if isinstance(window, int) and not isinstance(window, bool)
        and window > 1 else 1,
        index=index, after={name: tuple(positions) for name, positions in after.items()}, checked=tuple(checked),
        tool_list=tool_list if tool_list in TOOL_LISTS and mode in MODES and mode != "all" else PER_REQUEST,
    )


def _add(wanted: dict[str, str], names: Iterable[Any], reason: str) -> None:
    for name in names:
        if isinstance(name, str):
            wanted.setdefault(name, reason)


def _wanted(settings: SelectionSettings, state: SessionState, message: str) -> dict[str, str]:
    """Names the mode would send, each with its reason (the first reason wins)."""
    wanted: dict[str, str] = {}
    if settings.mode == "tool_search":
        wanted[SEARCH_TOOL_NAME] = "search_tool"
    _add(wanted, settings.always_on, "always_on")
    if settings.mode == "all":
        return wanted
    # A fixed list reads the rules on the session's first request only.
    rules_read = not (settings.tool_list == FIXED and state.sent)
    if settings.mode == "context_rules" and rules_read and (message or state.discovered):
        # Each task message is matched on its own (a `^` anchors at its start, and no phrase spans two).
        texts = [*state.earlier_tasks(message, settings.rule_window - 1), message] if message else []
        index = settings.index
        called = frozenset(state.discovered)
        if index is not None:
            # Only the rules that match are visited: a learnt policy has a rule per tool.
            hits: set[int] = set()
            for text in texts:
                hits |= index.matching(text)
            for position in settings.checked:
                if position not in hits and _checked_matches(settings.rules[position], position in index.alone,
                                                             texts):
                    hits.add(position)
            for tool in called:
                hits.update(settings.after.get(tool, ()))
            for position in sorted(hits):
                _send_rule(wanted, settings, settings.rules[position])
        for rule in settings.rules if index is None else ():
            if not isinstance(rule, Mapping):
                continue
            hit = any(_rule_matches(rule, text) for text in texts)
            if not hit and called:
                after = rule.get("after_tools")
                hit = isinstance(after, list | tuple) and any(isinstance(name, str) and name in called
                                                              for name in after)
            if hit:
                _send_rule(wanted, settings, rule)
    if settings.mode == "progressive":
        _add(wanted, state.activated, "activated")
    _add(wanted, state.loaded, "loaded")
    if settings.sticky:
        _add(wanted, state.discovered, "discovered")
    if settings.tool_list != PER_REQUEST:
        _add(wanted, state.sent, "kept")
    return wanted


def _send_rule(wanted: dict[str, str], settings: SelectionSettings, rule: Mapping[str, Any]) -> None:
    """A matched rule's groups' tools, each with the rule as its reason (the first reason wins)."""
    name = rule.get("name")
    reason = f"rule:{name if isinstance(name, str) else ''}"
    for group in _list(rule.get("groups")):
        members = settings.groups.get(group) if isinstance(group, str) else None
        _add(wanted, _list(members), reason)


_GET_NAME = itemgetter("name")


def _first_allowed(names: list[Any], allowed: frozenset[str] | None) -> list[bool]:
    """Per entry: has a string name, is allowed, and is the first entry with that name."""
    seen: set[str] = set()
    keep = []
    for name in names:
        ok = isinstance(name, str) and name not in seen and (allowed is None or name in allowed)
        if ok:
            seen.add(name)
        keep.append(ok)
    return keep


def candidates(catalog: Sequence[Mapping[str, Any]], allowed: frozenset[str] | None,
               ) -> tuple[list[str], Sequence[Mapping[str, Any]]]:
    """The names of `catalog ∩ allowed` in catalog order, and their definitions (parallel lists).

    An entry without a string name is ignored; of two entries with one name the first counts.
    This runs on every turn over catalogs of hundreds of tools, so the common case (distinct
    string names) takes only C-level passes: `"".join` proves every name a string, a set proves
    them distinct.
    """
    try:
        names: list[Any] = list(map(_GET_NAME, catalog))
    except (KeyError, TypeError, IndexError):
        names = [tool.get("name") for tool in catalog]
    try:
        "".join(names)
        clean = len(set(names)) == len(names)
    except TypeError:
        clean = False
    if clean and allowed is None:
        return names, catalog
    keep = [name in allowed for name in names] if clean and allowed is not None else _first_allowed(names, allowed)
    return list(compress(names, keep)), list(compress(catalog, keep))


def policy_searches(policy: Mapping[str, Any]) -> bool:
    """Whether `policy` sends a search tool: `tool_search` mode, or `tool_search` always on."""
    section = _section(policy if isinstance(policy, Mapping) else {})
    return section.get("mode") == "tool_search" or SEARCH_TOOL_NAME in _list(section.get("always_on"))


def search_tool_added(catalog: Sequence[Mapping[str, Any]], policy: Mapping[str, Any], *,
                      has_search_tool: bool | None = None) -> Sequence[Mapping[str, Any]]:
    """`catalog` as a policy that searches selects from: with toolscope's own `tool_search`
    (render.SEARCH_TOOL, normalized) appended when the catalog has none of its own, so a
    `tool_search` policy, or one whose always-on set names `tool_search` (context rules with a
    search to fall back on), always sends a way to search. The SDK's selector, the MCP gateway
    (through it) and `POST /api/v1/policy/resolve` add it here. Other policies get `catalog`
    itself. `has_search_tool` spares the scan for a caller that knows."""
    if not policy_searches(policy):
        return catalog
    if has_search_tool is None:
        has_search_tool = any(isinstance(tool, Mapping) and tool.get("name") == SEARCH_TOOL_NAME for tool in catalog)
    return catalog if has_search_tool else [*catalog, _SEARCH_TOOL]


_SEARCH_TOOL = normalize_tool(copy.deepcopy(SEARCH_TOOL))  # read, never changed: rendering copies


def select_tools(catalog: Sequence[Mapping[str, Any]], policy: Mapping[str, Any], state: SessionState,
                 message: str = "", *, settings: SelectionSettings | None = None) -> Selection:
    """The tools to send for `message` under `policy`, given what the session learnt so far.

    O(len(catalog)) in C-level passes, plus the rules (regexes compiled once per process, every
    rule's one-word keywords matched in one pass); the progressive menu is cached per catalog
    content. The state is read, never written. `settings`: `policy_settings(policy)`, for a
    caller that applies one policy many times (the simulator) and so reads it once.
    """
    settings = settings if settings is not None else policy_settings(policy)
    wanted = _wanted(settings, state, message)
    names, tools = candidates(catalog, settings.allowed)
    if settings.mode == "all":
        reasons = dict.fromkeys(names, "all")
        for name, reason in wanted.items():
            if name in reasons:
                reasons[name] = reason
        return Selection(tools=list(tools), deferred=[], menu=None, mode="all", reasons=reasons, allowed=list(tools))
    sent = [name in wanted for name in names]
    reasons = {name: wanted[name] for name in compress(names, sent)}
    menu = None
    if settings.mode == "progressive":
        descriptions = [tool.get("description") for tool in tools]
        menu = menu_from_names(names, descriptions, reasons, hint_prefix=settings.hint_prefix) or None
    return Selection(tools=list(compress(tools, sent)), deferred=list(compress(tools, map(not_, sent))), menu=menu,
                     mode=settings.mode, reasons=reasons, keeps=settings.tool_list != PER_REQUEST,
                     allowed=list(tools))
