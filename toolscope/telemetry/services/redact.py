"""Redaction of accepted events before they are stored: secret-looking text is cut out, and the
arguments a tool's `redact` setting names are blanked (docs/events.md)."""

from __future__ import annotations

from typing import Any

from toolscope_agent.engine.redaction import redact_arguments, redact_value

from toolscope.policies.models import Tool
from toolscope.telemetry.models import Project


def redact_keys(project: Project, events: list[dict[str, Any]]) -> dict[str, set[str]]:
    names = {event["tool_name"] for event in events if event["type"] == "tool_call"}
    if not names:
        return {}
    rows = Tool.objects.filter(project=project, name__in=names).values_list("name", "redact")
    return {name: set(keys) for name, keys in rows if keys}


def event_redact(event: dict[str, Any], keys: dict[str, set[str]]) -> dict[str, Any]:
    """The event with secret-looking text cut out of every string, and the tool's redacted
    argument keys blanked. Tool definitions (catalog, turn tools) are the agent's own code and
    are kept as sent."""
    redacted = {
        name: value if name == "tools" else redact_value(value) for name, value in event.items()
    }
    if "arguments" in event:
        redacted["arguments"] = redact_arguments(event["arguments"], keys.get(event["tool_name"], ()))
    return redacted
