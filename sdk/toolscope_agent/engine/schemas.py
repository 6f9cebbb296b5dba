"""Tool definitions: one canonical form, one hash, shared by the server and the agent.

The hash identifies a definition across requests, so an agent can send a tool's full schema once
and then only `{"name", "schema_hash"}`. Both sides must compute it byte for byte alike: canonical
JSON (sorted keys, no whitespace, UTF-8) of name, description and input schema.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def schema_hash(name: str, description: str, input_schema: dict[str, Any]) -> str:
    document = {"name": name, "description": description, "input_schema": input_schema}
    return hashlib.sha256(canonical_json(document).encode("utf-8")).hexdigest()


def normalize_tool(definition: dict[str, Any]) -> dict[str, Any]:
    """A tool definition in any common shape as {name, description, input_schema, source}.

    Accepts OpenAI Chat Completions (`{"type": "function", "function": {..., "parameters"}}`),
    OpenAI Responses (`{"type": "function", "name", "parameters"}`), Anthropic (`input_schema`),
    MCP (`inputSchema`) and toolscope's own shape.
    """
    body = definition.get("function", definition) if definition.get("type") == "function" else definition
    schema = body.get("input_schema", body.get("parameters", body.get("inputSchema", {})))
    return {
        "name": body.get("name", ""),
        "description": body.get("description", "") or "",
        "input_schema": schema if isinstance(schema, dict) else {},
        "source": definition.get("source", body.get("source", "")) or "",
    }
