"""What a replay measures (engine/simulation.py's `simulate`): each turn's schema tokens and
misses, each tool's calls, every miss, and the totals and rates a caller reads."""

from __future__ import annotations

from dataclasses import dataclass, field

RECOVERABLE = "recoverable"
HARD = "hard"


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ is 2.5x slower, and millions are made
class Miss:
    """A recorded call the policy would not have sent at that point."""

    session: str
    turn: int
    tool: str
    kind: str  # RECOVERABLE or HARD
    path: str  # "menu", "search" or "" (hard)


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ is 2.5x slower, and millions are made
class TurnFigures:
    session: str
    turn: int
    advertised_tokens: int
    sent_tokens: int
    sent_tools: int
    calls: int
    misses: int
    round_trip_tokens: int = 0
    """What this turn's misses add: one request re-sending the turn's context for each recoverable
    miss, and for each hard miss when the policy sends the search tool (a search that failed)."""


@dataclass
class ToolFigures:
    calls: int = 0
    hard: int = 0
    recoverable: int = 0
    output_tokens_saved: int = 0


@dataclass(frozen=True)
class Totals:
    """A replay's totals (Simulation.totals) and the rates the properties derive from them."""

    advertised_tokens: int
    sent_tokens: int
    calls: int
    hard_misses: int
    recoverable_misses: int
    round_trip_tokens: int

    @property
    def saved_tokens(self) -> int:
        return self.advertised_tokens - self.sent_tokens

    def share(self, tokens: int) -> float:
        return tokens / self.advertised_tokens if self.advertised_tokens else 0.0

    def rate(self, misses: int) -> float:
        return misses / self.calls if self.calls else 0.0


@dataclass
class Simulation:
    """Totals, and the rows behind them (per turn, per tool, every miss)."""

    turns: list[TurnFigures] = field(default_factory=list)
    misses: list[Miss] = field(default_factory=list)
    tools: dict[str, ToolFigures] = field(default_factory=dict)
    duplicate_tokens_saved: int = 0
    compaction_tokens_saved: int = 0
    # In dollars under the provider's prompt cache, when `simulate` was given prices (input tokens
    # only: the output is the model's, whatever the policy sends), over the priced sessions.
    recorded_dollars: float = 0.0  # the requests as recorded, with the tools advertised then
    policy_dollars: float = 0.0  # under the policy, its misses' round trips included
    priced_sessions: int = 0
    cache_breaks: int = 0  # policy requests whose tool list differs from the one before (a new prefix)
    recorded_cache_breaks: int = 0  # the same, as recorded

    def totals(self) -> Totals:
        """The figures the properties give, in one pass over the rows (a caller reading many)."""
        advertised = sent = calls = round_trips = 0
        for row in self.turns:
            advertised += row.advertised_tokens
            sent += row.sent_tokens
            calls += row.calls
            round_trips += row.round_trip_tokens
        hard = sum(miss.kind == HARD for miss in self.misses)
        return Totals(advertised, sent, calls, hard, len(self.misses) - hard, round_trips)

    @property
    def dollars_saved(self) -> float:
        return self.recorded_dollars - self.policy_dollars

    @property
    def advertised_tokens(self) -> int:
        return sum(row.advertised_tokens for row in self.turns)

    @property
    def sent_tokens(self) -> int:
        return sum(row.sent_tokens for row in self.turns)

    @property
    def saved_tokens(self) -> int:
        return self.advertised_tokens - self.sent_tokens

    @property
    def saved_share(self) -> float:
        return self.saved_tokens / self.advertised_tokens if self.advertised_tokens else 0.0

    @property
    def calls(self) -> int:
        return sum(row.calls for row in self.turns)

    @property
    def hard_misses(self) -> int:
        return sum(miss.kind == HARD for miss in self.misses)

    @property
    def recoverable_misses(self) -> int:
        return sum(miss.kind == RECOVERABLE for miss in self.misses)

    @property
    def miss_rate(self) -> float:
        return len(self.misses) / self.calls if self.calls else 0.0

    @property
    def hard_miss_rate(self) -> float:
        return self.hard_misses / self.calls if self.calls else 0.0

    @property
    def recoverable_miss_rate(self) -> float:
        return self.recoverable_misses / self.calls if self.calls else 0.0

    @property
    def recovery_round_trips(self) -> int:
        return self.recoverable_misses

    @property
    def round_trip_tokens(self) -> int:
        return sum(row.round_trip_tokens for row in self.turns)

    @property
    def net_saved_tokens(self) -> int:
        """Schema tokens saved less the round trips' tokens."""
        return self.saved_tokens - self.round_trip_tokens
