"""What recorded sessions teach a recommendation (engine/recommend.py): how to split them by task
for validation, and which task words and earlier calls predict each tool, per request.

- `grouped_split`: fit and held-out sessions by task (a session's first instruction), so no task
  is learnt on one side and scored on the other; a time split when the tasks are too few.
- `task_examples`: one example per distinct task text (spacing folded), each request working on
  the latest instruction at or before it, its targets the tools first called under it.
- `word_associations`, `call_associations`: the (word, tool) and (earlier tool, tool) pairs a
  one-sided Fisher exact test (scipy's hypergeometric tail) finds significant under
  Benjamini-Hochberg over every pair; `request_rules` turns them into one context rule per tool.

scipy and numpy are imported only when statistics are computed: the server has them, an agent
installs them with the SDK's `recommend` extra, and applying a policy never needs them.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolscope_agent.engine.selection import SessionState
from toolscope_agent.engine.simulation import ReplaySession
from toolscope_agent.engine.text import STOPWORDS

FDR_ALPHA = 0.05
MIN_SPLIT_SHARE = 0.25
_RULE_WORD = re.compile(r"\w+")  # a keyword matches a whole run of word characters (selection.keyword_pattern)


def grouped_split(sessions: Sequence[ReplaySession]) -> tuple[list[ReplaySession], list[ReplaySession]]:
    """(fit, held_out) of `sessions` (oldest first), split by task: a session's task is its
    first instruction (whitespace and case folded); every session of a task goes to the side of
    that task's oldest session, the older tasks filling about half of the sessions. When the
    tasks are too few for that (a side under MIN_SPLIT_SHARE of the sessions: an agent that
    repeats one or two jobs), the split is by time, the older half first."""
    tasks = [task_key(session) for session in sessions]
    first: dict[str, int] = {}
    for index, task in enumerate(tasks):
        first.setdefault(task, index)
    sizes = Counter(tasks)
    fitted: set[str] = set()
    count = 0
    for task, _ in sorted(first.items(), key=lambda item: item[1]):
        if count >= len(sessions) / 2:
            break
        fitted.add(task)
        count += sizes[task]
    fit = [session for session, task in zip(sessions, tasks, strict=True) if task in fitted]
    held_out = [session for session, task in zip(sessions, tasks, strict=True) if task not in fitted]
    if min(len(fit), len(held_out)) < len(sessions) * MIN_SPLIT_SHARE:  # few tasks, repeated: by time
        half = len(sessions) // 2
        return list(sessions[:half]), list(sessions[half:])
    return fit, held_out


def held_out_sample(sessions: Sequence[ReplaySession], limit: int) -> list[ReplaySession]:
    """At most `limit` of `sessions` (held-out ones, oldest first), a stratified sample by task
    (`task_key`): each task gets its share of the limit (at least one session), and its sessions
    are taken evenly spaced in time, so the sample keeps the tasks' weights and every task is in
    it. With more tasks than the limit, every task cannot be: the sessions, ordered by task then
    time, are taken evenly spaced. In the sessions' order. A task's sessions miss together
    (recommend.hard_miss_error): past a few hundred sessions, more sessions of the same tasks add
    little to the evidence."""
    if len(sessions) <= limit:
        return list(sessions)
    by_task: dict[str, list[int]] = defaultdict(list)
    for index, session in enumerate(sessions):
        by_task[task_key(session)].append(index)
    total = len(sessions)
    quotas = {task: max(1, len(indices) * limit // total) for task, indices in by_task.items()}
    if sum(quotas.values()) > limit:  # more tasks than room: systematic over (task, time)
        ordered = [index for indices in by_task.values() for index in indices]
        taken = [ordered[(2 * position + 1) * total // (2 * limit)] for position in range(limit)]
    else:  # the rest of the room by largest remainder, ties to the older task
        share = {task: len(indices) * limit / total - quotas[task] for task, indices in by_task.items()}
        for task in sorted(share, key=lambda task: -share[task])[:limit - sum(quotas.values())]:
            quotas[task] += 1
        taken = [indices[(2 * position + 1) * len(indices) // (2 * quotas[task])]
                 for task, indices in by_task.items() for position in range(min(quotas[task], len(indices)))]
    return [sessions[index] for index in sorted(taken)]


def task_key(session: ReplaySession) -> str:
    """The session's task as `grouped_split` groups sessions: its first instruction, whitespace
    and case folded (a session with none is a task of its own)."""
    message = next((turn.message for turn in session.turns if turn.message.strip()), "")
    return " ".join(message.lower().split()) or f"\x00{session.key}"  # no task: a group of its own


@dataclass(frozen=True)
class TaskExample:
    """A distinct task text, its rule words, and the tools first called while it was the task."""

    text: str
    words: frozenset[str]
    targets: frozenset[str]


def rule_words(text: str) -> frozenset[str]:
    """The words of `text` a rule keyword can match (whole runs of word characters, lowercase),
    without stopwords, numbers and words under three characters."""
    return frozenset(word for word in _RULE_WORD.findall(text.lower())
                     if len(word) > 2 and not word.isdigit() and word not in STOPWORDS)


def task_examples(sessions: Sequence[ReplaySession], *, window: int = 1) -> list[TaskExample]:
    """One example per distinct task text: each request works on the latest instruction at or
    before it (as the simulator replays it), read with the `window - 1` instructions before that
    (as a policy's `rule_window` reads them); the tools a session calls for the first time while
    a task is current are that task's targets, over every session that had the task."""
    targets: dict[str, set[str]] = {}
    for session in sessions:
        called: set[str] = set()
        state = SessionState()
        task = ""
        for turn in session.turns:
            task = turn.message or task
            text = "\n".join([*state.earlier_tasks(task, window - 1), task]) if window > 1 else task
            state.note_task(task)
            found = targets.setdefault(" ".join(text.split()), set())
            for call in turn.calls:
                if call.name not in called:
                    called.add(call.name)
                    found.add(call.name)
    return [TaskExample(text, rule_words(text), frozenset(tools)) for text, tools in targets.items() if text.strip()]


@dataclass(frozen=True)
class Association:
    """A feature and a tool it predicts: of `tasks` distinct tasks with the feature, `hits` used
    the tool. `kind` "word": the feature is a word of the task; "after": it is a tool called
    earlier in the session, and a hit is the tool first called after it."""

    tool: str
    feature: str
    tasks: int
    hits: int
    kind: str = "word"

    @property
    def precision(self) -> float:
        return self.hits / self.tasks


def _significant(together: Counter[tuple[str, str]], with_feature: Counter[str], with_tool: Counter[str],
                 population: int, kind: str, alpha: float, tests: int) -> list[Association]:
    """The (feature, tool) pairs of `together` that Benjamini-Hochberg accepts at `alpha` over
    `tests` hypotheses (every feature with every tool: a pair never seen together is a test too,
    its p-value 1), each tested with the one-sided Fisher exact test: P(X >= hits) for X
    hypergeometric, the feature's tasks drawn from `population` tasks of which the tool's are
    successes."""
    import numpy as np  # the server's and the `recommend` extra's: agents never learn rules
    from scipy.stats import hypergeom  # type: ignore[import-untyped]

    if not together:
        return []
    pairs = sorted(together)
    hits = np.array([together[pair] for pair in pairs])
    tasks = np.array([with_feature[feature] for feature, _ in pairs])
    used = np.array([with_tool[tool] for _, tool in pairs])
    p_values = hypergeom.sf(hits - 1, population, used, tasks)
    # Benjamini-Hochberg step-up over all `tests`: the pairs not listed have p = 1 and rank last,
    # so they never lower a listed pair's threshold (k / tests * alpha for the k-th smallest).
    order = np.argsort(p_values, kind="stable")
    ranks = np.arange(1, len(order) + 1)
    below = p_values[order] <= ranks / max(tests, len(order)) * alpha
    cut = int(ranks[below].max()) if below.any() else 0
    accepted = np.zeros(len(order), dtype=bool)
    accepted[order[:cut]] = True
    return [Association(tool, feature, int(n), int(k), kind) for (feature, tool), n, k, ok
            in zip(pairs, tasks, hits, accepted, strict=True) if ok]


def word_associations(examples: Sequence[TaskExample], *, known: set[str] | None = None,
                      alpha: float = FDR_ALPHA) -> list[Association]:
    """The (word, tool) pairs whose co-occurrence in `examples` is significant (`_significant`:
    one test per word and tool, Benjamini-Hochberg over all of them). Only tools in `known` (when
    given) are targets."""
    with_word: Counter[str] = Counter()
    with_tool: Counter[str] = Counter()
    together: Counter[tuple[str, str]] = Counter()
    for example in examples:
        tools = [tool for tool in example.targets if known is None or tool in known]
        with_word.update(example.words)
        with_tool.update(tools)
        together.update((word, tool) for word in example.words for tool in tools)
    return _significant(together, with_word, with_tool, len(examples), "word", alpha,
                        tests=len(with_word) * len(with_tool))


def call_associations(sessions: Sequence[ReplaySession], *, known: set[str] | None = None,
                      alpha: float = FDR_ALPHA) -> list[Association]:
    """The (earlier tool, tool) pairs where calling the first significantly predicts calling the
    second for the first time afterwards, per distinct task (a session's first instruction; its
    oldest session counts): groups keyed by the tools already called (an agent that called `cd`
    will call `ls`). Tested as `word_associations` are; only tools in `known` (when given)."""
    with_earlier: Counter[str] = Counter()
    with_tool: Counter[str] = Counter()
    together: Counter[tuple[str, str]] = Counter()
    seen: set[str] = set()
    for session in sessions:
        task = task_key(session)
        if task in seen:
            continue
        seen.add(task)
        first_turn: dict[str, int] = {}
        for index, turn in enumerate(session.turns):
            for call in turn.calls:
                if known is None or call.name in known:
                    first_turn.setdefault(call.name, index)
        with_earlier.update(first_turn.keys())
        with_tool.update(first_turn.keys())
        # Only a call of an earlier request can key a rule: selection happens before a request's calls.
        together.update((earlier, later) for later, at in first_turn.items()
                        for earlier, before in first_turn.items() if before < at)
    return _significant(together, with_earlier, with_tool, len(seen), "after", alpha,
                        tests=len(with_earlier) * max(0, len(with_tool) - 1))


def request_rules(associations: Sequence[Association], *, precision: float,
                  ) -> tuple[dict[str, list[str]], list[dict[str, Any]]]:
    """(groups, context_rules): per tool, a one-tool group and a rule sending it when any of its
    associated words with at least `precision` appears in the task, or (`after_tools`) once any
    of its associated earlier tools has been called; tools by name."""
    keywords: dict[str, list[str]] = defaultdict(list)
    after: dict[str, list[str]] = defaultdict(list)
    for association in associations:
        if association.precision >= precision:
            (after if association.kind == "after" else keywords)[association.tool].append(association.feature)
    groups: dict[str, list[str]] = {}
    rules = []
    for tool in sorted(keywords.keys() | after.keys()):
        group = _group_name(tool, groups)
        groups[group] = [tool]
        rule: dict[str, Any] = {"name": f"learnt: {tool}"[:100], "keywords": sorted(keywords[tool]), "regex": None,
                                "groups": [group]}
        if after[tool]:
            rule["after_tools"] = sorted(after[tool])
        rules.append(rule)
    return groups, rules


def _group_name(tool: str, taken: Mapping[str, Any]) -> str:
    """A slug (a group's name is one) naming `tool`, unique among `taken`."""
    base = "tool-" + (re.sub(r"[^A-Za-z0-9_-]+", "-", tool).strip("-") or "x")[:54]
    name, number = base, 1
    while name in taken:
        number += 1
        name = f"{base}-{number}"
    return name
