"""Helpers for the transcript mapping tests: fixture bodies and views of the mapped events."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from api.transcripts import MappedTranscript, map_transcript

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "transcripts"
RECEIVED_AT = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)


def load_fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def map_fixture(name: str) -> MappedTranscript:
    return map_transcript(load_fixture(name), received_at=RECEIVED_AT)


def of_type(mapped: MappedTranscript, event_type: str) -> list[dict[str, Any]]:
    return [event for event in mapped.events if event["type"] == event_type]


def call_summary(mapped: MappedTranscript) -> list[tuple[int, str, str, str]]:
    """(turn_index, call_id, tool_name, status) of every tool call, in event order; status "" when
    the transcript does not say (the worker classifies the output)."""
    return [
        (event["turn_index"], event["call_id"], event["tool_name"], event.get("status", ""))
        for event in of_type(mapped, "tool_call")
    ]


def calls_by_id(mapped: MappedTranscript) -> dict[str, dict[str, Any]]:
    return {event["call_id"]: event for event in of_type(mapped, "tool_call")}


def tool_message(body: dict[str, Any], call_id: str) -> Any:
    """The content of the chat `tool` message that answers `call_id`, as the fixture holds it."""
    return next(m["content"] for m in body["messages"] if m.get("tool_call_id") == call_id)
