"""OpenAPI description pieces that drf-spectacular cannot infer."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiKeyScheme(OpenApiAuthenticationExtension):
    target_class = "api.auth.ApiKeyAuthentication"
    name = "ApiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A project API key (`ts_…`). Scopes: ingest, policy:read, admin.",
        }


_STRING = {"type": "string"}
_ID = {"type": "string", "minLength": 1, "maxLength": 200}
_COUNT = {"type": "integer", "minimum": 0}
_NUMBER = {"type": "number", "minimum": 0}
_TIMESTAMP = {"oneOf": [{"type": "string", "format": "date-time"}, {"type": "number"}],
              "description": "ISO 8601 with a time zone, or epoch seconds; defaults to the time received."}
_TOOL = {"type": "object", "required": ["name"], "properties": {
    "name": _ID, "description": _STRING, "input_schema": {"type": "object"}, "source": _STRING,
    "schema_hash": {"type": "string", "description": "Instead of the definition, for one sent before."}}}


def _event(kind: str, required: list[str], properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["type", "id", *required],
        "properties": {"type": {"type": "string", "enum": [kind]}, "id": _ID, "timestamp": _TIMESTAMP,
                       **properties},
    }


EVENT_BATCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["events"],
    "properties": {"events": {"type": "array", "minItems": 1, "maxItems": 1000, "items": {"oneOf": [
        _event("session", [], {"session_id": _ID, "action": {"type": "string", "enum": ["start", "end"]},
                               "agent_name": _STRING, "model": _STRING, "metadata": {"type": "object"}}),
        _event("turn", ["session_id", "index"], {
            "session_id": _ID, "index": _COUNT, "model": _STRING, "tools": {"type": "array", "items": _TOOL},
            "usage": {"type": "object", "properties": {
                "input_tokens": _COUNT, "output_tokens": _COUNT, "cached_tokens": _COUNT}},
            "latency_ms": _NUMBER, "system_prompt": _STRING, "system_prompt_chars": _COUNT,
            "task_message": _STRING,
            "messages": {"type": "array", "items": {"type": "object", "properties": {
                "role": _STRING, "content": _STRING}}}}),
        _event("tool_call", ["session_id", "turn_index", "tool_name"], {
            "session_id": _ID, "turn_index": _COUNT, "call_id": _STRING, "tool_name": _ID,
            "arguments": {"type": "object"}, "output": _STRING,
            "status": {"type": "string", "enum": ["ok", "error", "denied", "unknown_tool", "schema_error"]},
            "error": _STRING, "duration_ms": _NUMBER, "retries": _COUNT,
            "approval": {"type": "string", "enum": ["not_required", "approved", "denied", "timed_out"]}}),
        _event("catalog", ["tools"], {"tools": {"type": "array", "items": _TOOL}}),
    ]}}},
}

TRANSCRIPT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "format": {"type": "string", "enum": ["openai_chat", "anthropic", "openai_responses"],
                   "description": "Detected from the body when absent."},
        "session_id": _ID, "agent_name": _STRING, "model": _STRING, "metadata": {"type": "object"},
        "timestamp": _TIMESTAMP,
        "messages": {"type": "array", "items": {"type": "object"},
                     "description": "OpenAI Chat Completions or Anthropic Messages messages."},
        "system": {"description": "Anthropic system prompt (string or text blocks)."},
        "input": {"type": "array", "items": {"type": "object"}, "description": "OpenAI Responses input items."},
        "instructions": {"type": "string", "description": "OpenAI Responses instructions."},
        "tools": {"type": "array", "items": {"type": "object"}},
    },
}

_NAMES = {"type": "array", "items": _STRING}
POLICY_DOCUMENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The policy document, schema_version 1 (docs/policy.md).",
    "required": ["schema_version", "project", "label", "version", "etag", "selection", "outputs", "tools"],
    "properties": {
        "schema_version": {"type": "integer", "enum": [1]},
        "project": _STRING, "label": _STRING, "version": {"type": "integer", "minimum": 1},
        "etag": _STRING, "published_at": {"type": "string", "format": "date-time"},
        "encoding": {"type": "string", "enum": ["o200k_base", "cl100k_base"]},
        "context_window": {"type": "integer"},
        "selection": {"type": "object", "properties": {
            "mode": {"type": "string", "enum": ["all", "context_rules", "progressive", "tool_search"]},
            "allowed": {"type": "array", "items": _STRING, "nullable": True,
                        "description": "null: every catalog tool is allowed."},
            "always_on": _NAMES,
            "groups": {"type": "object", "additionalProperties": _NAMES},
            "context_rules": {"type": "array", "items": {"type": "object", "properties": {
                "name": _STRING, "keywords": _NAMES, "regex": {"type": "string", "nullable": True},
                "groups": _NAMES}}},
            "progressive": {"type": "object", "properties": {"hint_prefix": _STRING}},
            "tool_search": {"type": "object", "properties": {
                "top_k": _COUNT, "max_top_k": _COUNT, "provider_search": {"type": "boolean"}}},
            "sticky_discovered": {"type": "boolean"},
        }},
        "outputs": {"type": "object", "properties": {
            "duplicates": {"type": "object", "properties": {"suppress": {"type": "boolean"}}},
            "compaction": {"type": "array", "items": {"type": "object", "properties": {
                "tools": _STRING, "max_tokens": _COUNT,
                "strategy": {"type": "string", "enum": ["head_tail", "head", "tail", "json_prune", "dedupe_lines"]},
            }}},
        }},
        "tools": {"type": "object", "description": "Per-tool settings by tool name.",
                  "additionalProperties": {"type": "object"}},
    },
}
