"""Whole demo sessions: pure and deterministic for a (seed, anchor) pair, with no database access.

Tool use follows the shape seen in real coding agents: a few tools (read_file, bash, grep,
edit_file) take most calls, every tool of the catalog is advertised on every turn, and a tail of
tools is never called at all.

Most sessions last 3 to 15 turns and use a tenth of the context window. A few percent are long:
the agent pages through a module too big to read at once until its context is 82-98% full,
which is what the near-window flags and the budget chart's window line are for.
"""

from __future__ import annotations

import json
import random
import string
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from toolscope.telemetry.demo import failures
from toolscope.telemetry.demo.calls import LOCAL_BUILDERS, Builder, CallResult
from toolscope.telemetry.demo.calls_mcp import MCP_BUILDERS
from toolscope.telemetry.demo.calls_remote import REMOTE_BUILDERS
from toolscope.telemetry.demo.catalog import CATALOG, TOOLS_BY_NAME
from toolscope.telemetry.demo.tasks import KINDS, LEGACY_KIND, SessionState, legacy_task, task_pick

BUILDERS: dict[str, Builder] = {**LOCAL_BUILDERS, **REMOTE_BUILDERS, **MCP_BUILDERS}
# Every tool without a builder is advertised and never called: the waste the dashboard shows first.
NEVER_CALLED: tuple[str, ...] = tuple(t.name for t in CATALOG if t.name not in BUILDERS)

_BASE_WEIGHTS: dict[str, float] = {
    "read_file": 30, "bash": 18, "grep": 14, "edit_file": 13, "glob": 5, "list_dir": 4, "run_tests": 3,
    "git_status": 3, "git_diff": 2.5, "write_file": 1.5, "multi_edit": 1.2, "git_log": 1, "lint": 0.6,
    "web_search": 0.5, "git_checkout": 0.4, "git_branch": 0.3, "bash_output": 0.3, "tool_search": 0.4,
}
_KIND_WEIGHTS: dict[str, dict[str, float]] = {
    "fix_test": {"run_tests": 6, "bash": 4},
    "feature": {"write_file": 2, "run_tests": 3, "git_commit": 1},
    "refactor": {"grep": 8, "multi_edit": 3, "run_tests": 2},
    "database": {"tool_search": 1, "sql_query": 9, "describe_table": 4, "list_tables": 2, "explain_query": 3},
    "github": {"github_list_pull_requests": 5, "github_get_pull_request": 6, "github_get_file_contents": 3,
               "github_list_issues": 2, "github_create_pull_request": 1.5, "github_add_comment": 1,
               "github_create_issue": 0.8, "git_push": 1.2, "git_commit": 1.5},
    "ticket": {"tool_search": 1, "linear_get_issue": 4, "linear_search_issues": 3, "linear_create_issue": 1.5,
               "run_tests": 2},
    "upgrade": {"web_search": 5, "web_fetch": 4, "bash": 5},
    "build": {"bash": 14, "lint": 2, "web_search": 1.5},
    LEGACY_KIND: {"read_file": 40, "edit_file": 6, "run_tests": 3},
}
# Late in a session agents check and record their work.
_LATE_WEIGHTS: dict[str, float] = {"git_status": 4, "git_diff": 4, "git_commit": 2, "run_tests": 3}
_EXPLORE_WEIGHTS: dict[str, float] = {"glob": 8, "grep": 8, "list_dir": 6, "read_file": 10}
_AGENTS = (  # name, share, {model: share}, task kinds, system prompt size
    ("coder-cli", 6, {"claude-sonnet-4-5": 70, "gpt-4.1": 20, "claude-opus-4-1": 10}, KINDS, 11_800),
    ("ci-fixer", 2, {"claude-sonnet-4-5": 100}, ("fix_test", "build", "upgrade"), 6_400),
    ("pr-reviewer", 2, {"gpt-4.1": 60, "claude-sonnet-4-5": 40}, ("github", "ticket", "refactor"), 8_900),
)
_HOUR_WEIGHTS = (1, 1, 1, 1, 1, 1, 2, 4, 8, 10, 10, 9, 7, 9, 10, 10, 9, 7, 5, 4, 3, 2, 2, 1)
CHARS_PER_TOKEN = 3.8  # a rough BPE ratio for English and code; exact counts come later from workers
UNKNOWN_RATE, SCHEMA_ERROR_RATE, DENY_RATE = 0.015, 0.02, 0.12
CONTEXT_WINDOW = 200_000  # the demo project's, and that of every model its agents use
LONG_SHARE = 0.03  # of sessions, at least one: they end between these shares of the window
LONG_TARGET = (0.82, 0.9)
LONG_MODEL = "claude-sonnet-4-5"
MAX_TURNS = 150


@dataclass(frozen=True, slots=True)
class CallRecord:
    client_id: str
    call_id: str
    tool_name: str
    arguments: dict[str, Any]
    output: str
    status: str
    error: str
    duration_ms: float
    retries: int
    approval: str
    started_at: datetime


@dataclass(frozen=True, slots=True)
class TurnRecord:
    client_id: str
    index: int
    started_at: datetime
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    latency_ms: int
    system_prompt_chars: int
    task_message: str
    calls: tuple[CallRecord, ...]
    # Anthropic's cache writes: what follows the read, up to the request's last breakpoint (the
    # conversation's end); None for OpenAI, which bills none.
    cache_write_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class SessionRecord:
    client_id: str
    agent_name: str
    model: str
    started_at: datetime
    ended_at: datetime
    metadata: dict[str, Any]
    turns: tuple[TurnRecord, ...]


def sessions_generate(*, count: int, seed: int, anchor: datetime) -> list[SessionRecord]:
    """`count` sessions in the 14 days before `anchor`, in chronological order."""
    rng = random.Random(seed)
    starts = sorted(_session_start(rng, anchor) for _ in range(count))
    long = set(rng.sample(range(1, count + 1), max(1, round(count * LONG_SHARE))))
    width = max(4, len(str(count)))
    # Each session draws from its own generator so that one session's length never shifts the next.
    return [_session(random.Random(rng.getrandbits(64)), f"demo-s{n:0{width}d}", start, long=n in long)
            for n, start in enumerate(starts, start=1)]


def _session_start(rng: random.Random, anchor: datetime) -> datetime:
    while True:
        day = rng.randrange(14)
        start = (anchor - timedelta(days=day)).replace(
            hour=rng.choices(range(24), _HOUR_WEIGHTS)[0], minute=rng.randrange(60), second=rng.randrange(60)
        )
        if start > anchor - timedelta(hours=1):
            start -= timedelta(days=1)  # an hour of margin: sessions last minutes, never past the anchor
        if start.weekday() < 5 or rng.random() < 0.3:  # weekends are quiet
            return start


def _session(rng: random.Random, client_id: str, started_at: datetime, *, long: bool = False) -> SessionRecord:
    name, _, models, kinds, prompt_chars = rng.choices(_AGENTS, [a[1] for a in _AGENTS])[0]
    model = rng.choices(list(models), list(models.values()))[0]
    if long:
        name, model, prompt_chars = "coder-cli", LONG_MODEL, _AGENTS[0][4]
    task = legacy_task(rng) if long else task_pick(rng, kinds)
    state = SessionState(rng=rng, task=task, started_at=started_at)
    context = _Context(state, model, prompt_chars + rng.randrange(400))
    if long:
        turns = _long_turns(context, client_id, rng.uniform(*LONG_TARGET) * CONTEXT_WINDOW)
    else:
        total = rng.randint(3, 15)
        turns = tuple(context.turn(f"{client_id}-t{i:02d}", i, total) for i in range(total))
    metadata = {"demo": True, "repo": "acme/shopfront", "branch": state.task.branch,
                "task_kind": state.task.kind, "agent_version": "1.4.2"}
    return SessionRecord(client_id, name, model, started_at, context.clock, metadata, turns)


def _long_turns(context: _Context, client_id: str, target: float) -> tuple[TurnRecord, ...]:
    """Turns until the next request would pass `target` input tokens; that request is the last
    (agents stop or hand over before the window is full)."""
    turns: list[TurnRecord] = []
    while len(turns) < MAX_TURNS - 1 and context.next_input < target:
        turns.append(context.turn(f"{client_id}-t{len(turns):02d}", len(turns), MAX_TURNS))
    index = len(turns)
    turns.append(context.turn(f"{client_id}-t{index:02d}", index, index + 1))
    return tuple(turns)


class _Context:
    """The running model context of one session: its clock and the tokens it has accumulated."""

    def __init__(self, state: SessionState, model: str, prompt_chars: int) -> None:
        self.state, self.model, self.prompt_chars = state, model, prompt_chars
        self.clock = state.started_at
        self.fixed_tokens = int(prompt_chars / CHARS_PER_TOKEN) + SCHEMA_TOKENS
        self.history_tokens = _tokens(state.task.message)
        self.previous_input = 0

    @property
    def next_input(self) -> int:
        """The input tokens of the next request: everything so far is in its history."""
        return self.fixed_tokens + self.history_tokens

    def turn(self, client_id: str, index: int, total: int) -> TurnRecord:
        rng = self.state.rng
        input_tokens = self.next_input
        cached = self._cached(input_tokens)
        started = self.clock
        results = self._calls(index, total)
        output_tokens = rng.randint(30, 350) + sum(_tokens(json.dumps(r[1].arguments)) for r in results)
        latency = int(400 + output_tokens * rng.uniform(12, 30) + input_tokens * 0.004 + rng.uniform(0, 600))
        self.clock = started + timedelta(milliseconds=latency)
        calls = tuple(self._record(f"{client_id}-c{n}", name, result)
                      for n, (name, result) in enumerate(results, start=1))
        self.clock += timedelta(milliseconds=rng.uniform(50, 400))
        self.history_tokens += output_tokens + sum(_tokens(c.output) for c in calls)
        self.previous_input = input_tokens
        task = self.state.task.message if index == 0 else ""
        return TurnRecord(client_id, index, started, input_tokens, output_tokens, cached, latency,
                          self.prompt_chars, task, calls,
                          input_tokens - cached if self.model.startswith("claude") else None)

    def _cached(self, input_tokens: int) -> int:
        rng = self.state.rng
        if self.previous_input and rng.random() < 0.92:
            return self.previous_input  # the whole previous request is a cached prefix
        # The system prompt and tools are the same for every session, so often cached across them.
        return min(self.fixed_tokens, input_tokens) if rng.random() < 0.75 else 0

    def _calls(self, index: int, total: int) -> list[tuple[str, CallResult]]:
        rng = self.state.rng
        if index == total - 1 and rng.random() < 0.85:
            return []  # the final answer
        count = rng.choices((1, 2, 3, 4), (60, 25, 10, 5))[0]
        weights = _weights(self.state.task.kind, index, total)
        names = rng.choices(list(weights), list(weights.values()), k=count)
        return [self._call(name) for name in names]

    def _call(self, name: str) -> tuple[str, CallResult]:
        rng, tool = self.state.rng, TOOLS_BY_NAME[name]
        roll = rng.random()
        if roll < UNKNOWN_RATE:
            return failures.unknown_tool(self.state)
        result = BUILDERS[name](self.state)
        if roll < UNKNOWN_RATE + SCHEMA_ERROR_RATE:
            return name, failures.schema_error(self.state, tool, result)
        if tool.requires_approval and rng.random() < DENY_RATE:
            return name, failures.denied(self.state, tool, result)
        return name, result

    def _record(self, client_id: str, name: str, result: CallResult) -> CallRecord:
        tool = TOOLS_BY_NAME.get(name)
        approval = "not_required"
        if tool is not None and tool.requires_approval and result.status in ("ok", "error", "denied"):
            approval = "denied" if result.status == "denied" else "approved"
        started = self.clock
        self.clock += timedelta(milliseconds=result.duration_ms)
        return CallRecord(client_id, _call_id(self.state.rng, self.model), name, result.arguments, result.output,
                          result.status, result.error, result.duration_ms, result.retries, approval, started)


def _weights(kind: str, index: int, total: int) -> dict[str, float]:
    weights = dict(_BASE_WEIGHTS)
    extra = [_KIND_WEIGHTS[kind]]
    if index == 0:
        extra.append(_EXPLORE_WEIGHTS)
    if index >= total * 2 / 3:
        extra.append(_LATE_WEIGHTS)
    for boost in extra:
        for name, weight in boost.items():
            weights[name] = weights.get(name, 0) + weight
    return weights


def _call_id(rng: random.Random, model: str) -> str:
    alphabet = string.ascii_letters + string.digits
    if model.startswith("claude"):
        return "toolu_01" + "".join(rng.choices(alphabet, k=22))
    return "call_" + "".join(rng.choices(alphabet, k=24))


def _tokens(text: str) -> int:
    return int(len(text) / CHARS_PER_TOKEN) + 1


def advertised_tools(hashes: dict[str, str]) -> list[dict[str, str]]:
    """What an agent without a policy sends on every turn: the whole catalog, in catalog order."""
    return [{"name": tool.name, "schema_hash": hashes[tool.name]} for tool in CATALOG]


SCHEMA_TOKENS = sum(
    _tokens(json.dumps({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
    for t in CATALOG
)
