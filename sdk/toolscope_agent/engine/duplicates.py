"""Duplicate outputs: a tool output identical to an earlier output of the same tool in the same
session is not sent again; a short placeholder pointing at the first one is sent instead.

"Identical" means equal after `normalize_output`: trailing whitespace (spaces, tabs, carriage
returns, any Unicode whitespace) is removed from the end of every line, and trailing blank lines
from the end of the text. Leading whitespace and everything inside a line still count, so
differently indented outputs differ, while CRLF and LF endings of the same lines do not.

Duplicates are per tool name: the same text returned by two different tools is not a duplicate.
An output that normalises to the empty string is never a duplicate (nor an original).

The placeholder names the first call as the model saw it: by its call id where the model's protocol
shows ids (a provider's tool_use / tool_call id), else by its arguments (through the MCP gateway the
model never sees an id: the client's call id stays between the client and the model).

The agent applies this with `DuplicateTracker` as calls happen; the server links recorded calls
with `find_duplicates` (or with stored fingerprints, `output_fingerprint`). Both give the same
answer for the same calls in the same order.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

_TRACKER_FORMAT = 1
# Arguments cited by a placeholder are cut to this many characters.
CITED_ARGUMENTS_CHARS = 120
# The session metadata "gateway" of sessions recorded through the MCP gateway, whose placeholders
# cite arguments (the model saw no call ids).
MCP_GATEWAY = "toolscope-mcp"


def normalize_output(text: str) -> str:
    """`text` without trailing whitespace on any line and without trailing blank lines."""
    # Splitting and stripping every line measured faster (17 µs for 2 KB) than first searching
    # for a line that needs it, by regex (52 µs) or by substring (42 µs).
    return "\n".join(line.rstrip() for line in text.split("\n")).rstrip()


def output_fingerprint(text: str) -> str:
    """sha256 (hex) of the UTF-8 of normalize_output(text). Lone surrogates, which JSON can
    carry, are encoded as they are (surrogatepass) rather than failing."""
    return _digest(normalize_output(text))


def normalized_fingerprint(normalized: str) -> str:
    """output_fingerprint of a text whose normalize_output is `normalized` (computed already)."""
    return _digest(normalized)


def placeholder_text(*, tool_name: str, first_call_id: str, turn_index: int,
                     first_arguments: Mapping[str, Any] | None = None) -> str:
    """What is sent instead of a repeated output: the first call named by its id and turn, or, given
    `first_arguments` (where the model saw no id), by its arguments."""
    if first_arguments is not None:
        return f"[same output as the earlier {tool_name} call with {cited_arguments(first_arguments)}; not repeated]"
    return f"[same output as {tool_name} call {first_call_id} (turn {turn_index}); not repeated]"


def cited_arguments(arguments: Mapping[str, Any]) -> str:
    """A call's arguments as a placeholder cites them: JSON with sorted keys (a database may reorder
    them), cut to CITED_ARGUMENTS_CHARS characters."""
    text = json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)
    return text if len(text) <= CITED_ARGUMENTS_CHARS else text[:CITED_ARGUMENTS_CHARS - 1] + "…"


class DuplicateTracker:
    """First occurrences of the outputs of one session, per tool, on the agent's side."""

    def __init__(self) -> None:
        self._first: dict[tuple[str, str], tuple[str, int]] = {}
        # The arguments of first calls the model saw no id of (check's `arguments`), by call id.
        self._cited: dict[str, Mapping[str, Any]] = {}

    def __len__(self) -> int:
        return len(self._first)

    def check(self, tool_name: str, output: str, *, call_id: str, turn_index: int,
              arguments: Mapping[str, Any] | None = None) -> str | None:
        """The placeholder to send instead of `output` when the same tool returned the same output
        earlier in this session (from another call), else None after recording this call as the
        first occurrence of its output. `arguments`: where the model never sees `call_id`, the
        call's arguments (as they may be shown), which a placeholder then cites instead."""
        normalized = normalize_output(output)
        if not normalized:
            return None
        key = (tool_name, _digest(normalized))
        first = self._first.setdefault(key, (call_id, turn_index))
        if first[0] == call_id:  # the first occurrence (or the same call checked again)
            if arguments is not None:
                self._cited[call_id] = arguments
            return None
        return placeholder_text(tool_name=tool_name, first_call_id=first[0], turn_index=first[1],
                                first_arguments=self._cited.get(first[0]))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable snapshot: fingerprints and first calls (with the arguments a
        placeholder cites, where given), never the outputs."""
        return {
            "format": _TRACKER_FORMAT,
            "first": [[tool, digest, call_id, turn, *([self._cited[call_id]] if call_id in self._cited else [])]
                      for (tool, digest), (call_id, turn) in self._first.items()],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DuplicateTracker:
        """The tracker `to_dict` described; ValueError for anything else."""
        if not isinstance(data, Mapping) or data.get("format") != _TRACKER_FORMAT:
            raise ValueError(f"not a duplicate tracker snapshot (format {_TRACKER_FORMAT})")
        entries = data.get("first")
        if not isinstance(entries, list):
            raise ValueError("duplicate tracker snapshot: 'first' must be a list")
        tracker = cls()
        for entry in entries:
            if not (isinstance(entry, list | tuple) and len(entry) in (4, 5)
                    and all(isinstance(part, str) for part in entry[:3])
                    and isinstance(entry[3], int) and not isinstance(entry[3], bool)
                    and (len(entry) == 4 or isinstance(entry[4], Mapping))):
                raise ValueError(f"duplicate tracker snapshot: bad entry {entry!r}")
            tool, fingerprint, call_id, turn = entry[:4]
            tracker._first.setdefault((tool, fingerprint), (call_id, turn))
            if len(entry) == 5:
                tracker._cited[call_id] = entry[4]
        return tracker


def find_duplicates(calls: Sequence[tuple[str, str, str, int]]) -> list[str | None]:
    """For calls (call_id, tool_name, output, turn_index) in session order: the call_id of the
    first call of the same tool with the same output, or None for first occurrences and empty
    outputs. The turn index plays no part (parallel calls of one turn are ordered as given)."""
    first: dict[tuple[str, str], str] = {}
    found: list[str | None] = []
    for call_id, tool_name, output, _turn in calls:
        normalized = normalize_output(output)
        if not normalized:
            found.append(None)
            continue
        original = first.setdefault((tool_name, _digest(normalized)), call_id)
        found.append(None if original == call_id else original)
    return found


def _digest(normalized: str) -> str:
    return hashlib.sha256(normalized.encode("utf-8", "surrogatepass")).hexdigest()
