"""A session's dollars under prompt caching (telemetry/services/costs.py), against references worked
out by hand from the providers' published rules and prices (Claude Sonnet 4.5: $3 input, $15
output, $0.30 cache read, $3.75 5-minute and $6 1-hour cache write per million tokens; GPT-4o:
$2.50 input, $1.25 cached input, $10 output)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

from toolscope_agent.engine.cache import CacheUse

from toolscope.telemetry.services.costs import (
    EXPIRED,
    HISTORY_REWRITTEN,
    SYSTEM_CHANGED,
    TOOLS_CHANGED,
    session_agreement,
    session_costs,
    total_dollars,
)

START = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def turn(index: int, *, seconds: float, tools: int = 1, schema: int = 2000, system: str = "abc",
         messages: int = 100, outputs: int = 0, output: int = 50, model: str = "claude-sonnet-4-5",
         **reported: Any) -> dict[str, Any]:
    return {"id": index + 1, "index": index, "model": model, "started_at": START + timedelta(seconds=seconds),
            "time_known": True, "advertised_set_id": tools, "schema_tokens": schema, "system_prompt_tokens": 500,
            "system_prompt_hash": system, "message_tokens": messages, "call_tokens": 0, "tool_output_tokens": outputs,
            "input_tokens": None, "output_tokens": output, "cached_tokens": None, "cache_write_tokens": None,
            "cache_write_1h_tokens": None, **reported}


def dollars(*terms: tuple[int, str]) -> Decimal:
    return sum((Decimal(tokens) * Decimal(price) for tokens, price in terms), Decimal(0)) / 1_000_000


def test_an_anthropic_session_is_priced_as_its_cache_bills_it():
    costs = session_costs(turns=[turn(0, seconds=0), turn(1, seconds=30, messages=300),
                                 turn(2, seconds=60, tools=2, schema=1000, messages=400)])
    first, second, third = costs
    # 1: tools + system + the first message written (breakpoints on the system prompt and the last message).
    assert first.predicted == first.billed == CacheUse(write=2600) and not first.reported
    assert first.dollars == dollars((2600, "3.75"), (50, "15")) == Decimal("0.0105")
    # 2: what 1 wrote is read, the 200 new tokens written.
    assert second.billed == CacheUse(read=2600, write=200)
    assert second.dollars == dollars((2600, "0.30"), (200, "3.75"), (50, "15")) == Decimal("0.00228")
    # The tool schemas at the head are read; the messages half read, half written.
    assert second.components["schema_tokens"] == dollars((2000, "0.30"))
    assert second.components["message_tokens"] == dollars((100, "0.30"), (200, "3.75"))
    assert sum(second.components.values()) == second.dollars
    # 3: a new tool list (though smaller) heads a new prefix: everything written again.
    assert third.billed == CacheUse(write=1000 + 500 + 400) and third.cache_break == TOOLS_CHANGED
    assert third.dollars == dollars((1900, "3.75"), (50, "15"))
    assert (first.cache_break, second.cache_break) == ("", "")
    assert total_dollars(costs) == first.dollars + second.dollars + third.dollars
    assert first.price is not None and first.price.source.startswith("genai-prices")


def test_breaks_name_what_changed_or_that_the_cache_expired():
    costs = session_costs(turns=[turn(0, seconds=0), turn(1, seconds=10, system="new", messages=200),
                                 turn(2, seconds=20, system="new", messages=50),
                                 turn(3, seconds=400, system="new", messages=80)])
    assert [cost.cache_break for cost in costs] == ["", SYSTEM_CHANGED, HISTORY_REWRITTEN, EXPIRED]
    assert costs[2].billed == CacheUse(read=2500, write=50)  # tools + system still cached; the history is new


def test_reported_figures_are_billed_and_compared_with_the_prediction():
    """GPT-4o reported 3,000 input tokens with 1,280 cached: billed as reported. The model
    predicted 2,560 (the 2,600 the request before sent, counted in 128s from 1,024)."""
    first = turn(0, seconds=0, model="gpt-4o", input_tokens=2600, cached_tokens=0, output=100)
    second = turn(1, seconds=30, model="gpt-4o", messages=500, input_tokens=3000, cached_tokens=1280, output=100)
    costs = session_costs(turns=[first, second], provider="openai")
    assert costs[1].reported and costs[1].billed == CacheUse(read=1280, uncached=1720)
    assert costs[1].dollars == dollars((1720, "2.50"), (1280, "1.25"), (100, "10")) == Decimal("0.0069")
    assert costs[1].predicted.read == 1024 + 12 * 128  # 2,600 shared: 1,024 + 12 x 128 = 2,560
    agreed = session_agreement(costs)
    assert (agreed.requests, agreed.exact, agreed.reported_read, agreed.predicted_read) == (2, 1, 1280, 2560)


def test_a_project_price_wins_and_an_unknown_model_has_no_dollars():
    own = SimpleNamespace(model="house-model", provider="", valid_from=START - timedelta(days=1), note="contract",
                          input_mtok=Decimal("1"), output_mtok=Decimal("2"), cache_read_mtok=None,
                          cache_write_mtok=None, cache_write_1h_mtok=None)
    priced = session_costs(turns=[turn(0, seconds=0, model="house-model")], overrides=[own])
    # An unknown provider caches nothing here; every input token at $1, the output at $2.
    assert priced[0].billed == CacheUse(uncached=2600)
    assert priced[0].dollars == dollars((2600, "1"), (50, "2")) and priced[0].price.source == "project price: contract"
    unknown = session_costs(turns=[turn(0, seconds=0, model="no-such-model-x")])
    assert unknown[0].dollars is None and unknown[0].components == {} and total_dollars(unknown) is None


def test_a_transcript_without_times_is_taken_as_sent_back_to_back():
    costs = session_costs(turns=[{**turn(0, seconds=0), "time_known": False},
                                 {**turn(1, seconds=3600, messages=300), "time_known": False}])
    assert costs[1].billed == CacheUse(read=2600, write=200) and costs[1].cache_break == ""
