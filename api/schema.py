"""OpenAPI description pieces that drf-spectacular cannot infer."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from toolscope_agent.engine.search import RANKERS

ERROR = {"$ref": "#/components/schemas/Error"}
RETRY_AFTER = {"Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait before sending again."}}
# Errors any operation with an API key can answer, wherever they come from (api/auth.py,
# api/throttling.py, api/middleware.py); the views document their own 400s and 404s.
KEY_ERRORS = {
    "401": "No API key, or one that is unknown or revoked.",
    "403": "The API key lacks the scope this operation needs.",
    "429": "The API key's rate limit is reached.",
    "500": "An unexpected error; `request_id` names it in the server's log.",
    "503": "The database is unavailable.",
}
# Errors of any operation that reads a JSON body (api/parsers.py, toolscope/chunked.py).
BODY_ERRORS = {
    "400": "The body is not valid JSON, nested too deep, or has a bad field (`field` names it).",
    "413": "The body, decompressed, or its number of events is over the limit.",
    "415": "Not JSON, or a Content-Encoding other than gzip.",
}


def fix_responses(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """A postprocessing hook (SPECTACULAR_SETTINGS): every operation documents the errors it can
    answer, as the Error schema."""
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses = operation["responses"]
            _require_body(operation)
            if not operation.get("security"):
                continue
            errors = {**KEY_ERRORS, **(BODY_ERRORS if "requestBody" in operation else {})}
            for status, description in errors.items():
                documented = responses.setdefault(status, {})
                documented["description"] = documented.get("description") or description
                documented.setdefault("content", {"application/json": {"schema": ERROR}})
                if status in ("429", "503"):
                    documented["headers"] = RETRY_AFTER
    return result


def _require_body(operation: dict[str, Any]) -> None:
    """A body schema with required properties needs a body; drf-spectacular only knows that of
    serializers, not of the schemas given as dicts (EVENT_BATCH_SCHEMA, TRANSCRIPT_SCHEMA)."""
    body = operation.get("requestBody")
    schema = body and body.get("content", {}).get("application/json", {}).get("schema", {})
    if schema and ("required" in schema or "anyOf" in schema):
        body["required"] = True


class ApiKeyScheme(OpenApiAuthenticationExtension):
    target_class = "api.auth.ApiKeyAuthentication"
    name = "ApiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A project API key (`ts_…`). Scopes: ingest, policy:read, admin.",
        }


# Event fields as services/events.py checks them: to what the columns the workers write can hold.
_STRING = {"type": "string"}
_TEXT = {"type": "string", "description": "Free text: NUL and unpaired surrogates are stored as U+FFFD."}
_NO_NUL = "^[^\u0000]*$"
# At least one character that is not white space; never NUL.
_ID = {"type": "string", "minLength": 1, "maxLength": 200, "pattern": "^[^\u0000]*[^\\s\u0000][^\u0000]*$"}
_NAME = {"type": "string", "maxLength": 200, "pattern": _NO_NUL}
_NAME_ANY = {"type": "string", "maxLength": 200}
_COUNT = {"type": "integer", "minimum": 0}
_INT32 = {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}
_SMALL_COUNT = {"type": "integer", "minimum": 0, "maximum": 2**15 - 1}
_NUMBER = {"type": "number", "minimum": 0, "maximum": 2**31 - 1}
_JSON_OBJECT = {"type": "object", "description": "Any JSON object nested at most 64 levels deep; integers fit in "
                "64 bits; NUL in keys and strings is stored as U+FFFD."}
# The pattern states the years as written; the range itself is in UTC (an offset can move a time
# on the first or last day across it).
_TIMESTAMP = {"oneOf": [{"type": "string", "format": "date-time", "pattern": "^(19[7-9][0-9]|2[0-9]{3})-"},
                        {"type": "number", "minimum": 0, "maximum": 32503679999}],
              "description": "ISO 8601 with a time zone, or epoch seconds, from 1970-01-01 to before 3000-01-01; "
                             "defaults to the time received."}


def _or_null(schema: dict[str, Any]) -> dict[str, Any]:
    # OpenAPI 3.0: an enum admits null only when it lists it, whatever `nullable` says.
    if "enum" in schema:
        return {**schema, "nullable": True, "enum": [*schema["enum"], None]}
    return {**schema, "nullable": True}


def _null_as_absent(schema: dict[str, Any]) -> dict[str, Any]:
    """services/events.py reads a null field as an absent one: every optional property may be null."""
    required = set(schema.get("required", []))
    return {**schema, "properties": {name: value if name in required else _or_null(value)
                                     for name, value in schema["properties"].items()}}


_TOOL = _null_as_absent({"type": "object", "required": ["name"], "properties": {
    "name": _ID, "description": _TEXT, "input_schema": _JSON_OBJECT, "source": _NAME,
    "schema_hash": {**_NAME, "description": "Instead of the definition, for one sent before."}}})
# A catalog event registers definitions: each needs its schema, and a schema_hash is not read.
_CATALOG_TOOL = _null_as_absent({"type": "object", "required": ["name", "input_schema"], "properties": {
    "name": _ID, "description": _TEXT, "input_schema": _JSON_OBJECT, "source": _NAME}})
# The same rules for PUT /api/v1/tools (api/serializers.py), whose fields drf-spectacular
# cannot describe on its own.
ID, NAME, TEXT = _ID, _NAME, _TEXT


def _event(kind: str, required: list[str], properties: dict[str, Any]) -> dict[str, Any]:
    return _null_as_absent({
        "type": "object",
        "required": ["type", "id", *required],
        "properties": {"type": {"type": "string", "enum": [kind]}, "id": _ID, "timestamp": _TIMESTAMP,
                       **properties},
    })


EVENT_BATCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["events"],
    "properties": {"events": {"type": "array", "minItems": 1, "maxItems": 1000, "items": {"oneOf": [
        _event("session", [], {"session_id": _ID, "action": {"type": "string", "enum": ["start", "end"]},
                               "agent_name": _NAME, "model": _NAME, "metadata": _JSON_OBJECT}),
        _event("turn", ["session_id", "index"], {
            "session_id": _ID, "index": _INT32, "model": _NAME, "tools": {"type": "array", "items": _TOOL},
            "usage": _null_as_absent({"type": "object", "properties": {
                "input_tokens": _INT32, "output_tokens": _INT32, "cached_tokens": _INT32,
                "cache_write_tokens": _INT32, "cache_write_1h_tokens": _INT32}}),
            "latency_ms": _NUMBER, "system_prompt": _TEXT, "system_prompt_chars": _INT32,
            "task_message": _TEXT, "timed": {"type": "boolean"}, "tools_known": {"type": "boolean"},
            "messages": {"type": "array", "items": {"type": "object", "required": ["role", "content"], "properties": {
                "role": _NAME, "content": _TEXT}}}}),
        _event("tool_call", ["session_id", "turn_index", "tool_name"], {
            "session_id": _ID, "turn_index": _INT32, "call_id": _NAME, "tool_name": _ID,
            "arguments": _JSON_OBJECT, "output": _TEXT,
            "status": {"type": "string", "enum": ["ok", "error", "denied", "unknown_tool", "schema_error"]},
            "error": _TEXT, "duration_ms": _NUMBER, "retries": _SMALL_COUNT,
            "approval": {"type": "string", "enum": ["not_required", "approved", "denied", "timed_out"]},
            "status_from": _NAME, "timed": {"type": "boolean"}}),
        _event("catalog", ["tools"], {"tools": {"type": "array", "items": _CATALOG_TOOL}}),
    ]}}},
}

# Transcripts come as the provider took them, where null means absent (api/transcripts/).
TRANSCRIPT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Needs `messages` (OpenAI Chat Completions, Anthropic) or `input` (OpenAI Responses).",
    "anyOf": [{"required": ["messages"]}, {"required": ["input"]}],
    "properties": {
        "format": _or_null({"type": "string", "enum": ["openai_chat", "anthropic", "openai_responses"],
                            "description": "Detected from the body when absent."}),
        "session_id": _or_null({**_ID, "maxLength": 160,
                                "description": "Derived from the conversation when absent."}),
        "agent_name": _or_null(_NAME_ANY), "model": _or_null(_NAME_ANY),
        "metadata": _or_null({"type": "object"}),
        "timestamp": _or_null(_TIMESTAMP),
        "messages": {"type": "array", "items": {"type": "object"},
                     "description": "OpenAI Chat Completions or Anthropic Messages messages."},
        "system": {"description": "Anthropic system prompt (string or text blocks)."},
        "input": _or_null({"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}],
                           "description": "OpenAI Responses input: items, or one user message."}),
        "instructions": _or_null({"type": "string", "description": "OpenAI Responses instructions."}),
        "tools": _or_null({"type": "array", "items": {"type": "object"}}),
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
                "after_tools": {**_NAMES, "description": "The rule also matches once the session has called one of "
                                                         "these (absent: none)."},
                "groups": _NAMES}}},
            "progressive": {"type": "object", "properties": {"hint_prefix": _STRING}},
            "tool_search": {"type": "object", "properties": {
                "top_k": _COUNT, "max_top_k": _COUNT, "provider_search": {"type": "boolean"},
                "defer_loading": {"type": "boolean", "description": (
                    "The provider's deferred loading with toolscope's search: the tools not sent are deferred, "
                    "tool_search runs in the client and its answers load them into the conversation "
                    "(Anthropic tool_reference blocks, a Responses tool_search_output). Absent: false.")},
                "ranker": {"type": "string", "enum": sorted(RANKERS),
                           "description": "The ranking tool_search uses; absent in documents published "
                                          "before rankers were versioned, which rank with fuzzy-1."},
                "learned": {"type": "boolean",
                            "description": "Rank with the project's learned history (search_history)."}}},
            "sticky_discovered": {"type": "boolean"},
            "tool_list": {"type": "string", "enum": ["per_request", "append_only", "fixed"],
                          "description": "How a session's tool list may change between requests (absent: "
                                         "per_request): append_only keeps every tool once sent, fixed reads the "
                                         "rules on the first request only and grows by searches and calls."},
            "rule_window": {"type": "integer", "minimum": 1, "maximum": 2,
                            "description": "Task messages the context rules read: the request's, and with 2 the "
                                           "instruction before it too (absent: 1)."},
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
        "search_history": {
            "type": "object",
            "description": "Served when selection.tool_search.learned is on and the project has recorded "
                           "sessions: what its agents asked before calling each tool, refreshed hourly; "
                           "its revision is part of the ETag.",
            "properties": {"revision": _STRING,
                           "tools": {"type": "object", "additionalProperties": _NAMES}},
        },
    },
}
