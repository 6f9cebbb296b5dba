"""What a tool definition costs in tokens: the text toolscope counts, and how.

What is counted
---------------
Providers do not send a tool's JSON to the model as is. They render the `tools` of a request
into the prompt in their own internal format, which is not public (neither OpenAI nor Anthropic
publishes how a definition is laid out in the prompt) and may change between models. toolscope
therefore cannot count the exact prompt tokens a definition becomes. It counts instead **the
JSON of the definition as it is sent on the wire**, which is an **estimate of schema cost**:

- it tracks the real cost closely: the provider's rendering carries the same names, descriptions,
  property names, types and enums, which are where the tokens are; only the punctuation differs;
- it is identical for every project and every agent (no per-model template to keep up to date),
  so numbers compare across projects, tools and policy versions;
- it is computable by anyone from the definition alone.

Provider-reported usage is stored beside these estimates, so the difference can be seen.

The text of one tool is one compact JSON document (separators `,` and `:`, no whitespace,
non-ASCII characters as themselves, not `\\uXXXX` escapes), in the shape of one entry of the
request's tools array:

- ``flavor="openai"`` (Chat Completions):
  ``{"type":"function","function":{"name":...,"description":...,"parameters":...}}``
- ``flavor="anthropic"`` (Messages): ``{"name":...,"description":...,"input_schema":...}``

The wrapper keys are fixed and always in that order. ``description`` is left out when it is
empty, as clients leave it out of the request. The input schema's keys are sorted at every
level, as ``schema_hash`` sorts them: a definition's cost then depends on its content alone, so
one hash always has one cost, whichever process counts it and whatever key order the agent sent
or the database kept (PostgreSQL's jsonb reorders keys). Key order moves a count by a token or
two in a hundred at most.

A set of tools costs the sum of its tools' costs. The array brackets and the commas between
entries are ignored, as are merges of tokens across entries: counted as one JSON array, a set
differs from the sum by less than a token per tool, in either direction. In exchange the cost is
additive: the cost of any subset a policy selects is the sum of its members, whatever else is
advertised.

Counting
--------
A :data:`TokenCounter` maps a text to its token count. The server uses an exact BPE counter
(tiktoken, ``o200k_base`` by default). An agent without a tokenizer can use
:func:`approximate_counter`, one token per four characters, rounded up.

This module is pure: the standard library only, no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

TokenCounter = Callable[[str], int]
"""Maps a text to the number of tokens it encodes to."""

FLAVORS: tuple[str, ...] = ("openai", "anthropic")
"""The request shapes a definition can be rendered in; ``"openai"`` is the default."""


def _compact(document: Mapping[str, Any]) -> str:
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)


def _body(name: str, description: str, schema_key: str, input_schema: Mapping[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name}
    if description:
        body["description"] = description
    body[schema_key] = _sorted(input_schema)
    return body


def _sorted(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    return value


def render_tool_openai(name: str, description: str, input_schema: Mapping[str, Any]) -> str:
    """The tool as one entry of an OpenAI Chat Completions request's `tools` array, compact JSON."""
    return _compact({"type": "function", "function": _body(name, description, "parameters", input_schema)})


def render_tool_anthropic(name: str, description: str, input_schema: Mapping[str, Any]) -> str:
    """The tool as one entry of an Anthropic Messages request's `tools` array, compact JSON."""
    return _compact(_body(name, description, "input_schema", input_schema))


def render_tool(name: str, description: str, input_schema: Mapping[str, Any], flavor: str = "openai") -> str:
    """The tool rendered in `flavor` ("openai" or "anthropic"); ValueError for any other flavor."""
    if flavor == "openai":
        return render_tool_openai(name, description, input_schema)
    if flavor == "anthropic":
        return render_tool_anthropic(name, description, input_schema)
    raise ValueError(f"unknown flavor {flavor!r}; allowed: {', '.join(FLAVORS)}")


def render_tools(tools: Iterable[Mapping[str, Any]], flavor: str = "openai") -> list[str]:
    """Each tool's rendering, in order.

    A tool is toolscope's canonical shape (see `schemas.normalize_tool`): `name`, `description`
    (optional, default "") and `input_schema` (optional, default {}).
    """
    return [
        render_tool(tool["name"], tool.get("description", "") or "", tool.get("input_schema", {}), flavor)
        for tool in tools
    ]


def tool_tokens(
    name: str, description: str, input_schema: Mapping[str, Any], counter: TokenCounter, flavor: str = "openai"
) -> int:
    """The estimated schema cost of one tool under `counter`."""
    return counter(render_tool(name, description, input_schema, flavor))


def tools_tokens(tools: Iterable[Mapping[str, Any]], counter: TokenCounter, flavor: str = "openai") -> int:
    """The estimated schema cost of a set of tools: the sum of each tool's cost."""
    return sum(counter(text) for text in render_tools(tools, flavor))


def approximate_counter(text: str) -> int:
    """One token per four characters (code points), rounded up: for agents without a tokenizer.

    English prose and code average about four characters per token under o200k_base and
    cl100k_base; JSON and non-Latin scripts cost more tokens per character than this says.
    """
    return (len(text) + 3) // 4
