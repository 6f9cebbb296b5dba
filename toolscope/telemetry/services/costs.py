"""What each recorded request cost in dollars, under the provider's prompt caching (issue 26,
items 3 and 4).

A session's requests are replayed through the engine's cache model (toolscope_agent.engine.
cache), each rendered as the provider orders it from what its turn keeps:

- **tools**: the advertised tool list (its `advertised_set`: equal lists, equal key) and its
  schema tokens;
- **system**: the system prompt (its hash, `system_prompt_hash`, or, when only its size came,
  its token count) and its tokens;
- **history**: the conversation, grown one block per request by what it added (messages, call
  arguments and tool outputs since the previous request). A history that shrinks (compaction or
  a rewritten conversation) is a new conversation from there: nothing after the system prompt
  matches any more.

Times are the turns' own; a turn without one (`time_known` false: a transcript whose host stored no
times) is taken as sent right after the turn before it, within every TTL. Anthropic's breakpoints
are assumed where the documented multi-turn pattern puts them (the end of the system prompt and the
last message).

**Billed**, per request: the provider's reported figures when it reported its cache reads
(`cached_tokens`; Anthropic's writes, `cache_write_tokens`, of which `cache_write_1h_tokens`
with the 1-hour TTL), its input less those uncached; else the prediction, its uncached part
taken from the reported input when there is one. Dollars are the billed tokens of each kind at
the model's price then (toolscope/prices.py: the project's own price, else genai-prices), plus
the output; a model no source prices has no dollars (None), never zero.

**By component**, per request: the prompt's tokens in render order (tools, system, messages,
call arguments, tool outputs, then what the provider counted and no component explains) are
laid over the billed kinds in the order a cache fills them (read, then 1-hour writes, then
5-minute writes, then uncached), and each priced at its kind's price: the tool schemas at the
head of the prompt are the first read and the first written again.

**Cache breaks**: a request that reads less than the request before it left in the cache (what
it read and wrote with Anthropic, what it sent with OpenAI) lost its cache: because its tool
list changed ("tools changed"), its system prompt did ("system prompt changed"), its history
was rewritten ("history rewritten"), or, nothing having changed, the cache expired between them
("expired").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from toolscope_agent.engine.cache import (
    ANTHROPIC,
    NONE,
    Agreement,
    Block,
    CacheUse,
    Conversation,
    Request,
    Rules,
    agreement,
    predict,
    readable,
    rules_for,
)

from toolscope.prices import Price, model_price

MILLION = Decimal(1_000_000)
CENT = Decimal("0.01")
# A turn's columns the costs read (with the turn's provider-reported usage).
COST_FIELDS = ("id", "index", "model", "started_at", "time_known", "advertised_set_id", "schema_tokens",
               "system_prompt_tokens", "system_prompt_hash", "message_tokens", "call_tokens", "tool_output_tokens",
               "input_tokens", "output_tokens", "cached_tokens", "cache_write_tokens", "cache_write_1h_tokens")
# Prompt components in render order; history ones split what the history block holds.
PARTS = ("schema_tokens", "system_prompt_tokens", "message_tokens", "call_tokens", "tool_output_tokens")
# The order a cache fills a prompt's billed kinds (Anthropic: a 1-hour breakpoint precedes 5-minute ones).
KINDS = ("read", "write_1h", "write", "uncached")
TOOLS_CHANGED, SYSTEM_CHANGED, HISTORY_REWRITTEN, EXPIRED = (
    "tools changed", "system prompt changed", "history rewritten", "expired")


@dataclass(frozen=True)
class TurnCost:
    """One request: its predicted cache use, what it was billed as, and its dollars."""

    turn_id: int
    predicted: CacheUse
    billed: CacheUse
    reported: bool  # billed is the provider's own report
    output_tokens: int
    dollars: Decimal | None  # None: no price for the model
    components: dict[str, Decimal] = field(default_factory=dict)  # PARTS + "unattributed" + "output"
    cache_break: str = ""
    price: Price | None = None


def session_costs(*, turns: Sequence[dict[str, Any]], overrides: Sequence[Any] = (),
                  provider: str = "", prices: dict[tuple[str, Any], Price | None] | None = None) -> list[TurnCost]:
    """Each of a session's `turns` (dicts of COST_FIELDS, in session order from its first turn)
    with its cost. `overrides`: the project's ModelPrice rows; `provider`: when the turns do not
    say it by their model's name; `prices`: the prices looked up so far, by (model, day), kept
    across calls with the same overrides."""
    rules_of = [rules_for(provider, turn["model"] or "") for turn in turns]
    requests, reasons = _requests(turns)
    by_rules: dict[Rules, list[int]] = {}
    for position, rules in enumerate(rules_of):
        by_rules.setdefault(rules, []).append(position)
    predicted: list[CacheUse] = [CacheUse()] * len(turns)
    for rules, positions in by_rules.items():
        # A model switch mid-session leaves each provider's cache to its own requests; the
        # `shared` hints hold only between consecutive requests, so a mixed session drops them.
        uses = predict([requests[position] if len(positions) == len(turns) else
                        Request(requests[position].at, requests[position].blocks, requests[position].marks)
                        for position in positions], rules)
        for position, use in zip(positions, uses, strict=True):
            predicted[position] = use
    prices = {} if prices is None else prices
    costs = []
    for position, turn in enumerate(turns):
        model = turn["model"] or ""
        when: datetime = turn["started_at"]
        key = (model, when.date())
        if key not in prices:
            prices[key] = model_price(model=model, at=when, provider=provider, overrides=overrides) if model else None
        billed, reported = _billed(turn, predicted[position])
        price = prices[key]
        output = turn["output_tokens"] or 0
        dollars, components = _dollars(turn, billed, output, price)
        rules = rules_of[position]
        costs.append(TurnCost(
            turn_id=turn["id"], predicted=predicted[position], billed=billed, reported=reported, output_tokens=output,
            dollars=dollars, components=components, price=price,
            cache_break=_break(position, predicted, reasons, rules) if rules.provider != NONE else ""))
    return costs


NANOS = Decimal(1_000_000_000)
TURN_COSTS = ("cost_nanos", "schema_cost_nanos", "tool_output_cost_nanos", "cache_break")
"""A request's cost as its Turn row keeps it (cost_values), for the hourly rollups: dollars in
billionths, integers the rollups add exactly."""


def cost_values(cost: TurnCost) -> dict[str, Any]:
    """TURN_COSTS of one request: its dollars, its tool schemas' and its tool outputs' (None when
    its model has no price), and its cache break."""
    if cost.dollars is None:
        return {"cost_nanos": None, "schema_cost_nanos": None, "tool_output_cost_nanos": None,
                "cache_break": cost.cache_break}
    return {"cost_nanos": nanos(cost.dollars), "schema_cost_nanos": nanos(cost.components["schema_tokens"]),
            "tool_output_cost_nanos": nanos(cost.components["tool_output_tokens"]), "cache_break": cost.cache_break}


def nanos(dollars: Decimal) -> int:
    """Dollars in billionths, rounded half to even."""
    return int((dollars * NANOS).to_integral_value())


COST_COLUMNS = ("billed_cache_read", "billed_cache_write", "billed_uncached", "billed_as", "predicted_cache_read",
                "predicted_cache_write", "usd", "schema_usd", "cache_break", "price_source")
"""A request's cost as a table row (cost_columns): the session page, its turns CSV, the read API."""


def cost_columns(cost: TurnCost | None) -> dict[str, Any]:
    """COST_COLUMNS of one request (all None when it was not priced)."""
    if cost is None:
        return dict.fromkeys(COST_COLUMNS)
    return {"billed_cache_read": cost.billed.read, "billed_cache_write": cost.billed.write + cost.billed.write_1h,
            "billed_uncached": cost.billed.uncached, "billed_as": "reported" if cost.reported else "predicted",
            "predicted_cache_read": cost.predicted.read,
            "predicted_cache_write": cost.predicted.write + cost.predicted.write_1h, "usd": cost.dollars,
            "schema_usd": cost.components.get("schema_tokens"), "cache_break": cost.cache_break,
            "price_source": cost.price.source if cost.price is not None else ""}


def session_cost_summary(turns: Sequence[dict[str, Any]], costs: Sequence[TurnCost]) -> dict[str, Any]:
    """The session's cost over `turns` (COST_FIELDS rows, with `costs` from session_costs): the last
    turn priced, requests, dollars, unpriced requests, price sources, cache reads of the input,
    the agreement of predicted and reported cache figures, and the cache breaks (turn, reason)."""
    return {
        "upto": max((row["index"] for row in turns), default=None), "requests": len(costs),
        "total": total_dollars(costs), "unpriced": sum(cost.dollars is None for cost in costs),
        "sources": sorted({cost.price.source for cost in costs if cost.price is not None}),
        "read": sum(cost.billed.read for cost in costs), "input": sum(cost.billed.input_tokens for cost in costs),
        "agreement": session_agreement(costs),
        "breaks": [(row["index"], cost.cache_break) for row, cost in zip(turns, costs, strict=True)
                   if cost.cache_break],
    }


def session_agreement(costs: Sequence[TurnCost]) -> Agreement:
    """Predicted against reported cache reads and writes over the requests that reported them."""
    return agreement([cost.predicted for cost in costs],
                     [{"read": cost.billed.read, "write": cost.billed.write + cost.billed.write_1h}
                      if cost.reported else {"read": None} for cost in costs])


def total_dollars(costs: Sequence[TurnCost]) -> Decimal | None:
    """The requests' dollars together; None when none is priced."""
    priced = [cost.dollars for cost in costs if cost.dollars is not None]
    return sum(priced, Decimal(0)) if priced else None


def _requests(turns: Sequence[dict[str, Any]]) -> tuple[list[Request], list[str]]:
    """Each turn as a cache Request (engine.cache.Conversation: linear in the session's length),
    and what changed since the turn before it ("" for nothing but the history growing)."""
    conversation = Conversation()
    requests, reasons = [], []
    previous: tuple[Block, Block] | None = None
    for turn in turns:
        head = (Block(f"tools:{turn['advertised_set_id']}", turn["schema_tokens"] or 0),
                Block(f"system:{turn['system_prompt_hash'] or turn['system_prompt_tokens']}",
                      turn["system_prompt_tokens"] or 0))
        # A turn whose time is not known is taken as sent right after the one before.
        at = turn["started_at"].timestamp() if turn["time_known"] else (requests[-1].at if requests else 0.0)
        requests.append(conversation.request(at, head, sum(turn[part] or 0 for part in PARTS[2:])))
        reason = ""
        if previous is not None and previous[0].key != head[0].key:
            reason = TOOLS_CHANGED
        elif previous is not None and previous[1].key != head[1].key:
            reason = SYSTEM_CHANGED
        elif conversation.rewritten:
            reason = HISTORY_REWRITTEN
        reasons.append(reason)
        previous = head
    return requests, reasons


def _billed(turn: dict[str, Any], predicted: CacheUse) -> tuple[CacheUse, bool]:
    reported_input = turn["input_tokens"]
    if turn["cached_tokens"] is not None and reported_input is not None:
        write = turn["cache_write_tokens"] or 0
        write_1h = min(turn["cache_write_1h_tokens"] or 0, write)
        read = turn["cached_tokens"]
        return CacheUse(read=read, write=write - write_1h, write_1h=write_1h,
                        uncached=max(0, reported_input - read - write)), True
    if reported_input is None:
        return predicted, False
    cached = min(reported_input, predicted.read + predicted.write + predicted.write_1h)
    scale = cached / (predicted.read + predicted.write + predicted.write_1h) if cached else 0
    read = round(predicted.read * scale)
    write_1h = round(predicted.write_1h * scale)
    write = cached - read - write_1h
    return CacheUse(read=read, write=write, write_1h=write_1h, uncached=reported_input - cached), False


def _dollars(turn: dict[str, Any], billed: CacheUse, output: int,
             price: Price | None) -> tuple[Decimal | None, dict[str, Decimal]]:
    if price is None:
        return None, {}
    size = billed.input_tokens
    rates, output_rate = price.rates(size), price.of("output", size)
    if rates is None or output_rate is None:
        return None, {}
    # Lay the components over the kinds in the order the cache fills them.
    parts = [(part, turn[part] or 0) for part in PARTS]
    parts.append(("unattributed", max(0, size - sum(tokens for _, tokens in parts))))
    zones = [(kind, getattr(billed, kind)) for kind in KINDS]
    components: dict[str, Decimal] = {}
    zone, left = 0, zones[0][1]
    for part, tokens in parts:
        amount = Decimal(0)
        while tokens > 0 and zone < len(zones):
            if left == 0:
                zone += 1
                left = zones[zone][1] if zone < len(zones) else 0
                continue
            taken = min(tokens, left)
            amount += taken * rates[zones[zone][0]]
            tokens -= taken
            left -= taken
        components[part] = amount / MILLION
    components["output"] = output * output_rate / MILLION
    dollars = (sum((getattr(billed, kind) * rates[kind] for kind in KINDS), Decimal(0))
               + output * output_rate) / MILLION
    return dollars, components


def _break(position: int, predicted: Sequence[CacheUse], reasons: Sequence[str], rules: Rules) -> str:
    """Why this request read less than the request before it left cached, or "": what that request
    read or wrote (Anthropic) or sent (OpenAI), as a request re-sending it would read it."""
    if position == 0:
        return ""
    before = predicted[position - 1]
    left = before.read + before.write + before.write_1h if rules.provider == ANTHROPIC else before.input_tokens
    if predicted[position].read >= readable(left, rules) or not readable(left, rules):
        return ""
    return reasons[position] or EXPIRED
