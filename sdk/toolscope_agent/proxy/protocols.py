"""The three model APIs the proxy speaks, as data: where each request keeps its tools, its
conversation and its task, and where each response keeps the model's tool calls and its usage.

Pure functions over the JSON bodies the official SDKs send (OpenAI Chat Completions, OpenAI
Responses, Anthropic Messages): no I/O, so the proxy's behaviour per protocol is tested without a
network. A streamed response is read back into the body the same request would have returned
without streaming (`StreamReader`), so one set of readers serves both.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolscope_agent import _shapes


@dataclass(frozen=True)
class Call:
    """A tool call the model asked for (from a response) or its result (from the next request)."""

    call_id: str
    name: str = ""
    arguments: Any = None
    output: str = ""
    is_error: bool = False


@dataclass(frozen=True)
class Protocol:
    name: str
    path: str
    provider: str  # the upstream it goes to: "openai" or "anthropic"
    format: str  # the engine's rendering (engine/render.py): "openai", "openai_responses", "anthropic"

    # -- requests ---------------------------------------------------------------------------------

    def conversation(self, body: Mapping[str, Any]) -> list[Any]:
        items = body.get("input" if self.name == "openai_responses" else "messages")
        if isinstance(items, str):  # Responses: a bare string is one user message
            return [{"role": "user", "content": items}]
        return list(items) if isinstance(items, list) else []

    def system(self, body: Mapping[str, Any]) -> str | None:
        if self.name == "anthropic":
            system = body.get("system")
            return None if system is None else _shapes.message_text(system)[0]
        if self.name == "openai_responses":
            instructions = body.get("instructions")
            return instructions if isinstance(instructions, str) else None
        texts = [_shapes.message_text(m.get("content"))[0] for m in self.conversation(body)
                 if isinstance(m, dict) and m.get("role") in ("system", "developer")]
        return "\n\n".join(texts) if texts else None

    def task(self, body: Mapping[str, Any]) -> str:
        """The latest user message's text: what the request is for (a message made only of tool
        results is not a task)."""
        for item in reversed(self.conversation(body)):
            if isinstance(item, dict) and item.get("role") == "user":
                text, only_results = _shapes.message_text(item.get("content"))
                if not only_results and text.strip():
                    return text
        return ""

    def results(self, body: Mapping[str, Any]) -> list[Call]:
        """The tool results the client sends back in this request."""
        found: list[Call] = []
        for item in self.conversation(body):
            if not isinstance(item, dict):
                continue
            if self.name == "openai_chat" and item.get("role") == "tool":
                found.append(Call(str(item.get("tool_call_id", "")), output=_text(item.get("content"))))
            elif self.name == "openai_responses" and item.get("type") == "function_call_output":
                found.append(Call(str(item.get("call_id", "")), output=_text(item.get("output"))))
            elif self.name == "anthropic" and item.get("role") == "user" and isinstance(item.get("content"), list):
                for block in item["content"]:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        found.append(Call(str(block.get("tool_use_id", "")), output=_text(block.get("content")),
                                          is_error=bool(block.get("is_error"))))
        return found

    def history_calls(self, body: Mapping[str, Any]) -> dict[str, Call]:
        """The model's earlier calls the conversation holds, by call id: what each result answers."""
        found: dict[str, Call] = {}
        for item in self.conversation(body):
            if not isinstance(item, dict):
                continue
            if self.name == "openai_chat" and item.get("role") == "assistant":
                for call in item.get("tool_calls") or []:
                    function = call.get("function") or {}
                    found[str(call.get("id", ""))] = Call(str(call.get("id", "")), function.get("name", ""),
                                                          _arguments(function.get("arguments")))
            elif self.name == "openai_responses" and item.get("type") == "function_call":
                found[str(item.get("call_id", ""))] = Call(str(item.get("call_id", "")), item.get("name", ""),
                                                           _arguments(item.get("arguments")))
            elif self.name == "anthropic" and item.get("role") == "assistant" and isinstance(item.get("content"), list):
                for block in item["content"]:
                    if isinstance(block, dict) and block.get("type") == "tool_use":
                        found[str(block.get("id", ""))] = Call(str(block.get("id", "")), block.get("name", ""),
                                                               block.get("input"))
        return found

    def with_results(self, body: Mapping[str, Any], texts: Mapping[str, str]) -> dict[str, Any]:
        """The body with the results of the calls in `texts` (by call id) given those texts."""
        def replaced(item: Any) -> Any:
            if not isinstance(item, dict):
                return item
            if self.name == "openai_chat" and item.get("role") == "tool" and item.get("tool_call_id") in texts:
                return {**item, "content": texts[item["tool_call_id"]]}
            if self.name == "openai_responses" and item.get("type") == "function_call_output" \
                    and item.get("call_id") in texts:
                return {**item, "output": texts[item["call_id"]]}
            if self.name == "anthropic" and item.get("role") == "user" and isinstance(item.get("content"), list):
                return {**item, "content": [
                    {**block, "content": texts[block["tool_use_id"]]}
                    if isinstance(block, dict) and block.get("type") == "tool_result"
                    and block.get("tool_use_id") in texts else block for block in item["content"]]}
            return item

        key = "input" if self.name == "openai_responses" else "messages"
        if not isinstance(body.get(key), list):
            return dict(body)
        return {**body, key: [replaced(item) for item in body[key]]}

    def tools(self, body: Mapping[str, Any]) -> list[dict[str, Any]]:
        tools = body.get("tools")
        return [tool for tool in tools if isinstance(tool, dict)] if isinstance(tools, list) else []

    def with_tools(self, body: Mapping[str, Any], tools: list[dict[str, Any]]) -> dict[str, Any]:
        """The body with `tools` in place of its own. A `tool_choice` naming a tool no longer sent
        would be refused by the provider: it goes back to the provider's default."""
        out = dict(body)
        if tools:
            out["tools"] = tools
        else:
            out.pop("tools", None)
            out.pop("tool_choice", None)
        choice = out.get("tool_choice")
        named = _chosen_name(choice)
        if named is not None and named not in {_tool_name(tool) for tool in tools}:
            out.pop("tool_choice", None)
        return out

    def continued(self, body: Mapping[str, Any], response: Mapping[str, Any],
                  answers: list[tuple[Call, Any]]) -> dict[str, Any]:
        """The body asked again with the model's answer and the results of its calls appended, as
        the client itself would append them (the proxy answering toolscope's own tools)."""
        out = dict(body)
        if self.name == "openai_chat":
            message = dict(((response.get("choices") or [{}])[0] or {}).get("message") or {})
            out["messages"] = [*self.conversation(body), {key: value for key, value in message.items()
                                                         if value is not None},
                               *({"role": "tool", "tool_call_id": call.call_id, "content": _text(result)}
                                 for call, result in answers)]
        elif self.name == "openai_responses":
            results = [result if isinstance(result, dict) else
                       {"type": "function_call_output", "call_id": call.call_id, "output": _text(result)}
                       for call, result in answers]
            out["input"] = [*self.conversation(body), *(response.get("output") or []), *results]
        else:
            assistant = {"role": "assistant", "content": response.get("content") or []}
            out["messages"] = [*self.conversation(body), assistant,
                               {"role": "user", "content": [
                                   {"type": "tool_result", "tool_use_id": call.call_id,
                                    "content": result if isinstance(result, list) else _text(result)}
                                   for call, result in answers]}]
        return out

    def with_note(self, body: Mapping[str, Any], note: str) -> dict[str, Any]:
        """The body with `note` (progressive mode's menu) after its system prompt, or as one."""
        out = dict(body)
        if not note:
            return out
        if self.name == "anthropic":
            system = out.get("system")
            if isinstance(system, list):
                out["system"] = [*system, {"type": "text", "text": note}]
            else:
                out["system"] = f"{system}\n\n{note}" if isinstance(system, str) and system else note
        elif self.name == "openai_responses":
            instructions = out.get("instructions")
            out["instructions"] = f"{instructions}\n\n{note}" if isinstance(instructions, str) and instructions \
                else note
        else:
            messages = list(self.conversation(out))
            first = messages[0] if messages and isinstance(messages[0], dict) else {}
            if first.get("role") in ("system", "developer") and isinstance(first.get("content"), str):
                messages[0] = {**first, "content": f"{first['content']}\n\n{note}"}
            else:
                messages.insert(0, {"role": "system", "content": note})
            out["messages"] = messages
        return out

    # -- responses ---------------------------------------------------------------------------------

    def calls(self, response: Mapping[str, Any]) -> list[Call]:
        """The tool calls the model made in this response."""
        found: list[Call] = []
        if self.name == "openai_chat":
            for choice in response.get("choices") or []:
                message = (choice or {}).get("message") or {}
                for call in message.get("tool_calls") or []:
                    function = call.get("function") or {}
                    found.append(Call(str(call.get("id", "")), function.get("name", ""),
                                      _arguments(function.get("arguments"))))
        elif self.name == "openai_responses":
            for item in response.get("output") or []:
                if isinstance(item, dict) and item.get("type") == "function_call":
                    found.append(Call(str(item.get("call_id", "")), item.get("name", ""),
                                      _arguments(item.get("arguments"))))
        else:
            for block in response.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    found.append(Call(str(block.get("id", "")), block.get("name", ""), block.get("input")))
        return found

    def output_text(self, response: Mapping[str, Any]) -> str:
        if self.name == "openai_chat":
            choices = response.get("choices") or [{}]
            return _text(((choices[0] or {}).get("message") or {}).get("content"))
        if self.name == "openai_responses":
            return "".join(_text(item.get("content")) for item in response.get("output") or []
                           if isinstance(item, dict) and item.get("type") == "message")
        return "".join(block.get("text", "") for block in response.get("content") or []
                       if isinstance(block, dict) and block.get("type") == "text")

    def usage(self, response: Mapping[str, Any]) -> dict[str, int] | None:
        usage = response.get("usage")
        return _shapes.usage(usage) if isinstance(usage, dict) else None


PROTOCOLS = {
    protocol.path: protocol
    for protocol in (
        Protocol("openai_chat", "/v1/chat/completions", "openai", "openai"),
        Protocol("openai_responses", "/v1/responses", "openai", "openai_responses"),
        Protocol("anthropic", "/v1/messages", "anthropic", "anthropic"),
    )
}


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return _shapes.message_text(content)[0] or json.dumps(content, ensure_ascii=False)


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw else {}
        except ValueError:
            return {"_raw": raw}
    return raw


def _tool_name(tool: Mapping[str, Any]) -> str:
    function = tool.get("function")
    return str(function.get("name", "")) if isinstance(function, dict) else str(tool.get("name", ""))


def _chosen_name(choice: Any) -> str | None:
    """The tool a `tool_choice` forces, if it names one (OpenAI Chat, Responses, Anthropic)."""
    if not isinstance(choice, dict):
        return None
    function = choice.get("function")
    if isinstance(function, dict):
        return str(function.get("name", ""))
    if choice.get("type") in ("function", "tool") and "name" in choice:
        return str(choice["name"])
    return None


# --- streams ---------------------------------------------------------------------------------------


@dataclass
class StreamReader:
    """Reads a streamed response's server-sent events back into the body the same request would
    have returned whole: enough for the calls, the text and the usage. Fed the bytes as they pass
    through (`feed`), never holding the client's stream back."""

    protocol: Protocol
    _buffer: bytes = b""
    _body: dict[str, Any] = field(default_factory=dict)
    _chat_calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    _blocks: dict[int, dict[str, Any]] = field(default_factory=dict)
    _text: list[str] = field(default_factory=list)

    def feed(self, chunk: bytes) -> None:
        self._buffer += chunk.replace(b"\r\n", b"\n")
        while b"\n\n" in self._buffer:
            raw, self._buffer = self._buffer.split(b"\n\n", 1)
            data = "\n".join(line[5:].lstrip() for line in raw.decode("utf-8", "replace").split("\n")
                             if line.startswith("data:"))
            if not data or data == "[DONE]":
                continue
            try:
                event = json.loads(data)
            except ValueError:
                continue
            if isinstance(event, dict):
                self._event(event)

    def body(self) -> dict[str, Any]:
        """The response as one body (call after the stream ended)."""
        if self.protocol.name == "openai_chat":
            message: dict[str, Any] = {"role": "assistant", "content": "".join(self._text) or None}
            if self._chat_calls:
                message["tool_calls"] = [
                    {"id": call["id"], "type": "function",
                     "function": {"name": call["name"], "arguments": "".join(call["arguments"])}}
                    for _, call in sorted(self._chat_calls.items())]
            return {**self._body, "choices": [{"index": 0, "message": message}]}
        if self.protocol.name == "anthropic":
            content = []
            for _, block in sorted(self._blocks.items()):
                if block.get("type") == "tool_use":
                    partial = "".join(block.pop("_json", []))
                    block["input"] = _arguments(partial) if partial else block.get("input") or {}
                content.append(block)
            return {**self._body, "content": content}
        return self._body

    def _event(self, event: dict[str, Any]) -> None:
        name = self.protocol.name
        if name == "openai_chat":
            for key in ("id", "model"):
                if key in event:
                    self._body[key] = event[key]
            if isinstance(event.get("usage"), dict):
                self._body["usage"] = event["usage"]
            for choice in event.get("choices") or []:
                delta = (choice or {}).get("delta") or {}
                if isinstance(delta.get("content"), str):
                    self._text.append(delta["content"])
                for call in delta.get("tool_calls") or []:
                    slot = self._chat_calls.setdefault(int(call.get("index", 0)),
                                                       {"id": "", "name": "", "arguments": []})
                    slot["id"] = call.get("id") or slot["id"]
                    function = call.get("function") or {}
                    slot["name"] = function.get("name") or slot["name"]
                    if isinstance(function.get("arguments"), str):
                        slot["arguments"].append(function["arguments"])
        elif name == "openai_responses":
            if event.get("type") in ("response.completed", "response.incomplete", "response.failed") and \
                    isinstance(event.get("response"), dict):
                self._body = event["response"]
        else:
            kind = event.get("type")
            if kind == "message_start" and isinstance(event.get("message"), dict):
                self._body = {key: value for key, value in event["message"].items() if key != "content"}
            elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
                self._blocks[int(event.get("index", 0))] = dict(event["content_block"])
            elif kind == "content_block_delta":
                block = self._blocks.setdefault(int(event.get("index", 0)), {"type": "text", "text": ""})
                delta = event.get("delta") or {}
                if delta.get("type") == "text_delta":
                    block["text"] = block.get("text", "") + delta.get("text", "")
                elif delta.get("type") == "input_json_delta":
                    block.setdefault("_json", []).append(delta.get("partial_json", ""))
            elif kind == "message_delta" and isinstance(event.get("usage"), dict):
                # The final counts: output tokens, and (lately) the input ones again.
                self._body["usage"] = {**(self._body.get("usage") or {}), **event["usage"]}


def prompted(tools: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The tools whose definitions the request puts in the prompt: not the ones a provider's
    deferred loading holds back (`defer_loading`), nor the provider's own server tools (a `type`
    other than a client function's), whose definitions are the provider's."""
    return [dict(tool) for tool in tools if not tool.get("defer_loading")
            and tool.get("type") in (None, "custom", "function")]


def names(tools: Iterable[Mapping[str, Any]]) -> list[str]:
    return [_tool_name(tool) for tool in tools]
