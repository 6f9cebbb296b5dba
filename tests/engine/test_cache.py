"""The prompt-cache model (engine/cache.py) against figures worked out by hand from the providers'
published rules: Anthropic's breakpoints, TTLs, 20-block lookback and minimum lengths, OpenAI's
automatic caching in 128-token steps from 1,024 tokens."""

from __future__ import annotations

import pytest
from toolscope_agent.engine.cache import (
    ANTHROPIC,
    NO_CACHE,
    OPENAI,
    Block,
    CacheUse,
    Request,
    Rules,
    agreement,
    anthropic_min_tokens,
    breakpoints,
    predict,
    readable,
    rules_for,
)

SONNET = rules_for("anthropic", "claude-sonnet-4-5")


def conversation(at: float, turns: int, *, tools: str = "tools-a", tool_tokens: int = 2000,
                 system_ttl: float = 300.0) -> Request:
    """Tools (2,000 tokens) + system (500) + `turns` messages of 100 tokens, breakpoints on the
    system prompt and the last message, as the docs' multi-turn example places them."""
    blocks = [Block(tools, tool_tokens), Block("system", 500),
              *(Block(f"message-{n}", 100) for n in range(turns))]
    return Request(at, breakpoints(blocks, system_end=1, system_ttl=system_ttl))


def test_a_growing_conversation_reads_what_it_wrote_and_writes_only_the_new_messages():
    first, second, third = predict([conversation(0, 1), conversation(30, 3), conversation(60, 4)], SONNET)
    assert first == CacheUse(read=0, write=2600, uncached=0)
    assert second == CacheUse(read=2600, write=200, uncached=0)  # the new messages, up to the last breakpoint
    assert third == CacheUse(read=2800, write=100)
    assert third.input_tokens == 2900


def test_a_tool_list_changed_mid_session_writes_the_whole_prefix_again():
    uses = predict([conversation(0, 5), conversation(30, 6), conversation(60, 7, tools="tools-b", tool_tokens=300)],
                   SONNET)
    assert uses[1] == CacheUse(read=3000, write=100)
    # The tools head every prefix: nothing after them matches, the system and all 7 messages are
    # written again, though only the tools changed (and shrank).
    assert uses[2] == CacheUse(read=0, write=300 + 500 + 700)


def test_a_cache_expires_five_minutes_after_its_last_use_and_a_read_refreshes_it():
    uses = predict([conversation(0, 1), conversation(290, 2), conversation(580, 3), conversation(900, 4)], SONNET)
    assert [use.read for use in uses] == [0, 2600, 2700, 0]  # 580 - 290 < 300; 900 - 580 > 300


def test_a_one_hour_system_breakpoint_outlives_the_five_minute_conversation():
    uses = predict([conversation(0, 1, system_ttl=3600), conversation(1200, 2, system_ttl=3600)], SONNET)
    assert uses[0] == CacheUse(read=0, write=100, write_1h=2500)
    # After 20 minutes the conversation's entry is gone, the tools + system one is not.
    assert uses[1] == CacheUse(read=2500, write=200)


def test_a_prefix_under_the_models_minimum_is_never_cached():
    haiku = rules_for("anthropic", "claude-haiku-4-5")
    assert haiku.min_tokens == 4096 and SONNET.min_tokens == 1024
    assert predict([conversation(0, 1), conversation(10, 2)], haiku) == [CacheUse(uncached=2600),
                                                                          CacheUse(uncached=2700)]
    # Past the minimum only the breakpoints that reach it are written.
    big = [Request(0, breakpoints([Block("tools", 1000), Block("system", 500), *(Block(f"m{n}", 1000)
                                                                                 for n in range(3))], system_end=1))]
    assert predict(big, haiku) == [CacheUse(write=4500)]


def test_the_lookback_reaches_twenty_blocks_before_a_breakpoint():
    """With a breakpoint on the last message only, a request 20 blocks on still finds the earlier
    entry; 21 blocks on it does not."""
    def only_last(at: float, turns: int) -> Request:
        blocks = [Block("tools", 2000), *(Block(f"m{n}", 10) for n in range(turns))]
        return Request(at, [*blocks[:-1], Block(blocks[-1].key, 10, True)])

    near = predict([only_last(0, 1), only_last(10, 20)], SONNET)
    assert near[1] == CacheUse(read=2010, write=190)
    far = predict([only_last(0, 1), only_last(10, 21)], SONNET)
    assert far[1] == CacheUse(read=0, write=2210)


def test_without_breakpoints_anthropic_caches_nothing():
    request = Request(0, [Block("tools", 5000), Block("system", 500)])
    assert predict([request, request], SONNET) == [CacheUse(uncached=5500)] * 2


def test_openai_reads_the_shared_prefix_from_1024_tokens_in_steps_of_128():
    openai = rules_for("openai", "gpt-4o")
    first = Request(0, [Block("tools", 1200), Block("system", 300)])
    second = Request(60, [Block("tools", 1200), Block("system", 300), Block("m0", 200)])
    short = Request(120, [Block("tools", 900)])
    uses = predict([first, second, short], openai)
    assert uses[0] == CacheUse(uncached=1500)  # nothing before it: computed, then kept
    # 1,500 shared: 1,024 + 3 x 128 = 1,408 read, no write charge.
    assert uses[1] == CacheUse(read=1408, uncached=292)
    assert uses[2] == CacheUse(uncached=900)  # under 1,024 tokens: never cached


def test_openai_forgets_a_prefix_after_its_retention_and_changed_tools_share_nothing():
    openai = rules_for("openai", "gpt-4.1")
    base = [Block("tools", 2000), Block("system", 300)]
    uses = predict([Request(0, base), Request(700, base), Request(710, base),
                    Request(720, [Block("other tools", 2000), Block("system", 300)])], openai)
    assert [use.read for use in uses] == [0, 0, 2176, 0]  # 700 s > 10 min; 2,300 -> 1,024 + 9 x 128


def test_rules_follow_the_provider_or_the_models_name():
    assert rules_for("", "claude-opus-4-6").provider == ANTHROPIC
    assert rules_for("", "claude-opus-4-6").min_tokens == 4096
    assert rules_for("", "gpt-5-mini").provider == OPENAI
    assert rules_for("google", "gemini-2.5-pro") == NO_CACHE
    assert anthropic_min_tokens("claude-3-5-haiku-20241022") == 2048
    assert predict([Request(0, [Block("tools", 5000)])], Rules("mistral")) == [CacheUse(uncached=5000)]


def test_breakpoints_go_on_the_system_prompt_and_the_last_message_unless_the_request_has_its_own():
    blocks = [Block("tools", 3000), Block("system", 10), Block("m0", 10)]
    marked = breakpoints(blocks, system_end=1, system_ttl=3600)
    assert [(block.breakpoint, block.ttl) for block in marked] == [(False, 300), (True, 3600), (True, 300)]
    own = [Block("tools", 3000, True, 3600), Block("system", 10), Block("m0", 10)]
    assert breakpoints(own, system_end=1) == own


def test_agreement_counts_requests_that_reported_and_how_far_reads_are():
    predicted = [CacheUse(read=0, write=2600), CacheUse(read=2600, write=200), CacheUse(read=2800)]
    reported = [{"read": 0, "write": 2600}, {"read": 2000, "write": 800}, {"read": None}]
    found = agreement(predicted, reported)
    assert (found.requests, found.exact) == (2, 1)
    assert (found.reported_read, found.predicted_read) == (2000, 2600)
    assert found.read_error == pytest.approx(0.3)


def test_what_a_later_request_can_read_of_a_cached_prefix():
    openai = rules_for("openai", "gpt-4o")
    assert [readable(tokens, openai) for tokens in (1000, 1024, 1151, 1152, 2600)] == [0, 1024, 1024, 1152, 2560]
    assert [readable(tokens, SONNET) for tokens in (1000, 2600)] == [0, 2600]
    assert readable(5000, NO_CACHE) == 0


def test_the_hints_that_keep_a_long_session_linear_change_no_figure():
    """A session that grows, changes its tools, rewrites its history and waits past the TTLs,
    predicted with `marks` and `shared` given and without them (every block walked), alike."""
    import random

    rng = random.Random(7)
    hinted, plain = [], []
    history: list[Block] = []
    tools, at, before = "t0", 0.0, 0
    for n in range(120):
        at += rng.choice((5, 30, 400, 700))
        head = [Block(tools, 1500), Block("system", 300)]
        shared = 2 + len(history) if before else 0
        if rng.random() < 0.05:
            tools, shared = f"t{n}", 0
            head = [Block(tools, 1500), Block("system", 300)]
        if rng.random() < 0.05:
            history, shared = [], min(shared, 2)
        history.append(Block(f"m{n}", rng.randint(1, 400)))
        blocks = [*head, *history]
        hinted.append(Request(at, blocks, marks=(1, len(blocks) - 1), shared=shared))
        plain.append(Request(at, breakpoints(blocks, system_end=1)))
        before = len(blocks)
    for rules in (SONNET, rules_for("openai", "gpt-4o"), NO_CACHE):
        assert predict(hinted, rules) == predict(plain, rules)
    assert {use.read > 0 for use in predict(hinted, SONNET)} == {True, False}
    # A hint whose last shared block differs is ignored: every block is walked.
    first = Request(0, breakpoints([Block("tools", 1500), Block("system", 300), Block("m0", 50)], system_end=1))
    edited = breakpoints([Block("tools", 1500), Block("system", 300), Block("m0 edited", 50), Block("m1", 50)],
                         system_end=1)
    assert predict([first, Request(10, edited, shared=3)], SONNET) == predict([first, Request(10, edited)], SONNET)
    assert predict([first, Request(10, edited, shared=3)], SONNET)[1] == CacheUse(read=1800, write=100)
