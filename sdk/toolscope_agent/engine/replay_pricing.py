"""A replayed session's input in dollars under the provider's prompt cache, as recorded and under
a policy (the simulation's pricing: engine/simulation.py builds the requests, this prices them).

The tool list heads each request's prompt (engine/cache.Conversation: the conversation after it,
the recorded input less the tools advertised, growing request by request), and the requests are
sent at their times. A policy that changes the list from one request to the next re-writes the
whole conversation after it at the write price; one that keeps it reads it at the read price. A
recoverable miss's round trip is the request again, read from the cache it just wrote.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from toolscope_agent.engine.cache import FIVE_MINUTES, Block, CacheUse, Conversation, Request, Rules, predict


@dataclass(frozen=True)
class CachePricing:
    """How requests are billed in dollars: the provider's caching (engine/cache.Rules), the TTL
    its agents write with, and its prices per million tokens of uncached input, cache reads,
    5-minute and 1-hour cache writes."""

    rules: Rules
    input: float
    cache_read: float
    cache_write: float
    cache_write_1h: float
    ttl: float = FIVE_MINUTES

    def dollars(self, use: CacheUse) -> float:
        return (use.uncached * self.input + use.read * self.cache_read + use.write * self.cache_write
                + use.write_1h * self.cache_write_1h) / 1_000_000


class PricedRequest(NamedTuple):
    """One request of a session to price, as recorded and under the policy."""

    at: float  # when it was sent
    advertised_key: str  # the recorded tool list's identity, and its schema tokens
    advertised: int
    sent_key: str  # the list at the head of the policy's prompt, and its schema tokens
    sent: int
    rest: int  # the recorded conversation after the tool list
    policy_rest: int  # the policy's: with what a native search loaded into it
    trips: int  # round trips (recoverable misses, failed searches): the request sent again


@dataclass(frozen=True)
class SessionDollars:
    recorded: float
    policy: float  # round trips included
    recorded_breaks: int  # requests whose tool list differs from the one before, as recorded
    policy_breaks: int  # the same, under the policy


def session_dollars(rows: Sequence[PricedRequest], pricing: CachePricing, *,
                    recorded: tuple[float, int] | None = None) -> SessionDollars:
    """A session's requests (`rows`, in order) in dollars under `pricing`'s cache. `recorded`:
    the session's (dollars, breaks) as recorded, when known (`recorded_dollars`: it depends on
    the recording alone, so replays of many policies price it once)."""
    policy = Conversation(ttl=pricing.ttl, head_ttl=pricing.ttl)
    under_policy = []
    policy_breaks = 0
    before: str | None = None
    for at, _, _, sent_key, sent, _, policy_rest, trips in rows:
        request = policy.request(at, (Block("t" + sent_key, sent),), policy_rest)
        under_policy.append(request)
        under_policy.extend(Request(at, request.blocks, request.marks, shared=len(request.blocks))
                            for _ in range(trips))
        if before is not None:
            policy_breaks += sent_key != before
        before = sent_key
    recorded_cost, recorded_breaks = recorded if recorded is not None else recorded_dollars(rows, pricing)
    policy_cost = sum(map(pricing.dollars, predict(under_policy, pricing.rules)))
    return SessionDollars(recorded=recorded_cost, policy=policy_cost, recorded_breaks=recorded_breaks,
                          policy_breaks=policy_breaks)


def recorded_dollars(rows: Sequence[PricedRequest], pricing: CachePricing) -> tuple[float, int]:
    """The session's requests as recorded (their advertised lists): (dollars, list changes)."""
    conversation = Conversation(ttl=pricing.ttl, head_ttl=pricing.ttl)
    requests = [conversation.request(row.at, (Block("t" + row.advertised_key, row.advertised),), row.rest)
                for row in rows]
    breaks = sum(row.advertised_key != before.advertised_key for before, row in itertools.pairwise(rows))
    return sum(map(pricing.dollars, predict(requests, pricing.rules))), breaks
