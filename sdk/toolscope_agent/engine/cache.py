"""Prompt caching as providers bill it (issue 26, item 3): for each request of a session, the input
tokens read from the provider's cache, written to it, and not cached at all.

Pure and shared: the server prices recorded sessions and simulations with it, the SDK can price
what it is about to send. A request is its rendered prompt as **blocks** in the provider's order
(tools, then system, then messages), each with a `key` equal between two requests exactly when the
block's content is (a hash, a tool list's id...) and its token count. Providers cache exact
prefixes, so a prefix is known by the keys of all its blocks: a tool list that changes changes
every prefix after it, however little of the prompt changed.

**Anthropic** (explicit caching; docs.anthropic.com "Prompt caching"):

- A `cache_control` breakpoint on a block caches the prefix ending with it (at most 4 per
  request); the TTL is the breakpoint's, 5 minutes by default or 1 hour, and every read
  refreshes it at no cost.
- A request reads the longest cached prefix the breakpoints find: each breakpoint checks its own
  block boundary and those of the LOOKBACK blocks before it (20 in all), longest first.
- What follows the read, up to the last breakpoint, is written (billed `cache_creation_input_
  tokens`, at 1.25x the input price for 5 minutes, 2x for 1 hour: each written block at the TTL
  of the first breakpoint at or after it); what follows the last breakpoint is uncached input.
- A prefix shorter than the model's minimum (`anthropic_min_tokens`: 1,024 to 4,096 tokens by
  model) is neither written nor read.

**OpenAI** (automatic caching; platform.openai.com "Prompt caching"): prompts of at least 1,024
tokens are cached with no write charge; a later request reads the longest prefix it shares
with a request made within the retention (`OPENAI_RETENTION`: the in-memory cache lasts 5 to 10
minutes of inactivity, so 10 minutes is assumed; `prompt_cache_retention="24h"` keeps it a day),
counted from 1,024 tokens in steps of 128 (`cached_tokens`).

Every other provider is taken not to cache (`NO_CACHE`).

What the model cannot know, and assumes:

- **Where an Anthropic agent puts its breakpoints.** Recordings rarely say; `breakpoints` places
  them as the documented multi-turn pattern does: the end of the system prompt (tools and
  system) and the last message. A recording that reports cache figures calibrates this
  (`agreement`).
- **Partial blocks.** Caches match tokens, the model matches blocks: two requests whose block
  differs only in its last words share no part of it here (the provider may read part of it:
  OpenAI counts in 128-token steps of the shared prefix). A block per message keeps this small.
- **Routing.** OpenAI routes by a prefix hash and does not promise a hit; the model assumes the
  request reaches the cache (an upper bound on reads, a lower one on uncached input).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, overload

ANTHROPIC = "anthropic"
OPENAI = "openai"
NONE = "none"
FIVE_MINUTES = 300.0
ONE_HOUR = 3600.0
LOOKBACK = 20  # block boundaries an Anthropic breakpoint checks, its own included
MAX_BREAKPOINTS = 4
OPENAI_MIN_TOKENS = 1024
OPENAI_STEP = 128
OPENAI_RETENTION = 600.0
# Anthropic's minimum cacheable prompt by model, first pattern matching the model's name; the
# default for any other Claude model. From the "Prompt caching" page's table of minimums.
ANTHROPIC_MIN_TOKENS: tuple[tuple[str, int], ...] = (
    (r"opus-4-[56]|opus-4\.[56]|haiku-4-5|haiku-4\.5", 4096),
    (r"sonnet-4-6|sonnet-4\.6|haiku-3|3-haiku|3-5-haiku", 2048),
)
ANTHROPIC_DEFAULT_MIN_TOKENS = 1024


class Block(NamedTuple):  # immutable and cheap to build: a replay makes millions
    """A run of the prompt: `key` equal between requests exactly when the content is."""

    key: str
    tokens: int
    breakpoint: bool = False  # Anthropic: a cache_control marker on this block
    ttl: float = FIVE_MINUTES  # the breakpoint's TTL, in seconds


class Request(NamedTuple):  # immutable and cheap to build: a replay makes millions
    """A request's prompt, as blocks in the provider's order, sent at `at` (seconds).

    Two hints keep a long session linear: `marks`, the indices of the blocks with breakpoints
    (else the blocks are scanned for them), and `shared`, how many leading blocks equal those of
    the request before it in the same `predict` call (their prefixes are not walked again; a
    hint whose last block's key differs is ignored)."""

    at: float
    blocks: Sequence[Block]
    marks: Sequence[int] | None = None
    shared: int = 0


class CacheUse(NamedTuple):  # immutable and cheap to build: a replay makes millions
    """A request's input tokens by how the provider bills them."""

    read: int = 0
    write: int = 0  # written with a 5-minute TTL (Anthropic)
    write_1h: int = 0  # written with a 1-hour TTL (Anthropic)
    uncached: int = 0

    @property
    def input_tokens(self) -> int:
        return self.read + self.write + self.write_1h + self.uncached


@dataclass(frozen=True)
class Rules:
    """How a provider caches: `provider` (ANTHROPIC, OPENAI or NONE), the shortest prefix it
    caches, and for OpenAI how long a prefix stays after its last use and the step it counts in."""

    provider: str
    min_tokens: int = 0
    retention: float = OPENAI_RETENTION
    step: int = OPENAI_STEP


NO_CACHE = Rules(NONE)


class _Blocks(Sequence[Block]):
    """A request's blocks without copying its history: its head and the first `length` blocks of
    the conversation's history list, which later requests extend in place."""

    def __init__(self, head: tuple[Block, ...], history: list[Block], length: int) -> None:
        self.head, self.history, self.length = head, history, length

    def __len__(self) -> int:
        return len(self.head) + self.length

    @overload
    def __getitem__(self, index: int) -> Block: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Block]: ...
    def __getitem__(self, index: int | slice) -> Block | Sequence[Block]:
        width = len(self.head)
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return [self[position] for position in range(start, stop, step)]
            return [*self.head[start:stop], *self.history[max(0, start - width):max(0, stop - width)]]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self.head[index] if index < width else self.history[index - width]


class Conversation:
    """A session's requests as blocks, built one request at a time from what a recording knows:
    the blocks before the conversation (`head`: the tool list, the system prompt) and the
    conversation's size. The conversation grows by one block per request (what it added); one
    that shrank (compaction, a rewrite) starts over, sharing nothing after the head. Each request
    carries Anthropic's breakpoints where the documented multi-turn pattern puts them (the end of
    the head, for `head_ttl`, and the last block, for `ttl`; other providers ignore them) and
    what it shares with the request before (`Request.shared`), so pricing a session stays linear
    in its length."""

    def __init__(self, *, ttl: float = FIVE_MINUTES, head_ttl: float = FIVE_MINUTES) -> None:
        self.ttl, self.head_ttl = ttl, head_ttl
        self.history: list[Block] = []
        self.size = 0
        self.generation = 0
        self.head: tuple[str, ...] | None = None
        self.rewritten = False  # the last request's conversation had shrunk

    def request(self, at: float, head: Sequence[Block], size: int) -> Request:
        keys = tuple(block.key for block in head)
        shared = len(head) + len(self.history) if keys == self.head else 0
        self.rewritten = size < self.size
        if self.rewritten:
            self.generation += 1
            self.history, self.size = [], 0
            shared = min(shared, len(head))
        if size > self.size:
            self.history.append(Block(f"conversation:{self.generation}:{len(self.history)}", size - self.size,
                                      ttl=self.ttl))
            self.size = size
        self.head = keys
        if head:
            head = (*head[:-1], Block(head[-1].key, head[-1].tokens, ttl=self.head_ttl))
        blocks = _Blocks(tuple(head), self.history, len(self.history))
        return Request(at, blocks, marks=(len(head) - 1, len(blocks) - 1), shared=shared)


def anthropic_min_tokens(model: str) -> int:
    """The shortest prefix Anthropic caches for `model` (ANTHROPIC_MIN_TOKENS)."""
    for pattern, tokens in ANTHROPIC_MIN_TOKENS:
        if re.search(pattern, model.lower()):
            return tokens
    return ANTHROPIC_DEFAULT_MIN_TOKENS


def rules_for(provider: str, model: str = "", *, retention: float = OPENAI_RETENTION) -> Rules:
    """The caching rules of `provider` ("anthropic", "openai"; a model name alone is enough when
    the provider is blank: claude-* is Anthropic's, gpt-*/o1.. OpenAI's)."""
    provider = (provider or "").lower()
    name = model.lower()
    if provider == ANTHROPIC or (not provider and name.startswith("claude")):
        return Rules(ANTHROPIC, min_tokens=anthropic_min_tokens(model))
    if provider in (OPENAI, "azure") or (not provider and re.match(r"(gpt-|o\d|chatgpt|codex)", name)):
        return Rules(OPENAI, min_tokens=OPENAI_MIN_TOKENS, retention=retention)
    return NO_CACHE


def breakpoints(blocks: Sequence[Block], *, system_end: int, system_ttl: float = FIVE_MINUTES,
                ttl: float = FIVE_MINUTES) -> list[Block]:
    """`blocks` with breakpoints where a multi-turn Anthropic agent puts them, as the docs show:
    on the block ending the system prompt (index `system_end`: tools and system cached together,
    for `system_ttl`) and on the last block (the conversation so far, for `ttl`). Blocks that
    already have breakpoints are returned as they are."""
    if any(block.breakpoint for block in blocks):
        return list(blocks)
    last = len(blocks) - 1
    return [Block(block.key, block.tokens, True, system_ttl if index == system_end and index != last else ttl)
            if index in (system_end, last) else block for index, block in enumerate(blocks)]


def readable(shared: int, rules: Rules) -> int:
    """Of a prefix of `shared` tokens cached before, what a request sharing it reads: OpenAI counts
    from its minimum in steps; Anthropic reads it whole (its breakpoints fix where prefixes end)."""
    if shared < rules.min_tokens:
        return 0
    if rules.provider == OPENAI:
        return rules.min_tokens + (shared - rules.min_tokens) // rules.step * rules.step
    return shared if rules.provider == ANTHROPIC else 0


def predict(requests: Iterable[Request], rules: Rules) -> list[CacheUse]:
    """Each request's CacheUse under `rules`, the requests in the order sent (one session, or one
    cache: requests of other sessions sharing a prefix share the provider's cache too)."""
    if rules.provider == ANTHROPIC:
        return _Anthropic(rules).run(requests)
    if rules.provider == OPENAI:
        return _OpenAI(rules).run(requests)
    prefixes = _Prefixes()
    return [CacheUse(uncached=sums[-1] if (sums := prefixes.of(request)[1]) else 0) for request in requests]


class _Prefixes:
    """Prefix ids: a small int per distinct sequence of block keys, so equal prefixes of any two
    requests have equal ids without hashing their whole text. Holds the last request's ids and
    running token sums, extended in place from what the next request shares with it."""

    def __init__(self) -> None:
        self.ids: dict[tuple[int, str], int] = {}
        self.chain: list[int] = []
        self.sums: list[int] = []
        self.keys: list[str] = []
        self.shared = 0  # the last request's leading blocks taken from the one before it

    def of(self, request: Request) -> tuple[list[int], list[int]]:
        """(prefix id after each block, tokens up to and including each block) of `request`."""
        blocks, shared = request.blocks, max(0, request.shared)
        if shared > min(len(self.chain), len(blocks)) or (shared and self.keys[shared - 1] != blocks[shared - 1].key):
            shared = 0
        del self.chain[shared:], self.sums[shared:], self.keys[shared:]
        self.shared = shared
        previous = self.chain[-1] if self.chain else -1
        total = self.sums[-1] if self.sums else 0
        for block in blocks[shared:]:
            previous = self.ids.setdefault((previous, block.key), len(self.ids))
            total += block.tokens
            self.chain.append(previous)
            self.sums.append(total)
            self.keys.append(block.key)
        return self.chain, self.sums


def _marks(request: Request) -> list[int]:
    if request.marks is not None:
        return sorted({index for index in request.marks if 0 <= index < len(request.blocks)})[:MAX_BREAKPOINTS]
    return [index for index, block in enumerate(request.blocks) if block.breakpoint][:MAX_BREAKPOINTS]


class _Anthropic:
    def __init__(self, rules: Rules) -> None:
        self.rules = rules
        self.prefixes = _Prefixes()
        self.cache: dict[int, tuple[float, float]] = {}  # prefix id -> (expires at, ttl)

    def live(self, prefix: int, at: float) -> bool:
        entry = self.cache.get(prefix)
        return entry is not None and entry[0] >= at

    def run(self, requests: Iterable[Request]) -> list[CacheUse]:
        return [self.one(request) for request in requests]

    def one(self, request: Request) -> CacheUse:
        blocks = request.blocks
        ids, sums = self.prefixes.of(request)
        total = sums[-1] if sums else 0
        marks = [index for index in _marks(request) if sums[index] >= self.rules.min_tokens]
        if not marks:
            return CacheUse(uncached=total)
        hit = -1
        for mark in marks:
            for index in range(mark, max(-1, mark - LOOKBACK), -1):
                if index <= hit:
                    break
                if self.live(ids[index], request.at):
                    hit = index
                    break
        read = sums[hit] if hit >= 0 else 0
        if hit >= 0:
            self.cache[ids[hit]] = (request.at + self.cache[ids[hit]][1], self.cache[ids[hit]][1])
        write = write_1h = 0
        start = read
        for mark in marks:
            if mark <= hit:
                continue
            written = sums[mark] - start
            if blocks[mark].ttl >= ONE_HOUR:
                write_1h += written
            else:
                write += written
            start = sums[mark]
            self.cache[ids[mark]] = (request.at + blocks[mark].ttl, blocks[mark].ttl)
        return CacheUse(read=read, write=write, write_1h=write_1h, uncached=total - max(read, start))


class _OpenAI:
    """Every prefix a request sends is cached until `retention` after; a request refreshes the
    prefixes it sends. Kept linear: a request looks for a live prefix among the blocks after
    what it shares with the request before (and that request's whole prompt), then among the
    first LOOKBACK blocks (where a rewritten conversation returns to), and refreshes those."""

    def __init__(self, rules: Rules) -> None:
        self.rules = rules
        self.prefixes = _Prefixes()
        self.cache: dict[int, float] = {}  # prefix id -> expires at

    def run(self, requests: Iterable[Request]) -> list[CacheUse]:
        return [self.one(request) for request in requests]

    def one(self, request: Request) -> CacheUse:
        ids, sums = self.prefixes.of(request)
        total = sums[-1] if sums else 0
        if total < self.rules.min_tokens:
            return CacheUse(uncached=total)
        tail = self.prefixes.shared
        head = min(LOOKBACK, len(ids))
        shared = 0
        for index in (*range(len(ids) - 1, max(-1, tail - 2), -1), *range(min(head, tail - 1) - 1, -1, -1)):
            expires = self.cache.get(ids[index])
            if expires is not None and expires >= request.at:
                shared = sums[index]
                break
        read = readable(shared, self.rules)
        until = request.at + self.rules.retention
        for index in (*range(max(0, tail - 1), len(ids)), *range(head)):
            self.cache[ids[index]] = until
        return CacheUse(read=read, uncached=total - read)


@dataclass(frozen=True)
class Agreement:
    """Predicted against reported cache reads and writes over the requests that reported both."""

    requests: int = 0
    exact: int = 0  # requests whose predicted read and write both equal the reported ones
    reported_read: int = 0
    predicted_read: int = 0
    reported_write: int = 0
    predicted_write: int = 0

    @property
    def read_error(self) -> float:
        """|predicted - reported| reads over reported reads (0 when none were reported)."""
        return abs(self.predicted_read - self.reported_read) / self.reported_read if self.reported_read else 0.0


def agreement(predicted: Sequence[CacheUse], reported: Sequence[Mapping[str, int | None]]) -> Agreement:
    """How `predicted` matches `reported` ({"read", "write"} per request; a request whose
    provider reported no read is left out)."""
    requests = exact = reported_read = predicted_read = reported_write = predicted_write = 0
    for use, report in zip(predicted, reported, strict=True):
        read = report.get("read")
        if read is None:
            continue
        write = report.get("write") or 0
        requests += 1
        exact += use.read == read and use.write + use.write_1h == write
        reported_read += read
        predicted_read += use.read
        reported_write += write
        predicted_write += use.write + use.write_1h
    return Agreement(requests, exact, reported_read, predicted_read, reported_write, predicted_write)
