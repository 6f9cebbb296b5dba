"""What the model sees of a tool's answer after the policy's output rules (issue 27, item 4).

The gateway replaces a long or repeated answer's text with the compacted text or the duplicate
placeholder (engine/compaction, engine/duplicates). Many clients also hand the model the answer's
`structuredContent`, so it is shortened alike:

- a tool without an output schema: structured content is dropped with the long text (the text is
  what the spec asks clients to show when there is no schema);
- a tool with one: clients check structured content against it, so it is kept *valid*: every
  string in it longer than what the model now reads is shortened the same way (its head and tail
  kept, the middle replaced by a note naming `retrieve_tool_output` and the original's id), or,
  for a repeat, replaced by the placeholder. The result is checked against the schema; when the
  shortened value would not be valid (a `maxLength`, a `pattern`, an `enum`), the original is
  kept and the text alone is shortened.

The original stays retrievable whole: `retrieve_tool_output(id=...)` answers with the text the
server sent, and the structured content's strings are cut from it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

import jsonschema
import mcp.types as types

logger = logging.getLogger("toolscope_agent.gateway")

RETRIEVE_ID = re.compile(r'retrieve_tool_output\(id="([^"]+)"\)')
MIN_CUT = 200  # a string is shortened only when this many characters or more would go


def replaced(result: types.CallToolResult, text: str, *, output_schema: Mapping[str, Any] | None,
             ) -> types.CallToolResult:
    """`result` with its text blocks replaced by `text` (other blocks kept) and its structured
    content shortened alike (see the module's docstring)."""
    others = [block for block in result.content if not isinstance(block, types.TextContent)]
    structured = None
    if output_schema is not None and result.structured_content is not None:
        structured = shortened(result.structured_content, text, output_schema)
    return types.CallToolResult(content=[types.TextContent(text=text), *others], is_error=result.is_error,
                                structured_content=structured)


def shortened(structured: dict[str, Any], text: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """`structured` with each long string shortened to about `text`'s length (the compacted text,
    or the placeholder of a repeat), if the result still fits `schema`; else `structured`."""
    found = RETRIEVE_ID.search(text)
    budget = max(len(text), 1)
    note = (f"[… {{cut}} characters cut; the whole output: retrieve_tool_output(id=\"{found.group(1)}\")]"
            if found else "")

    def cut(value: Any) -> Any:
        if isinstance(value, str):
            if len(value) - budget < MIN_CUT:
                return value
            if not found:  # a repeat: the placeholder says where the output was
                return text
            head = budget * 3 // 5
            tail = budget - head
            return f"{value[:head]}\n{note.format(cut=len(value) - head - tail)}\n{value[len(value) - tail:]}"
        if isinstance(value, list):
            return [cut(item) for item in value]
        if isinstance(value, dict):
            return {key: cut(item) for key, item in value.items()}
        return value

    candidate = cut(structured)
    if candidate == structured:
        return structured
    try:
        jsonschema.validate(candidate, schema)
    except jsonschema.ValidationError as exc:
        logger.info("structured content left whole: shortened, it would not fit the tool's output schema (%s)",
                    exc.message)
        return structured
    except jsonschema.SchemaError:
        return structured
    return candidate  # type: ignore[no-any-return]
