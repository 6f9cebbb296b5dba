"""Model prices in dollars per million tokens, by component, as of a moment (issue 26, item 1).

Source, in this order:

1. the project's own prices (`ModelPrice` rows: negotiated prices, models the library does not
   know), the latest whose `valid_from` is on or before the moment, for the model's name exactly
   (and the provider, when the row names one);
2. `genai-prices` (pinned in requirements.in): its bundled snapshot of the providers' published
   prices, read offline. Its auto-update (`UpdatePrices`, which downloads) is never started, so a
   price changes only when the pinned version does, and the snapshot's own validity dates pick
   the price in force at the moment.

Components: `input` (uncached input), `output`, `cache_read`, `cache_write` (Anthropic's 5-minute
cache write; OpenAI bills no write: None) and `cache_write_1h` (Anthropic's 1-hour TTL). A
provider may bill more past a prompt size (Anthropic's long-context tier above 200,000 input
tokens): each component carries its tiers, and `Price.of(component, input_tokens)` applies them.
A component the source does not price is None (not zero: unknown is not free).
"""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from toolscope_agent.engine.cache import rules_for
from toolscope_agent.engine.replay_pricing import CachePricing

COMPONENTS = ("input", "output", "cache_read", "cache_write", "cache_write_1h")
_LIBRARY_FIELDS = {"input": "input_mtok", "output": "output_mtok", "cache_read": "cache_read_mtok",
                   "cache_write": "cache_write_mtok", "cache_write_1h": "cache_write_1h_mtok"}


@dataclass(frozen=True)
class Component:
    """One component's price per million tokens, and the higher prices of larger prompts:
    `tiers` are (input tokens from which it applies, price), ascending."""

    base: Decimal
    tiers: tuple[tuple[int, Decimal], ...] = ()

    def at(self, input_tokens: int) -> Decimal:
        price = self.base
        for start, tier_price in self.tiers:
            if input_tokens > start:
                price = tier_price
        return price


@dataclass(frozen=True)
class Price:
    """A model's prices per million tokens, where they come from, and from when."""

    provider: str
    model: str  # the model as the source names it
    source: str  # "genai-prices 0.2.3" or "project price: <note>"
    components: dict[str, Component | None] = field(default_factory=dict)
    valid_from: datetime | None = None

    def of(self, component: str, input_tokens: int = 0) -> Decimal | None:
        """Dollars per million tokens of `component` for a request of `input_tokens` input
        tokens (for tiers), or None when the source does not price it."""
        found = self.components.get(component)
        return found.at(input_tokens) if found is not None else None

    def rates(self, input_tokens: int = 0) -> dict[str, Decimal] | None:
        """Dollars per million tokens of each way input is billed (engine.cache.CacheUse's kinds:
        `uncached`, `read`, `write`, `write_1h`) for a request of `input_tokens`; a cache price the
        source does not give is the input price (unknown is not free); None without an input price."""
        uncached = self.of("input", input_tokens)
        if uncached is None:
            return None
        write = self.of("cache_write", input_tokens) or uncached
        return {"uncached": uncached, "read": self.of("cache_read", input_tokens) or uncached, "write": write,
                "write_1h": self.of("cache_write_1h", input_tokens) or write}


def library_version() -> str:
    return importlib.metadata.version("genai-prices")


def model_price(*, model: str, at: datetime, provider: str = "", overrides: Sequence[Any] = ()) -> Price | None:
    """The prices of `model` (of `provider` when given: "anthropic", "openai", ...) in force at
    `at`: the latest applicable of `overrides` (a project's ModelPrice rows), else the library's;
    None when neither knows the model."""
    own = _override(model, at, provider, overrides)
    return own if own is not None else _library_price(model, at, provider)


def _override(model: str, at: datetime, provider: str, overrides: Sequence[Any]) -> Price | None:
    applicable = [row for row in overrides if row.model == model and (not row.provider or not provider
                                                                       or row.provider == provider)
                  and row.valid_from <= at]
    if not applicable:
        return None
    row = max(applicable, key=lambda row: row.valid_from)
    components = {name: (Component(value) if (value := getattr(row, f"{name}_mtok")) is not None else None)
                  for name in COMPONENTS}
    return Price(provider=row.provider or provider, model=row.model, source=f"project price: {row.note or row.model}",
                 components=components, valid_from=row.valid_from)


def _library_price(model: str, at: datetime, provider: str) -> Price | None:
    snapshot = _snapshot()
    try:
        found_provider, info = snapshot.find_provider_model(model, None, provider or None, None)
        prices = info.get_prices(at)
    except LookupError:
        return None
    except ValueError:  # an unknown provider id, or a model no price period covers
        return None
    components: dict[str, Component | None] = {}
    for name, attribute in _LIBRARY_FIELDS.items():
        value = getattr(prices, attribute, None)
        if value is None:
            components[name] = None
        elif isinstance(value, Decimal):
            components[name] = Component(value)
        else:  # genai_prices.types.TieredPrices
            components[name] = Component(value.base, tuple((tier.start, tier.price) for tier in value.tiers))
    return Price(provider=found_provider.id, model=info.id, source=f"genai-prices {library_version()}",
                 components=components)


@functools.cache
def _snapshot() -> Any:
    """genai-prices' bundled snapshot (imported here: the web process needs it only to price)."""
    from genai_prices import data_snapshot

    return data_snapshot.get_snapshot()


def cache_pricing(price: Price | None, *, provider: str = "", model: str = "") -> CachePricing | None:
    """`price` as the engine's replay bills requests (engine.replay_pricing.CachePricing: floats per
    million, the provider's caching rules, `Price.rates`); None without an input price."""
    rates = price.rates() if price is not None else None
    if price is None or rates is None:
        return None
    return CachePricing(rules_for(provider or price.provider, model or price.model), input=float(rates["uncached"]),
                        cache_read=float(rates["read"]), cache_write=float(rates["write"]),
                        cache_write_1h=float(rates["write_1h"]))
