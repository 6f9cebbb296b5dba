"""Learned search history: what a project's agents asked before they called each tool.

No peer has this: a retriever knows only the catalog, toolscope also knows which words led to
which tool in the project's recorded sessions. `learn_history` turns sessions into a bounded
`{tool name: [texts]}` map that the ranker indexes as each tool's `history` field
(engine/ranking.py), so a tool whose name and description say nothing ("x7: internal helper")
is found by the words the project's users actually use for it.

What links a text to a tool, per session:

- the task message of each call's request (the latest instruction before it), to that call's
  tool; a session recorded with one task message (`call_tasks` not given) links it to every
  tool the session called;
- each `tool_search` query, to the tools called after it and before the next `tool_search`
  call (the calls the search led to).

`tool_search` itself is never a target. Bounds keep the shipped map small whatever the traffic:
a text is cut to MAX_TEXT_CHARS, a tool keeps its MAX_TEXTS_PER_TOOL most recent distinct texts
(the most recent sessions come first), and tools beyond MAX_TOOLS, or beyond MAX_TOTAL_CHARS of
text in all, are left out, the least called first. The result depends only on the input order,
never on dict or set iteration.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolscope_agent.engine.render import SEARCH_TOOL_NAME as SEARCH_TOOL

MAX_TEXT_CHARS = 300
MAX_TEXTS_PER_TOOL = 8
MAX_TOOLS = 2000
# The whole map's text, in characters: it is served with every policy poll that changed.
MAX_TOTAL_CHARS = 256_000


@dataclass(frozen=True)
class RecordedSession:
    """One session as history needs it: its task message and its calls in order, each a
    (tool name, arguments) pair. `call_tasks`, when given, is the task of each call's request, in
    the order of `calls`; a call without one (a blank text, or beyond the list) gets
    `task_message`."""

    task_message: str = ""
    calls: Sequence[tuple[str, Mapping[str, Any]]] = field(default_factory=tuple)
    call_tasks: Sequence[str] = field(default_factory=tuple)


def learn_history(sessions: Iterable[RecordedSession], *, max_texts: int = MAX_TEXTS_PER_TOOL,
                  max_tools: int = MAX_TOOLS, max_chars: int = MAX_TOTAL_CHARS) -> dict[str, list[str]]:
    """`{tool: [texts]}` from sessions given newest first (see the module docstring)."""
    texts: dict[str, dict[str, None]] = {}
    calls: dict[str, int] = {}
    for session in sessions:
        for tool, text in _links(session):
            calls[tool] = calls.get(tool, 0) + 1
            kept = texts.setdefault(tool, {})
            if text and len(kept) < max_texts:
                kept.setdefault(text[:MAX_TEXT_CHARS], None)
    chosen: list[str] = []
    budget = max_chars
    for tool in sorted(texts, key=lambda tool: (-calls[tool], tool))[:max_tools]:
        size = sum(map(len, texts[tool]))
        if texts[tool] and size <= budget:
            chosen.append(tool)
            budget -= size
    return {tool: list(texts[tool]) for tool in sorted(chosen)}


def _links(session: RecordedSession) -> Iterable[tuple[str, str]]:
    """(tool, text) for each text that led to each call of the session."""
    default = _clean(session.task_message)
    query = ""
    for position, (name, arguments) in enumerate(session.calls):
        if name == SEARCH_TOOL:
            query = _clean(arguments.get("query") if isinstance(arguments, Mapping) else "")
            continue
        own = _clean(session.call_tasks[position]) if position < len(session.call_tasks) else ""
        yield name, own or default
        if query:
            yield name, query


def _clean(text: Any) -> str:
    return " ".join(text.split()) if isinstance(text, str) else ""
