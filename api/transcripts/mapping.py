"""`map_transcript`: a whole provider transcript (the body of `POST /api/v1/transcripts`) as
toolscope ingest events."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from toolscope_agent.engine.schemas import canonical_json

from api.transcripts import anthropic, openai_chat, openai_responses
from api.transcripts.common import (
    JSON,
    Conversation,
    TranscriptError,
    TranscriptTooLong,
    expect_moment,
    expect_object,
    expect_str,
    json_type,
)
from api.transcripts.detect import ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES, resolve_format
from api.transcripts.events import SessionInfo, build_events

PARSERS: dict[str, Callable[[JSON], Conversation]] = {
    OPENAI_CHAT: openai_chat.parse,
    ANTHROPIC: anthropic.parse,
    OPENAI_RESPONSES: openai_responses.parse,
}
# The conversation itself. Only these feed a derived session id, so the same conversation sent
# again with another model label, metadata or timestamp is recognised as the same session.
PROVIDER_FIELDS = ("system", "instructions", "messages", "input", "tools")
MAX_SESSION_ID_LENGTH = 160  # leaves room for ":t<index>" and ":call:<id>" within 200 characters
MAX_LABEL_LENGTH = 200


@dataclass(frozen=True)
class MappedTranscript:
    format: str
    session_id: str
    events: list[JSON]


def map_transcript(body: Any, *, received_at: datetime, max_calls: int | None = None) -> MappedTranscript:
    """Maps a transcript body to events; raises TranscriptError(message, path) when it is malformed,
    TranscriptTooLong when it holds more than `max_calls` tool calls or model requests."""
    if not isinstance(body, dict):
        raise TranscriptError("the body must be a JSON object", "")
    _check_types(body)
    transcript_format = resolve_format(body)
    conversation = PARSERS[transcript_format](body)
    if max_calls is not None:
        _check_length(conversation, max_calls)
    session = SessionInfo(
        session_id=session_id_of(body),
        start=_start(body.get("timestamp"), received_at),
        received_at=_start(None, received_at),
        agent_name=_label(body, "agent_name"),
        model=_label(body, "model"),
        metadata=None if body.get("metadata") is None else expect_object(body["metadata"], "metadata"),
    )
    return MappedTranscript(transcript_format, session.session_id, build_events(conversation, session))


def _check_length(conversation: Conversation, limit: int) -> None:
    calls = sum(len(turn.calls) for turn in conversation.turns)
    if calls > limit:
        raise TranscriptTooLong(f"{calls:,} tool calls", limit)
    if len(conversation.turns) > limit:
        raise TranscriptTooLong(f"{len(conversation.turns):,} model requests (turns)", limit)


# The JSON types of the top-level fields, checked whichever format reads them: a field another
# format would read is ignored when valid, never when malformed.
TOP_LEVEL_TYPES: dict[str, tuple[type, ...]] = {
    "messages": (list,), "input": (list, str), "instructions": (str,), "tools": (list,), "metadata": (dict,),
}


def _check_types(body: JSON) -> None:
    for key, types in TOP_LEVEL_TYPES.items():
        value = body.get(key)
        if value is not None and not isinstance(value, types):
            names = " or ".join({list: "a list", str: "a string", dict: "an object"}[kind] for kind in types)
            raise TranscriptError(f"must be {names}, not {json_type(value)}", key)


def session_id_of(body: JSON) -> str:
    """The body's `session_id`, or one derived from the conversation's content."""
    if body.get("session_id") is not None:
        given = expect_str(body["session_id"], "session_id", empty=False)
        if len(given) > MAX_SESSION_ID_LENGTH:
            raise TranscriptError(f"must be at most {MAX_SESSION_ID_LENGTH} characters", "session_id")
        return given
    content = {key: body[key] for key in PROVIDER_FIELDS if key in body}
    return "tr-" + hashlib.sha256(canonical_json(content).encode("utf-8")).hexdigest()[:24]


def _label(body: JSON, key: str) -> str | None:
    if body.get(key) is None:
        return None
    value = expect_str(body[key], key)
    if len(value) > MAX_LABEL_LENGTH:
        raise TranscriptError(f"must be at most {MAX_LABEL_LENGTH} characters", key)
    return value


def _start(value: Any, received_at: datetime) -> datetime:
    """The conversation's start: the body's timestamp (ISO 8601 with a time zone, or epoch
    seconds) or, without one, when the server received it."""
    if value is None:
        return received_at if received_at.tzinfo is not None else received_at.replace(tzinfo=UTC)
    return expect_moment(value, "timestamp")
