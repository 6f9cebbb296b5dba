"""What every transcript mapper shares: the error, type checks, text extraction, tool definitions
and the provider-neutral conversation that each provider's parser builds.

A conversation is a list of turns (one per model request). Each turn holds the user/assistant text
that is new at that turn and the tool calls its model output asked for; a call's result, which the
provider sends later as a separate message or item, is attached to the call by its id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from toolscope_agent.engine.schemas import normalize_tool
from toolscope_agent.engine.usage import provider_usage

JSON = dict[str, Any]
# The times an event may carry, as the ingest validation holds them
# (toolscope.telemetry.services.events; tests/transcripts checks they agree): kept here so the
# transcript mappers stay free of Django.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(3000, 1, 1, tzinfo=UTC)

# Content part type -> the key that holds its text. Other parts (images, files, tool blocks,
# thinking) carry no text the model reads as a message, so they are skipped.
TEXT_KEYS = {"text": "text", "input_text": "text", "output_text": "text", "refusal": "refusal"}


class TranscriptError(ValueError):
    """A transcript that cannot be mapped. `path` points at the offending value, JSON-path style
    (`messages[3].tool_calls[0].function.name`); it is "" for the body as a whole."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.message = message
        self.path = path


class TranscriptTooLong(ValueError):
    """A transcript holding more tool calls or model requests than one request may (`limit`)."""

    def __init__(self, what: str, limit: int) -> None:
        super().__init__(f"{what}; the limit is {limit:,} per transcript")
        self.what = what
        self.limit = limit


def json_type(value: Any) -> str:
    """The JSON name of a value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "list" if isinstance(value, list) else "object"


def expect_list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise TranscriptError(f"must be a list, not {json_type(value)}", path)
    return value


def expect_object(value: Any, path: str) -> JSON:
    if not isinstance(value, dict):
        raise TranscriptError(f"must be an object, not {json_type(value)}", path)
    return value


def expect_moment(value: Any, path: str) -> datetime:
    """A time as transcripts carry one: ISO 8601 with a time zone, or seconds since the epoch; in
    UTC, within the range every event's time is held to."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            moment: datetime | None = datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError):
            raise TranscriptError("is not a valid number of seconds since the epoch", path) from None
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise TranscriptError("must be an ISO 8601 time, e.g. 2026-11-22T10:00:00Z", path) from None
        if moment.tzinfo is None:
            raise TranscriptError("must include a time zone, e.g. 2026-11-22T10:00:00Z", path)
    else:
        raise TranscriptError("must be an ISO 8601 string or a number of seconds since the epoch", path)
    try:
        moment = moment.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00:00+05:00 is in year 0, 9999-12-31T23:59:59-05:00 in 10000
        moment = None
    if moment is None or not EARLIEST <= moment < LATEST:
        raise TranscriptError(f"must be from {EARLIEST:%Y-%m-%d} to {LATEST:%Y-%m-%d}", path)
    return moment


def expect_str(value: Any, path: str, *, empty: bool = True) -> str:
    if not isinstance(value, str):
        raise TranscriptError(f"must be a string, not {json_type(value)}", path)
    if not empty and not value:
        raise TranscriptError("must not be empty", path)
    return value


def content_text(content: Any, path: str) -> str:
    """The text of a message content: a string, null, or a list of parts whose text parts are
    joined with newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise TranscriptError(f"must be a string or a list of content parts, not {json_type(content)}", path)
    texts = []
    for index, raw in enumerate(content):
        part_path = f"{path}[{index}]"
        part = expect_object(raw, part_path)
        key = TEXT_KEYS.get(expect_str(part.get("type"), f"{part_path}.type"))
        if key is not None:
            texts.append(expect_str(part.get(key), f"{part_path}.{key}"))
    return "\n".join(texts)


def expect_arguments(value: Any, path: str) -> str | JSON:
    """Call arguments as the provider sends them: a JSON string (parsed later, so that invalid JSON
    becomes a `schema_error` call rather than a rejected transcript) or an already parsed object."""
    if not isinstance(value, str | dict):
        raise TranscriptError(f"must be a JSON string or an object, not {json_type(value)}", path)
    return value


def message_role(message: JSON, path: str, roles: frozenset[str]) -> str:
    role = message.get("role")
    if role is None:
        raise TranscriptError("a message needs a role", f"{path}.role")
    checked = expect_str(role, f"{path}.role")
    if checked not in roles:
        raise TranscriptError(f"unknown role {role!r}; expected one of {', '.join(sorted(roles))}", f"{path}.role")
    return checked


def parse_tools(value: Any) -> list[JSON] | None:
    """The advertised tools as full definitions, or None when the transcript has no tools list.

    Provider built-in tools without a name (OpenAI Responses `web_search`, `file_search`, ...) are
    skipped: the client sends no schema for them and their calls are not function calls.
    """
    if value is None:
        return None
    tools = []
    for index, raw in enumerate(expect_list(value, "tools")):
        path = f"tools[{index}]"
        definition = expect_object(raw, path)
        if definition.get("type") == "function" and "function" in definition:
            path = f"{path}.function"
            body = expect_object(definition["function"], path)
        else:
            body = definition
        if body.get("name") is None and definition.get("type") not in (None, "function"):
            continue
        expect_str(body.get("name"), f"{path}.name", empty=False)
        if body.get("description") is not None:
            expect_str(body["description"], f"{path}.description")
        tools.append(normalize_tool(definition))
    return tools


@dataclass
class ToolCall:
    call_id: str
    name: str
    arguments: Any  # the provider's JSON string, or an object (Anthropic `input`)
    turn_index: int
    path: str  # of the call id, for errors found later
    output: str | None = None
    is_error: bool | None = None  # None: the format carries no error flag (the text may tell)


@dataclass
class Turn:
    system_prompt: str
    messages: list[dict[str, str]] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)  # the provider's usage of this request, when stored
    at: datetime | None = None  # when the request was made, when the host stored it


@dataclass
class Conversation:
    tools: list[JSON] | None
    turns: list[Turn]


class ConversationBuilder:
    """Collects a conversation in transcript order; the parsers call it message by message."""

    def __init__(self, tools: list[JSON] | None) -> None:
        self.tools = tools
        self.turns: list[Turn] = []
        self._system: list[str] = []
        self._system_text = ""  # the parts joined: one string shared by every turn until a part is added
        self._pending: list[dict[str, str]] = []
        self._calls: dict[str, ToolCall] = {}

    def system(self, text: str) -> None:
        if text:
            self._system.append(text)
            self._system_text = "\n\n".join(self._system)

    def user(self, text: str) -> None:
        if text:
            self._pending.append({"role": "user", "content": text})

    def start_turn(self) -> None:
        """A model request: everything said since the previous one is new at this turn."""
        self.turns.append(Turn(self._system_text, self._pending))
        self._pending = []

    def usage(self, raw: Any, path: str) -> None:
        """The provider's usage of the current request, as a host stores it beside the assistant
        message it produced (Claude Code's transcripts do): Anthropic's or OpenAI's shape."""
        if raw is not None:
            self.turns[-1].usage = provider_usage(expect_object(raw, path))

    def time(self, raw: Any, path: str) -> None:
        """When the current request was made, as a host stores it beside the assistant message it
        produced (Claude Code's transcripts do): ISO 8601 with a time zone, or epoch seconds."""
        if raw is not None:
            self.turns[-1].at = expect_moment(raw, path)

    def assistant(self, text: str) -> None:
        if text:
            self.turns[-1].messages.append({"role": "assistant", "content": text})

    def add_call(self, *, call_id: str, name: str, arguments: Any, id_path: str) -> None:
        """A tool call asked for by the current turn's model output."""
        if call_id in self._calls:
            raise TranscriptError(f"duplicate tool call id {call_id!r}", id_path)
        call = ToolCall(call_id, name, arguments, len(self.turns) - 1, id_path)
        self._calls[call_id] = call
        self.turns[-1].calls.append(call)

    def add_result(self, *, call_id: str, output: str, is_error: bool | None, id_path: str) -> None:
        """The result of an earlier call, matched by the provider's call id."""
        call = self._calls.get(call_id)
        if call is None:
            raise TranscriptError(f"no earlier tool call has the id {call_id!r}", id_path)
        if call.output is not None:
            raise TranscriptError(f"a second result for the tool call {call_id!r}", id_path)
        call.output = output
        call.is_error = is_error

    def build(self) -> Conversation:
        return Conversation(self.tools, self.turns)
