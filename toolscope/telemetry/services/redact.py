"""Redaction of accepted events before anything is stored (docs/events.md).

Every field of every event goes through the engine's rules (toolscope_agent.engine.redaction):
free text loses its secrets; ids, tool names and JSON object keys keep a keyed hash where a
secret was, so two events whose ids differ only in a secret stay two events, and a re-sent event
redacts to the same id (ingest compares redacted ids to recognise it); session metadata and
arguments lose the values of keys named like secrets, and of the keys a tool's `redact` setting
names; tool definitions lose secret literals but keep their schema's shape.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.conf import settings
from toolscope_agent.engine.redaction import (
    redact_arguments,
    redact_identifier,
    redact_text,
    redact_tool,
    redact_value,
)

from toolscope.policies.models import Tool
from toolscope.telemetry.models import Project

# Short fields stored in 200-character columns: secrets in them become hashes, and an id the
# hashes would make too long becomes one hash.
IDENTIFIER_FIELDS = frozenset({"id", "session_id", "call_id", "tool_name", "agent_name", "model"})
MAX_IDENTIFIER_LENGTH = 200
FIT_HASH_CHARS = 12


def hash_key() -> bytes:
    """The key of the hashes that stand for secrets in ids: derived from SECRET_KEY, so a hash in
    the database cannot be checked against guessed secrets without it. Rotating SECRET_KEY
    changes the hashes: an event re-sent after a rotation is stored again."""
    return hashlib.sha256(b"toolscope-redaction:" + settings.SECRET_KEY.encode()).digest()


def identifier_redact(value: str, *, key: bytes | None = None) -> str:
    return redact_identifier(value, hash_key=key or hash_key(), max_length=MAX_IDENTIFIER_LENGTH)


def identifier_fit(value: str) -> str:
    """An id or name made from client text (OTLP attributes), fitted to MAX_IDENTIFIER_LENGTH
    characters the same way every time, so that a re-sent export is recognised. Its secrets are
    replaced before it is cut: a cut that splits a secret leaves a part no rule recognises, and
    that part would be stored (71 characters of a GitHub token once). An id still too long keeps
    its start and ends in a hash of the whole, so ids that differ only past the cut stay distinct.
    Ids that fit are redacted at ingest, as every id is."""
    if len(value) <= MAX_IDENTIFIER_LENGTH:
        return value
    redacted = redact_identifier(value, hash_key=hash_key())
    if len(redacted) <= MAX_IDENTIFIER_LENGTH:
        return redacted
    digest = hashlib.sha256(redacted.encode("utf-8", "surrogatepass")).hexdigest()[:FIT_HASH_CHARS]
    return f"{redacted[:MAX_IDENTIFIER_LENGTH - FIT_HASH_CHARS - 1]}~{digest}"


def text_fit(value: str, max_length: int) -> str:
    """Free text cut to `max_length` characters after its secrets are replaced (see identifier_fit)."""
    return value if len(value) <= max_length else redact_text(value)[:max_length]


def tool_definition_redact(definition: dict[str, Any], *, key: bytes | None = None) -> dict[str, Any]:
    """A definition in toolscope's shape with secret literals cut out; its schema otherwise intact."""
    return redact_tool(definition, hash_key=key or hash_key(), max_length=MAX_IDENTIFIER_LENGTH)


def _redact_keys(project: Project, names: set[str]) -> dict[str, set[str]]:
    """The `redact` setting of each of these (already redacted) tool names that has one."""
    if not names:
        return {}
    rows = Tool.objects.filter(project=project, name__in=names).values_list("name", "redact")
    return {name: set(keys) for name, keys in rows if keys}


def _field_redact(name: str, value: Any, key: bytes) -> Any:
    if name in IDENTIFIER_FIELDS and isinstance(value, str):
        return identifier_redact(value, key=key)
    if name == "tools" and isinstance(value, list):
        return [tool_definition_redact(tool, key=key) for tool in value]
    return redact_value(value, hash_key=key)


def events_redact(*, project: Project, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Validated events as they may be stored: secrets cut out of every field, and the arguments
    a tool's `redact` setting names blanked (one query for those settings, by redacted name)."""
    key = hash_key()
    redacted = [{name: _field_redact(name, value, key) for name, value in event.items() if name != "arguments"}
                for event in events]
    keys = _redact_keys(project, {event["tool_name"] for event in redacted if event["type"] == "tool_call"})
    for event, stored in zip(events, redacted, strict=True):
        if "arguments" in event:
            tool_keys = keys.get(stored.get("tool_name", ""), ())
            stored["arguments"] = redact_arguments(event["arguments"], tool_keys, hash_key=key)
    return redacted
