"""A replay priced in dollars under the provider's prompt cache (issue 26, item 5): a tool list that
changes from request to request re-writes the conversation after it, so a policy can save most
schema tokens and still cost more. References worked out by hand from Anthropic's rules and
Claude Sonnet 4.5's prices ($3 input, $0.30 cache read, $3.75 5-minute write per million)."""

from __future__ import annotations

import pytest
from toolscope_agent.engine.cache import rules_for
from toolscope_agent.engine.replay_pricing import CachePricing
from toolscope_agent.engine.simulation import RecordedTurn, ReplaySession, simulate

NAMES = [f"tool_{n}" for n in range(10)]
CATALOG = [{"name": name, "description": f"Does {name}."} for name in NAMES]
COSTS = dict.fromkeys(NAMES, 100)
SONNET = CachePricing(rules_for("anthropic", "claude-sonnet-4-5"), input=3, cache_read=0.3, cache_write=3.75,
                      cache_write_1h=6)
WORDS = ["alpha", "beta", "gamma"]


def session(*, seconds: float = 30) -> ReplaySession:
    """Three requests `seconds` apart advertising all ten tools (1,000 tokens) over a conversation
    of 2,000, 2,500 and 3,000 tokens."""
    return ReplaySession("s", [RecordedTurn(message=word, advertised=NAMES, advertised_tokens=1000,
                                            input_tokens=1000 + 2000 + 500 * n, at=n * seconds)
                               for n, word in enumerate(WORDS)], model="claude-sonnet-4-5")


def churning() -> dict:
    """Each request's word sends one other tool, nothing sticks: 90% of schema tokens saved."""
    return {"selection": {"mode": "context_rules", "sticky_discovered": False,
                          "groups": {word: [NAMES[n]] for n, word in enumerate(WORDS)},
                          "context_rules": [{"name": word, "keywords": [word], "groups": [word]} for word in WORDS]}}


def dollars(*terms: tuple[int, float]) -> float:
    return sum(tokens * price for tokens, price in terms) / 1_000_000


RECORDED = dollars((3000, 3.75), (3000, 0.3), (500, 3.75), (3500, 0.3), (500, 3.75))


def test_sending_everything_costs_what_was_recorded():
    result = simulate(CATALOG, {"selection": {"mode": "all"}}, [session()], schema_tokens=COSTS,
                      pricing={"claude-sonnet-4-5": SONNET})
    assert result.recorded_dollars == pytest.approx(RECORDED)
    assert result.policy_dollars == pytest.approx(RECORDED) and result.priced_sessions == 1
    assert (result.cache_breaks, result.recorded_cache_breaks) == (0, 0)


def test_a_churning_tool_list_saves_tokens_and_loses_dollars():
    result = simulate(CATALOG, churning(), [session()], schema_tokens=COSTS, pricing={"claude-sonnet-4-5": SONNET})
    assert result.saved_share == pytest.approx(0.9)
    # Every request heads a new prefix: tools (100) and the whole conversation written again.
    assert result.policy_dollars == pytest.approx(dollars((2100 + 2600 + 3100, 3.75)))
    assert result.cache_breaks == 2 and result.dollars_saved < 0
    assert result.policy_dollars > 1.7 * result.recorded_dollars


def test_past_the_ttl_nothing_is_cached_either_way():
    result = simulate(CATALOG, {"selection": {"mode": "all"}}, [session(seconds=600)], schema_tokens=COSTS,
                      pricing={"claude-sonnet-4-5": SONNET})
    assert result.recorded_dollars == pytest.approx(dollars((3000 + 3500 + 4000, 3.75)))


def test_a_session_without_a_price_is_not_priced():
    result = simulate(CATALOG, churning(), [session()], schema_tokens=COSTS, pricing={"gpt-4o": SONNET})
    assert (result.recorded_dollars, result.policy_dollars, result.priced_sessions) == (0.0, 0.0, 0)


def test_a_round_trip_re_reads_the_cached_context():
    """A recoverable miss's extra request re-sends the turn's prompt, which its first request has
    just cached: it is billed at the read price."""
    catalog = [*CATALOG, {"name": "tool_search", "description": "Find tools."}]
    from toolscope_agent.engine.simulation import RecordedCall

    turn = RecordedTurn(message="Does tool_3.", advertised=NAMES, advertised_tokens=1000, input_tokens=3000, at=0,
                        calls=[RecordedCall("tool_3")])
    result = simulate(catalog, {"selection": {"mode": "tool_search"}},
                      [ReplaySession("s", [turn], model="claude-sonnet-4-5")],
                      schema_tokens={**COSTS, "tool_search": 100}, pricing={"claude-sonnet-4-5": SONNET})
    assert result.recoverable_misses == 1
    assert result.policy_dollars == pytest.approx(dollars((2100, 3.75), (2100, 0.3)))
    assert result.recorded_dollars == pytest.approx(dollars((3000, 3.75)))


def test_the_providers_own_deferred_loading_keeps_the_head_of_the_prompt_put():
    """Three requests calling a tool the search finds (tool_3, then tool_4, then tool_3 again).
    toolscope's search loads each into the tool list: the list at the head of the prompt changes,
    and the conversation after it is written again. The provider's own deferred loading
    (`provider_search`) puts what its search loads inside the conversation: the head stays the
    search tool alone, and each request reads the one before."""
    from toolscope_agent.engine.simulation import RecordedCall

    catalog = [*CATALOG, {"name": "tool_search", "description": "Find tools."}]
    turns = [RecordedTurn(message=f"Does {name}.", advertised=NAMES, advertised_tokens=1000,
                          input_tokens=3000 + 500 * n, at=30 * n, calls=[RecordedCall(name)])
             for n, name in enumerate(["tool_3", "tool_4", "tool_3"])]

    def priced(provider_search: bool):
        # The search answers with one tool, so each search loads only the tool called.
        policy = {"selection": {"mode": "tool_search",
                                "tool_search": {"provider_search": provider_search, "top_k": 1}}}
        return simulate(catalog, policy, [ReplaySession("s", turns, model="claude-sonnet-4-5")],
                        schema_tokens={**COSTS, "tool_search": 100}, pricing={"claude-sonnet-4-5": SONNET})

    ours, native = priced(False), priced(True)
    assert ours.recoverable_misses == native.recoverable_misses == 2  # tool_3 stays loaded for the third
    assert (ours.cache_breaks, native.cache_breaks) == (2, 0)
    # Native: the head is tool_search (100) throughout; each loaded tool joins the conversation.
    # Request 1: 2,100 written, its round trip reads them. Request 2: 2,100 read, 500 + 100 (tool_3
    # loaded) written, its round trip reads 2,700. Request 3: 2,700 read, 500 + 100 (tool_4) written.
    assert native.policy_dollars == pytest.approx(dollars(
        (2100, 3.75), (2100, 0.3), (2100, 0.3), (600, 3.75), (2700, 0.3), (2700, 0.3), (600, 3.75)))
    assert native.policy_dollars < ours.policy_dollars
    # What the native search loaded is the policy's conversation, never the recording's: both
    # replays price the same recorded requests (3,000 written, then 3,000 read and 500 written, twice).
    assert native.recorded_dollars == ours.recorded_dollars == pytest.approx(dollars(
        (3000, 3.75), (3000, 0.3), (500, 3.75), (3500, 0.3), (500, 3.75)))


def alternating(requests: int = 4) -> ReplaySession:
    """Requests 30 s apart alternating two tasks (alpha, beta, ...) over a conversation of 2,000
    tokens growing by 500, advertising all ten tools."""
    return ReplaySession("s", [RecordedTurn(message=WORDS[n % 2], advertised=NAMES, advertised_tokens=1000,
                                            input_tokens=1000 + 2000 + 500 * n, at=n * 30)
                               for n in range(requests)], model="claude-sonnet-4-5")


def kept(tool_list: str) -> dict:
    policy = churning()
    policy["selection"]["tool_list"] = tool_list
    return policy


def test_an_append_only_list_breaks_the_cache_only_when_it_grows():
    per_request = simulate(CATALOG, churning(), [alternating()], schema_tokens=COSTS,
                           pricing={"claude-sonnet-4-5": SONNET})
    append = simulate(CATALOG, kept("append_only"), [alternating()], schema_tokens=COSTS,
                      pricing={"claude-sonnet-4-5": SONNET})
    # Sent: tool_0; then tool_0 and tool_1 (a new prefix: tools, and the conversation so far,
    # written again); then the same list, read from the cache, only the new 500 written.
    assert [row.sent_tokens for row in append.turns] == [100, 200, 200, 200]
    assert append.cache_breaks == 1 and per_request.cache_breaks == 3
    assert append.policy_dollars == pytest.approx(dollars((2100 + 2700 + 500 + 500, 3.75), (2700 + 3200, 0.3)))
    assert append.policy_dollars < per_request.policy_dollars


def test_a_fixed_list_keeps_the_first_requests_tools_and_the_whole_cache():
    fixed = simulate(CATALOG, kept("fixed"), [alternating()], schema_tokens=COSTS,
                     pricing={"claude-sonnet-4-5": SONNET})
    assert [row.sent_tokens for row in fixed.turns] == [100] * 4 and fixed.cache_breaks == 0
    assert fixed.policy_dollars == pytest.approx(dollars((2100 + 3 * 500, 3.75), (2100 + 2600 + 3100, 0.3)))


def test_replays_that_share_their_sessions_price_each_recording_once(monkeypatch):
    import toolscope_agent.engine.simulation as simulation

    priced = []
    real = simulation.recorded_dollars
    monkeypatch.setattr(simulation, "recorded_dollars", lambda rows, pricing: priced.append(1) or real(rows, pricing))
    shared, sessions = simulation.Shared(), [session(), session(seconds=600)]
    pricing = {"claude-sonnet-4-5": SONNET}
    first = simulate(CATALOG, {"selection": {"mode": "all"}}, sessions, schema_tokens=COSTS, pricing=pricing,
                     shared=shared)
    second = simulate(CATALOG, churning(), sessions, schema_tokens=COSTS, pricing=pricing, shared=shared)
    assert len(priced) == 2  # each session's recording once for both replays
    alone = simulate(CATALOG, churning(), sessions, schema_tokens=COSTS, pricing=pricing)
    assert len(priced) == 4
    assert first.recorded_dollars == second.recorded_dollars == alone.recorded_dollars
    assert first.recorded_dollars == pytest.approx(RECORDED + dollars((3000 + 3500 + 4000, 3.75)))
    assert (second.policy_dollars, second.cache_breaks, second.recorded_cache_breaks) == (
        alone.policy_dollars, alone.cache_breaks, alone.recorded_cache_breaks)
