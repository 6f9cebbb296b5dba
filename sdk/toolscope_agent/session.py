"""Sessions: the events of one agent run (session start/end, turns, tool calls).

Event ids are deterministic and made once, when the event is recorded, so a batch that is sent
again carries the same ids and the server creates nothing twice:

- session start: the session id; end: `<session id>:end`
- turn: `<session id>:t<index>`
- tool call: `<session id>:c<n>` (n counts the session's calls from 0), or
  `<session id>:<8 hex>:c<n>` when the caller chose the session id, so that a session resumed in
  another process never reuses the id of an earlier call.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Iterable, Mapping
from contextvars import ContextVar, Token
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from . import _shapes

if TYPE_CHECKING:
    from .client import Client

logger = logging.getLogger("toolscope_agent")

ToolCallStatus = Literal["ok", "error", "denied", "unknown_tool", "schema_error"]
Approval = Literal["not_required", "approved", "denied", "timed_out"]

MAX_SESSION_ID_LENGTH = 150

_current: ContextVar[Session | None] = ContextVar("toolscope_agent_session", default=None)


def current_session() -> Session | None:
    """The session of the innermost `with client.session(...)` block in this context, if any."""
    return _current.get()


class Session:
    """One agent run. Use it as a context manager: entering records the start, leaving the end,
    and makes it the current session for `@client.tool` functions called inside the block."""

    def __init__(
        self,
        client: Client,
        *,
        agent_name: str | None = None,
        model: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        session_id: str | None = None,
    ) -> None:
        if session_id is not None and not (0 < len(session_id) <= MAX_SESSION_ID_LENGTH):
            raise ValueError(f"session_id must be 1 to {MAX_SESSION_ID_LENGTH} characters")
        chosen = session_id is not None
        self.id: str = session_id if session_id is not None else str(uuid.uuid4())
        self.agent_name = agent_name
        self.model = model
        self.metadata: dict[str, Any] | None = dict(metadata) if metadata is not None else None
        self._client = client
        self._put = client._exporter.put
        self._call_prefix = f"{self.id}:{uuid.uuid4().hex[:8]}:c" if chosen else f"{self.id}:c"
        self._calls = itertools.count()
        self._turn = 0
        self._next_turn = 0
        self._started = False
        self._ended = False
        self._tokens: list[Token[Session | None]] = []

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Record the session start (once; entering the `with` block does it)."""
        if self._started:
            return
        self._started = True
        event: dict[str, Any] = {
            "type": "session",
            "id": self.id,
            "action": "start",
            "timestamp": _shapes.now(),
        }
        if self.agent_name is not None:
            event["agent_name"] = self.agent_name
        if self.model is not None:
            event["model"] = self.model
        if self.metadata is not None:
            event["metadata"] = self.metadata
        self._put(event)

    def end(self) -> None:
        """Record the session end (once; leaving the `with` block does it)."""
        if self._ended:
            return
        self._ended = True
        self._put(
            {
                "type": "session",
                "id": f"{self.id}:end",
                "session_id": self.id,
                "action": "end",
                "timestamp": _shapes.now(),
            }
        )

    def __enter__(self) -> Session:
        self.start()
        self._tokens.append(_current.set(self))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._tokens:
            token = self._tokens.pop()
            try:
                _current.reset(token)
            except ValueError:  # left in another context than it was entered in
                _current.set(None)
        if not self._tokens:
            self.end()

    # -- what happens inside --------------------------------------------------------------------

    @property
    def turn_index(self) -> int:
        """The index of the current turn (the last one recorded; 0 before any)."""
        return self._turn

    def turn(
        self,
        index: int | None = None,
        model: str | None = None,
        tools: Iterable[Any] | None = None,
        usage: Any = None,
        latency_ms: float | None = None,
        system_prompt: Any = None,
        task_message: Any = None,
        messages: Iterable[Any] | None = None,
        shadow_tools: Iterable[str] | None = None,
    ) -> int:
        """Record one model request and make it the current turn; returns its index.

        `tools` are the definitions advertised on the request, in OpenAI (Chat or Responses),
        Anthropic, MCP or toolscope shape (dicts or provider SDK objects). A definition is sent in
        full the first time this client sees its schema hash, later as `{"name", "schema_hash"}`.
        `usage` may be the provider's usage object (OpenAI or Anthropic). `messages` are the
        user/assistant messages new in this turn; tool outputs among them are left out.
        `shadow_tools`: the names a policy would have sent instead (toolscope-proxy's shadow mode).
        """
        if index is None:
            index = self._next_turn
        self._turn = index
        if index + 1 > self._next_turn:
            self._next_turn = index + 1
        event: dict[str, Any] = {
            "type": "turn",
            "id": f"{self.id}:t{index}",
            "session_id": self.id,
            "index": index,
            "timestamp": _shapes.now(),
        }
        model = model if model is not None else self.model
        if model is not None:
            event["model"] = model
        new_hashes: list[str] = []
        if tools is not None:
            event["tools"] = self._client._advertise(tools, new_hashes)
        if usage is not None:
            event["usage"] = _shapes.usage(usage)
        if latency_ms is not None:
            event["latency_ms"] = latency_ms
        if system_prompt is not None:
            event["system_prompt"] = _shapes.message_text(system_prompt)[0]
        if task_message is not None:
            event["task_message"] = _shapes.message_text(task_message)[0]
        if messages is not None:
            event["messages"] = _shapes.messages(messages)
        if shadow_tools is not None:
            event["shadow_tools"] = list(shadow_tools)
        if not self._put(event) and new_hashes:
            self._client._forget_hashes(new_hashes)
        return index

    def tool_call(
        self,
        tool_name: str,
        arguments: Any = None,
        output: Any = None,
        status: ToolCallStatus = "ok",
        error: str | None = None,
        duration_ms: float | None = None,
        retries: int = 0,
        approval: Approval = "not_required",
        call_id: str | None = None,
        turn_index: int | None = None,
    ) -> str:
        """Record one tool call (of the current turn unless `turn_index` says otherwise) and
        return its event id. Costs the caller a dict and a non-blocking queue put: `arguments`
        (a dict, or OpenAI's JSON string) and `output` (text, or anything JSON-able) are
        converted on the exporter thread, so do not mutate them afterwards."""
        event_id = f"{self._call_prefix}{next(self._calls)}"
        event: dict[str, Any] = {
            "type": "tool_call",
            "id": event_id,
            "session_id": self.id,
            "turn_index": self._turn if turn_index is None else turn_index,
            "tool_name": tool_name,
            "status": status,
            "retries": retries,
            "approval": approval,
            "timestamp": _shapes.now(),
        }
        if arguments is not None:
            event["arguments"] = arguments
        if output is not None:
            event["output"] = output
        if error is not None:
            event["error"] = error
        if duration_ms is not None:
            event["duration_ms"] = duration_ms
        if call_id is not None:
            event["call_id"] = call_id
        self._put(event)
        return event_id

    def __repr__(self) -> str:
        return f"<Session {self.id} agent={self.agent_name!r} turn={self._turn}>"
