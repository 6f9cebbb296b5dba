"""What a recommendation learns per session (engine/recommend.py's candidates): tools ranked by the
share of sessions calling them, groups of tools called together, a rule per group from the
task words of the sessions that used it, and compaction rules for large outputs. The
per-request rules, statistics and the split by task are in engine/learning.py.

- **groups**: two tools, each called in at most GROUP_MAX_SHARE of the sessions (a tool nearly
  every session calls belongs in the always-on set), whose calling sessions overlap with a
  Jaccard index of at least GROUP_JACCARD join one group (connected components);
- **rules**: a group's keywords are the task-message words (each in at least RULE_SUPPORT
  sessions) after which the group is used in at least RULE_PRECISION of those sessions, best
  first, until they cover RULE_COVERAGE of the sessions that used the group;
- **compaction**: a tool whose outputs' 95th percentile passes COMPACT_ABOVE tokens gets a
  head_tail rule at COMPACT_TO tokens.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from toolscope_agent.engine.render import SEARCH_TOOL_NAME
from toolscope_agent.engine.simulation import ReplaySession
from toolscope_agent.engine.text import STOPWORDS, words

GROUP_JACCARD = 0.5
GROUP_MAX_SHARE = 0.5
RULE_SUPPORT = 3
RULE_PRECISION = 0.3
RULE_COVERAGE = 0.95
COMPACT_ABOVE = 4000
COMPACT_TO = 2000


def called_tools(session: ReplaySession) -> set[str]:
    return {call.name for turn in session.turns for call in turn.calls}


def by_coverage(fit: Sequence[ReplaySession], catalog: set[str]) -> list[str]:
    """Catalog tools by the share of fit sessions calling them, then by name."""
    sessions = Counter(name for session in fit for name in called_tools(session) if name in catalog)
    return [name for name, _ in sorted(sessions.items(), key=lambda item: (-item[1], item[0]))
            if name != SEARCH_TOOL_NAME]


def session_groups(fit: Sequence[ReplaySession], ranked: list[str]) -> dict[str, list[str]]:
    """Connected components of tools whose calling sessions overlap (Jaccard >= GROUP_JACCARD)."""
    sessions: dict[str, set[int]] = defaultdict(set)
    for index, session in enumerate(fit):
        for name in called_tools(session):
            sessions[name].add(index)
    ranked = [name for name in ranked if len(sessions[name]) <= GROUP_MAX_SHARE * len(fit)]
    parent = {name: name for name in ranked}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for i, first in enumerate(ranked):
        for second in ranked[i + 1:]:
            a, b = sessions[first], sessions[second]
            if a and b and len(a & b) / len(a | b) >= GROUP_JACCARD:
                parent[root(second)] = root(first)
    components: dict[str, list[str]] = defaultdict(list)
    for name in ranked:
        components[root(name)].append(name)
    return {f"group_{index + 1}": sorted(members) for index, members in enumerate(components.values())}


def session_rules(fit: Sequence[ReplaySession], groups: Mapping[str, list[str]]) -> list[dict[str, Any]]:
    """A rule per group: the task-message words after which the group is used (see the module
    docstring), as whole lowercase words, as a rule's keywords match: not stems."""
    seen = [{word for turn in session.turns for word in words(turn.message)
             if len(word) > 2 and not word.isdigit() and word not in STOPWORDS} for session in fit]
    called = [called_tools(session) for session in fit]
    with_word: Counter[str] = Counter(word for words_seen in seen for word in words_seen)
    rules = []
    for group, members in groups.items():
        used = [bool(calls & set(members)) for calls in called]
        used_with_word: Counter[str] = Counter(word for words_seen, hit in zip(seen, used, strict=True) if hit
                                               for word in words_seen)
        precise = sorted((word for word, count in with_word.items()
                          if count >= RULE_SUPPORT and used_with_word[word] / count >= RULE_PRECISION),
                         key=lambda word: (-used_with_word[word] / with_word[word], -used_with_word[word], word))
        keywords: list[str] = []
        covered: set[int] = set()
        needed = {i for i, hit in enumerate(used) if hit}
        for word in precise:
            if len(covered) >= RULE_COVERAGE * len(needed) or len(keywords) == 8:
                break
            gained = {i for i in needed if word in seen[i]} - covered
            if gained:
                keywords.append(word)
                covered |= gained
        if keywords:
            rules.append({"name": group, "keywords": sorted(keywords), "regex": None, "groups": [group]})
    return rules


def learnt_session_rules(fit: Sequence[ReplaySession], ranked: list[str]) -> tuple[dict[str, list[str]],
                                                                           list[dict[str, Any]]]:
    """Groups and per-session rules (`session_groups`, `session_rules`) learnt on `fit`."""
    groups = session_groups(fit, by_coverage(fit, set(ranked)))
    return groups, session_rules(fit, groups)


def compaction_rules(fit: Sequence[ReplaySession]) -> list[dict[str, Any]]:
    sizes: dict[str, list[int]] = defaultdict(list)
    for session in fit:
        for turn in session.turns:
            for call in turn.calls:
                if call.output_tokens is not None:
                    sizes[call.name].append(call.output_tokens)
    rules = []
    for name in sorted(sizes):
        values = sorted(sizes[name])
        if values[min(len(values) - 1, int(0.95 * len(values)))] > COMPACT_ABOVE:
            rules.append({"tools": name, "max_tokens": COMPACT_TO, "strategy": "head_tail"})
    return rules
