"""Tool errors told by their text: a project's error patterns (docs/events.md, "Tool errors").

OpenAI Chat Completions and Responses have no error field, and many MCP servers answer a failure
with plain text. When an event carries no explicit `status`, the project's patterns classify the
start of the call's output. Each pattern has a name (recorded on the call as "pattern: <name>")
and a kind:

- `error`: the text is how hosts render a failure (the MCP SDK's "Error executing tool …", a
  JSON-RPC "MCP error -32602: …"); the call's status becomes `error`.
- `unflagged`: the text reads like an error, but nothing flagged it (a server that answers
  "Error: …" with isError false). The status stays `ok`, as the agent saw it, and the call is
  marked `error_text_unflagged`, so operators see both counts apart.

Patterns are matched with RE2 (linear time) against the first `MATCH_CHARS` characters of the
output; `^` anchors at the start of the output. They are checked like context-rule regexes
(toolscope.policies.services.regex_safety) when saved.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import re2
from django.core.exceptions import ValidationError
from toolscope_agent.engine.bytecache import byte_lru_cache

from toolscope.policies.services.regex_safety import regex_problem

ERROR = "error"
UNFLAGGED = "unflagged"
KINDS = (ERROR, UNFLAGGED)
MATCH_CHARS = 2_000
MAX_PATTERNS = 50
MAX_NAME = 60

# Rules recorded on a call (ToolCall.error_rule) when no pattern decided.
RULE_STATUS = "status field"
RULE_IS_ERROR = "is_error flag"


def default_error_patterns() -> list[dict[str, str]]:
    """What MCP hosts write into a tool message when a call fails, and the plain "Error: …" of
    servers that do not flag their errors."""
    return [
        # The MCP Python SDK's FastMCP: ToolError and argument validation failures.
        {"name": "MCP tool error", "regex": r"^\s*Error executing tool \S+:", "kind": ERROR},
        # JSON-RPC errors as hosts render them (the TypeScript SDK's McpError, Claude Code).
        {"name": "MCP error", "regex": r"^\s*MCP error -?\d+:", "kind": ERROR},
        # "Error: …", "Database error: …": read like errors, flagged by nothing.
        {"name": "error text", "regex": r"^\s*(?:[A-Za-z]+ )?[Ee]rror:", "kind": UNFLAGGED},
    ]


def validate_error_patterns(value: Any) -> None:
    """Raises ValidationError naming the first bad pattern: its shape, or why its regex is refused
    (not RE2, or a backtracking shape agents without RE2 would choke on)."""
    if not isinstance(value, list):
        raise ValidationError("Error patterns must be a list of {name, regex, kind} objects.")
    if len(value) > MAX_PATTERNS:
        raise ValidationError(f"At most {MAX_PATTERNS} error patterns.")
    for index, pattern in enumerate(value):
        _validate_one(index, pattern)


def _validate_one(index: int, pattern: Any) -> None:
    where = f"Error pattern {index + 1}"
    if not isinstance(pattern, dict) or set(pattern) - {"name", "regex", "kind"}:
        raise ValidationError(f"{where}: must be an object with name, regex and kind.")
    name, regex, kind = pattern.get("name"), pattern.get("regex"), pattern.get("kind", ERROR)
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME:
        raise ValidationError(f"{where}: name must be text of 1 to {MAX_NAME} characters.")
    if kind not in KINDS:
        raise ValidationError(f"{where} ({name}): kind must be one of {', '.join(KINDS)}.")
    if not isinstance(regex, str) or not regex:
        raise ValidationError(f"{where} ({name}): regex must be a non-empty string.")
    if problem := regex_problem(regex):
        raise ValidationError(f"{where} ({name}): {problem}.")


@dataclass(frozen=True)
class Classification:
    status: str
    rule: str  # "" when nothing said anything
    unflagged: bool = False


@byte_lru_cache(8 * 1024 * 1024)  # bounded by bytes (toolscope_agent.engine.bytecache)
def _compiled(regex: str) -> Any:
    options = re2.Options()
    options.log_errors = False
    return re2.compile(regex, options)


def classify(*, event: dict[str, Any], patterns: list[dict[str, str]]) -> Classification:
    """An explicit status always wins (with the rule the client named in `status_from`, or
    "status field"); otherwise the first pattern matching the output's start decides."""
    if "status" in event:
        return Classification(event["status"], event.get("status_from") or RULE_STATUS)
    head = event.get("output", "")[:MATCH_CHARS]
    for pattern in patterns:
        try:
            matched = _compiled(pattern["regex"]).search(head) is not None
        except (re2.error, KeyError, TypeError):
            continue  # saved before validation existed: a broken pattern classifies nothing
        if matched:
            rule = f"pattern: {pattern['name']}"
            if pattern.get("kind", ERROR) == UNFLAGGED:
                return Classification("ok", rule, unflagged=True)
            return Classification("error", rule)
    return Classification("ok", "")
