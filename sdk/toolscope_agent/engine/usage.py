"""Provider usage in toolscope's terms (issue 26, item 2), shared by the SDK (from provider SDK
objects) and the server (from transcripts' assistant messages): `{input_tokens, output_tokens,
cached_tokens, cache_write_tokens, cache_write_1h_tokens}`.

OpenAI Chat (`prompt_tokens`, `completion_tokens`, `prompt_tokens_details.cached_tokens` and
`.cache_write_tokens`), OpenAI Responses (`input_tokens_details.cached_tokens` and
`.cache_write_tokens`) and Anthropic (`input_tokens` plus
`cache_read_input_tokens` and `cache_creation_input_tokens`, summed so that `input_tokens` is
the whole prompt as with OpenAI) are recognised; toolscope's own keys pass through. Cache reads
(`cached_tokens`) and writes (`cache_write_tokens`, Anthropic's creation tokens; of them
`cache_write_1h_tokens`, its `cache_creation.ephemeral_1h_input_tokens`) stay apart: they are
billed at different prices.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

FIELDS = ("input_tokens", "output_tokens", "cached_tokens", "cache_write_tokens", "cache_write_1h_tokens")


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return int(value)


def provider_usage(raw: Any) -> dict[str, int]:
    """`raw` (plain data: a provider's usage object as JSON) in toolscope's terms; {} for
    anything else. Counts that are not non-negative numbers are left out."""
    if not isinstance(raw, Mapping):
        return {}
    input_tokens = _count(raw.get("input_tokens", raw.get("prompt_tokens")))
    output_tokens = _count(raw.get("output_tokens", raw.get("completion_tokens")))
    cached = _count(raw.get("cached_tokens"))
    details_write = None
    for details_key in ("prompt_tokens_details", "input_tokens_details"):
        details = raw.get(details_key)
        if isinstance(details, Mapping):
            if cached is None:
                cached = _count(details.get("cached_tokens"))
            # OpenAI's cache writes, of the input tokens (as its cached_tokens are).
            details_write = details_write if details_write is not None else _count(details.get("cache_write_tokens"))
    cache_read = _count(raw.get("cache_read_input_tokens"))
    cache_write = _count(raw.get("cache_creation_input_tokens"))
    creation = raw.get("cache_creation")
    write_1h = _count(creation.get("ephemeral_1h_input_tokens")) if isinstance(creation, Mapping) else None
    if write_1h is None:
        write_1h = _count(raw.get("cache_write_1h_tokens"))
    if cache_read is not None or cache_write is not None:
        input_tokens = (input_tokens or 0) + (cache_read or 0) + (cache_write or 0)
        if cached is None:
            cached = cache_read or 0
    if cache_write is None:
        cache_write = _count(raw.get("cache_write_tokens"))
    if cache_write is None:
        cache_write = details_write
    found = {"input_tokens": input_tokens, "output_tokens": output_tokens, "cached_tokens": cached,
             "cache_write_tokens": cache_write, "cache_write_1h_tokens": write_1h}
    return {key: value for key, value in found.items() if value is not None}
