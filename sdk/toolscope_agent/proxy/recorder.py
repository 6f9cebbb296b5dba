"""What the proxy records per conversation: a session whose turns are the model requests, and
whose tool calls pair the model's call (in one response) with its result (in the next request).

A session is keyed by the id a client sends (`x-toolscope-session-id`), else derived from the
conversation itself: its protocol, system prompt and first user message, which every later request
of the same conversation repeats. Sessions are kept in memory, least recently used first out;
a proxy restarted mid-conversation starts a new session for it.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toolscope_agent import _shapes
from toolscope_agent.client import Client
from toolscope_agent.proxy.protocols import Call, Protocol, prompted
from toolscope_agent.session import Session

SESSION_HEADER = "x-toolscope-session-id"
PROXY = "toolscope-proxy"


@dataclass
class _Conversation:
    session: Session
    seen: int = 0  # conversation items already recorded as some turn's messages
    pending: dict[str, tuple[Call, int]] = field(default_factory=dict)  # call id -> (call, turn index)


class Recorder:
    def __init__(self, client: Client | None, *, mode: str, agent_name: str | None = None,
                 max_sessions: int = 10_000) -> None:
        self.client = client
        self.mode = mode
        self.agent_name = agent_name
        self.max_sessions = max_sessions
        self._conversations: OrderedDict[str, _Conversation] = OrderedDict()

    def key(self, protocol: Protocol, body: Mapping[str, Any], headers: Mapping[str, str]) -> str:
        given = headers.get(SESSION_HEADER, "").strip()
        if given:
            return given[:200]
        first = next((item for item in protocol.conversation(body)
                      if isinstance(item, dict) and item.get("role") == "user"), None)
        seed = "\x1f".join((protocol.name, protocol.system(body) or "",
                            _shapes.message_text(first.get("content"))[0] if first else ""))
        return "proxy-" + hashlib.sha256(seed.encode("utf-8", "replace")).hexdigest()[:24]

    def conversation(self, key: str, *, model: str | None) -> _Conversation | None:
        if self.client is None:
            return None
        found = self._conversations.get(key)
        if found is not None:
            self._conversations.move_to_end(key)
            return found
        session = self.client.session(session_id=key, agent_name=self.agent_name, model=model,
                                      metadata={"gateway": PROXY, "proxy_mode": self.mode})
        session.start()
        found = self._conversations[key] = _Conversation(session)
        while len(self._conversations) > self.max_sessions:
            self._conversations.popitem(last=False)[1].session.end()
        return found

    def results(self, conversation: _Conversation | None, protocol: Protocol, body: Mapping[str, Any]) -> None:
        """The tool results this request brings back: each completes the call it answers."""
        if conversation is None:
            return
        for result in protocol.results(body):
            pending = conversation.pending.pop(result.call_id, None)
            if pending is None:
                continue
            call, turn_index = pending
            conversation.session.tool_call(
                call.name, arguments=call.arguments if isinstance(call.arguments, dict) else None,
                output=result.output, status="error" if result.is_error else "ok", call_id=call.call_id,
                turn_index=turn_index)

    def turn(self, conversation: _Conversation | None, protocol: Protocol, body: Mapping[str, Any], *,
             tools: list[dict[str, Any]], response: Mapping[str, Any] | None, latency_ms: float,
             shadow_tools: list[str] | None = None) -> None:
        """One model request: the tools it sent in the prompt (not those a provider's deferred
        loading holds back), its new messages, the task, the provider's usage, and the calls the
        model made (recorded when their results come back)."""
        if conversation is None:
            return
        items = protocol.conversation(body)
        new = items[conversation.seen:] if conversation.seen <= len(items) else items
        conversation.seen = len(items)
        model = (response or {}).get("model") or body.get("model")
        index = conversation.session.turn(
            model=model if isinstance(model, str) else None, tools=prompted(tools),
            usage=protocol.usage(response) if response else None, latency_ms=latency_ms,
            system_prompt=protocol.system(body), task_message=protocol.task(body) or None,
            messages=[item for item in new if isinstance(item, dict) and item.get("role") in ("user", "assistant")],
            shadow_tools=shadow_tools)
        for call in protocol.calls(response or {}):
            if call.call_id:
                conversation.pending[call.call_id] = (call, index)

    def close(self) -> None:
        for conversation in self._conversations.values():
            conversation.session.end()
        self._conversations.clear()
