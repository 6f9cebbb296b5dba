"""toolscope-proxy between the official `openai` and `anthropic` clients and a provider on
127.0.0.1 (tests/proxy/provider.py): every protocol, streamed and not, in `observe` and
`enforce` mode; errors and rate-limit headers passed back unchanged; streams passed through event
by event; what the recorder makes of a conversation."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from toolscope_agent.policy import DEFAULT_POLICY
from toolscope_agent.proxy import Proxy, ProxyConfig, Recorder
from toolscope_agent.proxy.protocols import PROTOCOLS

from tests.proxy.provider import RATE_LIMIT_HEADERS, USAGE, Provider, app, serving

TOOLS = {
    "read_file": "Read a file of the repository.",
    "run_tests": "Run the test suite, or the tests matching a pattern.",
    "git_commit": "Record staged changes with a message.",
    "web_search": "Search the web.",
}
SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
KEY = "sk-test-not-a-real-key-0123456789"


def policy() -> dict[str, Any]:
    """read_file always; run_tests when the task mentions tests; the rest never asked for."""
    document = copy.deepcopy(DEFAULT_POLICY)
    document["selection"].update({"mode": "context_rules", "always_on": ["read_file"],
                                  "groups": {"testing": ["run_tests"]},
                                  "context_rules": [{"name": "testing", "keywords": ["test", "tests"], "regex": None,
                                                     "groups": ["testing"]}]})
    return document


def openai_tools() -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": name, "description": text, "parameters": SCHEMA}}
            for name, text in TOOLS.items()]


def responses_tools() -> list[dict[str, Any]]:
    return [{"type": "function", "name": name, "description": text, "parameters": SCHEMA, "strict": False}
            for name, text in TOOLS.items()]


def anthropic_tools() -> list[dict[str, Any]]:
    return [{"name": name, "description": text, "input_schema": SCHEMA} for name, text in TOOLS.items()]


@pytest.fixture
def provider() -> Iterator[Provider]:
    provider = Provider()
    with serving(app(provider)) as url:
        provider.url = url
        yield provider


class Recorded(Recorder):
    """The recorder with its events kept in a list, as its client's exporter would queue them."""

    def __init__(self, mode: str) -> None:
        from toolscope_agent.client import Client

        self.events: list[dict[str, Any]] = []
        client = Client("http://127.0.0.1:9", "unused-key", flush_interval=3600)
        client._exporter.put = self._put  # type: ignore[method-assign]
        super().__init__(client, mode=mode, agent_name="proxied")

    def _put(self, event: dict[str, Any]) -> bool:
        self.events.append(event)
        return True


@pytest.fixture
def proxied(provider):
    """A proxy in front of the provider: `proxied(mode)` yields (base URL, recorder)."""
    servers = []

    def start(mode: str, document: dict[str, Any] | None = None) -> tuple[str, Recorded]:
        recorder = Recorded(mode)
        config = ProxyConfig(mode=mode, upstreams={"openai": provider.url, "anthropic": provider.url})
        proxy = Proxy(config, policy=document, recorder=recorder)
        server = serving(proxy.app())
        servers.append(server)
        return server.__enter__(), recorder

    yield start
    for server in servers:
        server.__exit__(None, None, None)


def sent_tools(provider: Provider) -> list[str]:
    body = provider.received[-1].body
    return [tool["function"]["name"] if "function" in tool else tool["name"] for tool in body.get("tools", [])]


def test_observe_forwards_every_protocol_unchanged_with_the_clients_key(provider, proxied):
    base, _ = proxied("observe")
    oa = openai.OpenAI(base_url=f"{base}/v1", api_key=KEY)
    completion = oa.chat.completions.create(model="gpt-4.1", tools=openai_tools(), messages=[
        {"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Read the README"}])
    assert completion.choices[0].message.tool_calls[0].function.name == "read_file"
    assert sent_tools(provider) == list(TOOLS)
    assert provider.received[-1].headers["authorization"] == f"Bearer {KEY}"
    response = oa.responses.create(model="gpt-4.1", tools=responses_tools(), input="Read the README")
    assert response.output[0].name == "read_file" and sent_tools(provider) == list(TOOLS)
    an = anthropic.Anthropic(base_url=base, api_key=KEY)
    message = an.messages.create(model="claude-sonnet-4-5", max_tokens=200, tools=anthropic_tools(),
                                 messages=[{"role": "user", "content": "Read the README"}])
    assert message.content[0].name == "read_file" and sent_tools(provider) == list(TOOLS)
    headers = provider.received[-1].headers  # anthropic 2.x sends its key as a bearer token
    assert KEY in (headers.get("x-api-key"), headers.get("authorization", "").removeprefix("Bearer "))
    assert headers["anthropic-version"] == anthropic.Anthropic(api_key=KEY).default_headers["anthropic-version"]


@pytest.mark.parametrize("stream", [False, True])
def test_enforce_sends_the_tools_the_policy_selects_for_the_task(provider, proxied, stream):
    base, _ = proxied("enforce", policy())
    oa = openai.OpenAI(base_url=f"{base}/v1", api_key=KEY)
    an = anthropic.Anthropic(base_url=base, api_key=KEY)
    for task, expected in (("Read the README", ["read_file"]), ("Run the tests for utils", ["read_file", "run_tests"])):
        kwargs: dict[str, Any] = {"stream": True, "stream_options": {"include_usage": True}} if stream else {}
        result = oa.chat.completions.create(model="gpt-4.1", tools=openai_tools(),
                                            messages=[{"role": "user", "content": task}], **kwargs)
        if stream:
            list(result)
        assert sent_tools(provider) == expected, task
        result = oa.responses.create(model="gpt-4.1", tools=responses_tools(), input=task, stream=stream)
        if stream:
            list(result)
        assert sent_tools(provider) == expected, task
        result = an.messages.create(model="claude-sonnet-4-5", max_tokens=200, tools=anthropic_tools(),
                                    messages=[{"role": "user", "content": task}], stream=stream)
        if stream:
            list(result)
        assert sent_tools(provider) == expected, task


def test_a_forced_tool_choice_the_policy_removed_goes_back_to_the_default(provider, proxied):
    base, _ = proxied("enforce", policy())
    oa = openai.OpenAI(base_url=f"{base}/v1", api_key=KEY)
    oa.chat.completions.create(model="gpt-4.1", tools=openai_tools(), messages=[{"role": "user", "content": "Hi"}],
                               tool_choice={"type": "function", "function": {"name": "web_search"}})
    assert sent_tools(provider) == ["read_file"] and "tool_choice" not in provider.received[-1].body
    oa.chat.completions.create(model="gpt-4.1", tools=openai_tools(), messages=[{"role": "user", "content": "Hi"}],
                               tool_choice={"type": "function", "function": {"name": "read_file"}})
    assert provider.received[-1].body["tool_choice"]["function"]["name"] == "read_file"


def test_errors_and_rate_limit_headers_come_back_unchanged(provider, proxied):
    base, recorder = proxied("enforce", policy())
    direct = httpx.post(f"{provider.url}/v1/messages", json={"model": "rate-limited", "messages": []})
    through = httpx.post(f"{base}/v1/messages", json={"model": "rate-limited", "messages": []},
                         headers={"x-api-key": KEY, "anthropic-version": "2023-06-01"})
    assert (through.status_code, through.json()) == (direct.status_code, direct.json()) == (429, direct.json())
    for name, value in RATE_LIMIT_HEADERS.items():
        assert through.headers[name] == value, name
    an = anthropic.Anthropic(base_url=base, api_key=KEY, max_retries=0)
    with pytest.raises(anthropic.RateLimitError) as raised:
        an.messages.create(model="rate-limited", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    assert raised.value.response.headers["retry-after"] == "7"
    # Other paths pass through as they are.
    models = openai.OpenAI(base_url=f"{base}/v1", api_key=KEY).models.list()
    assert [model.id for model in models] == ["gpt-4.1"]
    assert [event["type"] for event in recorder.events].count("turn") == 2  # a 429 is a request too


def test_an_unreachable_upstream_is_a_clear_502(proxied):
    base, _ = proxied("observe")
    dead = "http://127.0.0.1:9"
    proxy_config = ProxyConfig(mode="observe", upstreams={"openai": dead, "anthropic": dead})
    with serving(Proxy(proxy_config).app()) as url:
        answer = httpx.post(f"{url}/v1/chat/completions", json={"model": "gpt-4.1", "messages": []})
    assert answer.status_code == 502 and "could not be reached" in answer.json()["error"]["message"]
    assert base  # the fixture's own proxy is unaffected


def test_a_stream_reaches_the_client_event_by_event(provider, proxied):
    provider.event_gap = 0.4
    base, _ = proxied("observe")
    an = anthropic.Anthropic(base_url=base, api_key=KEY)
    arrivals = []
    started = time.monotonic()
    with an.messages.stream(model="claude-sonnet-4-5", max_tokens=50,
                            messages=[{"role": "user", "content": "hello"}]) as stream:
        for _ in stream:
            arrivals.append(time.monotonic() - started)
    # Eight events 0.4 s apart: a proxy that buffered would deliver them all at the end.
    assert len(arrivals) >= 6
    assert arrivals[0] < arrivals[-1] - 1.5


@pytest.mark.parametrize("path", list(PROTOCOLS))
@pytest.mark.parametrize("stream", [False, True])
def test_a_conversation_is_recorded_as_turns_and_tool_calls_with_the_providers_usage(provider, proxied, path, stream):
    base, recorder = proxied("enforce", policy())
    oa = openai.OpenAI(base_url=f"{base}/v1", api_key=KEY)
    an = anthropic.Anthropic(base_url=base, api_key=KEY)

    def ask(history: list[Any]) -> Any:
        if path == "/v1/chat/completions":
            extra: dict[str, Any] = {"stream": True, "stream_options": {"include_usage": True}} if stream else {}
            result = oa.chat.completions.create(model="gpt-4.1", tools=openai_tools(), messages=history, **extra)
        elif path == "/v1/responses":
            result = oa.responses.create(model="gpt-4.1", tools=responses_tools(), input=history, stream=stream)
        else:
            result = an.messages.create(model="claude-sonnet-4-5", max_tokens=200, tools=anthropic_tools(),
                                        system="You are a coding agent.", messages=history, stream=stream)
        return list(result) if stream else result

    task = "Run the tests of the parser"
    if path == "/v1/chat/completions":
        history: list[Any] = [{"role": "system", "content": "You are a coding agent."},
                              {"role": "user", "content": task}]
        ask(history)
        call = {"id": "call_1", "type": "function",
                "function": {"name": "read_file", "arguments": json.dumps({"path": "README.md"})}}
        history += [{"role": "assistant", "content": None, "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "# The parser\nRun `pytest`."}]
    elif path == "/v1/responses":
        history = [{"role": "user", "content": task}]
        ask(history)
        history += [{"type": "function_call", "call_id": "call_1", "name": "read_file",
                     "arguments": json.dumps({"path": "README.md"})},
                    {"type": "function_call_output", "call_id": "call_1", "output": "# The parser\nRun `pytest`."}]
    else:
        history = [{"role": "user", "content": task}]
        ask(history)
        history += [{"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "read_file",
                                                       "input": {"path": "README.md"}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                  "content": "# The parser\nRun `pytest`."}]}]
    ask(history)
    events = recorder.events
    kinds = [event["type"] for event in events]
    assert kinds == ["session", "turn", "tool_call", "turn"], kinds
    session, first, call, second = events
    assert session["metadata"] == {"gateway": "toolscope-proxy", "proxy_mode": "enforce"}
    assert session["agent_name"] == "proxied"
    assert first["session_id"] == second["session_id"] == session["id"]  # one conversation, one session
    assert [first["index"], second["index"]] == [0, 1]
    assert (first["task_message"] == task and "task_message" not in second) or second["task_message"] == task
    assert [tool["name"] for tool in first["tools"]] == ["read_file", "run_tests"]  # what was sent
    assert first["usage"]["input_tokens"] == USAGE["input"] and first["usage"]["output_tokens"] == USAGE["output"]
    assert first["usage"]["cached_tokens"] == USAGE["cached"]
    assert first["usage"]["cache_write_tokens"] == USAGE["written"]  # as each API reports writes
    if path != "/v1/responses":
        assert first["system_prompt"] == "You are a coding agent."
    assert call["tool_name"] == "read_file" and call["turn_index"] == 0 and call["status"] == "ok"
    assert call["output"].startswith("# The parser") and call["arguments"] == {"path": "README.md"}
    assert first["latency_ms"] > 0


def search_policy() -> dict[str, Any]:
    document = copy.deepcopy(DEFAULT_POLICY)
    document["selection"].update({"mode": "tool_search", "always_on": ["read_file"]})
    document["selection"]["tool_search"]["top_k"] = 1  # a search loads the one tool it finds
    return document


@pytest.mark.parametrize("path", list(PROTOCOLS))
def test_the_proxy_answers_the_policys_tool_search_and_asks_again_with_what_it_found(provider, proxied, path):
    """tool_search mode: the model gets read_file and tool_search; it searches, the proxy answers
    from the request's own tools, asks the model again with git_commit loaded, and the client
    gets the git_commit call, never the search."""
    base, recorder = proxied("enforce", search_policy())
    task = "Save my work with git_commit"
    oa = openai.OpenAI(base_url=f"{base}/v1", api_key=KEY)
    an = anthropic.Anthropic(base_url=base, api_key=KEY)
    if path == "/v1/chat/completions":
        answer = oa.chat.completions.create(model="gpt-4.1", tools=openai_tools(),
                                            messages=[{"role": "user", "content": task}])
        called = [call.function.name for call in answer.choices[0].message.tool_calls]
    elif path == "/v1/responses":
        answer = oa.responses.create(model="gpt-4.1", tools=responses_tools(), input=task)
        called = [item.name for item in answer.output if item.type == "function_call"]
    else:
        answer = an.messages.create(model="claude-sonnet-4-5", max_tokens=200, tools=anthropic_tools(),
                                    messages=[{"role": "user", "content": task}])
        called = [block.name for block in answer.content if block.type == "tool_use"]
    assert called == ["git_commit"]
    assert [sent_tools_of(received) for received in provider.received] == [
        ["read_file", "tool_search"], ["git_commit", "read_file", "tool_search"]]
    # The second request carries the search and its answer, as the client would have sent them.
    assert "git_commit" in json.dumps(provider.received[1].body.get("messages") or provider.received[1].body["input"])
    kinds = [(event["type"], event.get("tool_name")) for event in recorder.events]
    assert kinds == [("session", None), ("turn", None), ("tool_call", "tool_search"), ("turn", None)]
    assert recorder.events[2]["arguments"] == {"query": task} and "git_commit" in recorder.events[2]["output"]


def test_a_stream_never_carries_the_search_tool_the_proxy_cannot_answer_mid_stream(provider, proxied):
    base, _ = proxied("enforce", search_policy())
    oa = openai.OpenAI(base_url=f"{base}/v1", api_key=KEY)
    list(oa.chat.completions.create(model="gpt-4.1", tools=openai_tools(), stream=True,
                                    messages=[{"role": "user", "content": "Save my work"}]))
    assert sent_tools(provider) == ["read_file"]


def sent_tools_of(received) -> list[str]:
    return sorted(tool["function"]["name"] if "function" in tool else tool["name"]
                  for tool in received.body.get("tools", []))


def test_a_policy_with_the_providers_deferred_loading_is_sent_as_the_provider_takes_it(provider, proxied):
    """provider_search: Anthropic's own search tool first, the always-on set in full, every other
    tool with defer_loading (one order, so the prompt cache keeps its prefix)."""
    document = search_policy()
    document["selection"]["tool_search"]["provider_search"] = True
    base, recorder = proxied("enforce", document)
    an = anthropic.Anthropic(base_url=base, api_key=KEY)
    an.messages.create(model="claude-sonnet-4-5", max_tokens=200, tools=anthropic_tools(),
                       messages=[{"role": "user", "content": "Read the README"}])
    sent = provider.received[-1].body["tools"]
    assert sent[0]["name"].startswith("tool_search_tool_") and sent[0]["type"].startswith("tool_search_tool_")
    assert [(tool["name"], tool.get("defer_loading", False)) for tool in sent[1:]] == [
        ("read_file", False), ("run_tests", True), ("git_commit", True), ("web_search", True)]
    (turn,) = [event for event in recorder.events if event["type"] == "turn"]
    # Recorded: what the prompt holds, not the deferred definitions nor the provider's own tool.
    assert [tool["name"] for tool in turn["tools"]] == ["read_file"]


LONG = "".join(f"line {n}: the README says something about the parser\n" for n in range(300))


def outputs_policy() -> dict[str, Any]:
    document = copy.deepcopy(DEFAULT_POLICY)
    document["outputs"] = {"duplicates": {"suppress": True},
                           "compaction": [{"tools": "read_file", "max_tokens": 60, "strategy": "head_tail"}]}
    return document


def test_tool_results_are_compacted_and_repeats_placeheld_and_the_original_is_retrieved(provider, proxied):
    base, recorder = proxied("enforce", outputs_policy())
    oa = openai.OpenAI(base_url=f"{base}/v1", api_key=KEY)
    history: list[Any] = [{"role": "user", "content": "Read the README"}]
    first = oa.chat.completions.create(model="gpt-4.1", tools=openai_tools(), messages=history)
    history += [first.choices[0].message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": "call_1", "content": LONG}]
    final = oa.chat.completions.create(model="gpt-4.1", tools=openai_tools(), messages=history)
    assert final.choices[0].message.content == "Done: the file is read."
    compacted_request, retrieved_request = provider.received[1], provider.received[2]
    shown = compacted_request.body["messages"][-1]["content"]
    assert len(shown) < len(LONG) / 5 and 'retrieve_tool_output(id="' in shown
    assert "retrieve_tool_output" in [tool["function"]["name"] for tool in compacted_request.body["tools"]]
    # The model asked for the original: the proxy answered it and asked again, unseen by the client.
    assert retrieved_request.body["messages"][-1]["content"] == LONG
    assert retrieved_request.body["messages"][-3]["content"] == shown  # the history as first given
    calls = [(event["tool_name"], event["output"]) for event in recorder.events if event["type"] == "tool_call"]
    assert calls == [("read_file", LONG), ("retrieve_tool_output", LONG)]  # originals recorded

    # Later: the same output again. The first result keeps its text (the prompt cache's prefix),
    # the repeat becomes a placeholder naming it.
    again = {"role": "assistant", "content": None, "tool_calls": [{"id": "call_2", "type": "function", "function": {
        "name": "read_file", "arguments": json.dumps({"path": "README.md"})}}]}
    history += [final.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "Again"},
                again, {"role": "tool", "tool_call_id": "call_2", "content": LONG}]
    oa.chat.completions.create(model="gpt-4.1", tools=openai_tools(), messages=history)
    forwarded = [m for m in provider.received[-1].body["messages"] if m.get("role") == "tool"]
    assert forwarded[0]["content"] == shown
    assert forwarded[1]["content"].startswith("[same output as") and "call_1" in forwarded[1]["content"]


def test_shadow_forwards_unchanged_and_records_what_the_policy_would_have_sent(provider, proxied):
    base, recorder = proxied("shadow", policy())
    oa = openai.OpenAI(base_url=f"{base}/v1", api_key=KEY)
    oa.chat.completions.create(model="gpt-4.1", tools=openai_tools(),
                               messages=[{"role": "user", "content": "Run the tests, then git_commit"}])
    assert sent_tools(provider) == list(TOOLS)  # unchanged
    (turn,) = [event for event in recorder.events if event["type"] == "turn"]
    assert [tool["name"] for tool in turn["tools"]] == list(TOOLS)  # what was sent
    assert turn["shadow_tools"] == ["read_file", "run_tests"]  # what enforcing would have sent
    assert recorder.events[0]["metadata"]["proxy_mode"] == "shadow"


def test_a_model_routed_elsewhere_goes_to_its_own_upstream(provider):
    other = Provider()
    with serving(app(other)) as elsewhere:
        config = ProxyConfig(mode="observe", upstreams={"openai": provider.url, "anthropic": provider.url},
                             routes=(("llama-*", elsewhere),))
        with serving(Proxy(config).app()) as base:
            oa = openai.OpenAI(base_url=f"{base}/v1", api_key=KEY)
            for model in ("llama-3.3-70b", "gpt-4.1"):
                oa.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
    assert [received.body["model"] for received in other.received] == ["llama-3.3-70b"]
    assert [received.body["model"] for received in provider.received] == ["gpt-4.1"]


def test_routes_are_read_from_the_environment_and_refused_when_malformed(monkeypatch):
    from toolscope_agent.proxy.config import routes_parse

    monkeypatch.setenv("TOOLSCOPE_PROXY_ROUTES", "llama-*=http://127.0.0.1:8000, qwen*=http://10.0.0.2:8000/")
    assert ProxyConfig.from_env().routes == (("llama-*", "http://127.0.0.1:8000"), ("qwen*", "http://10.0.0.2:8000/"))
    with pytest.raises(ValueError, match="MODEL_GLOB=URL"):
        routes_parse("llama-*")
    with pytest.raises(ValueError, match="http"):
        ProxyConfig(routes=(("llama-*", "ftp://x"),))


def test_progressive_mode_puts_the_menu_in_the_system_prompt_and_reads_activations(provider, proxied):
    document = copy.deepcopy(DEFAULT_POLICY)
    document["selection"].update({"mode": "progressive", "always_on": ["read_file"]})
    base, _ = proxied("enforce", document)
    oa = openai.OpenAI(base_url=f"{base}/v1", api_key=KEY)
    history: list[Any] = [{"role": "system", "content": "You are a coding agent."},
                          {"role": "user", "content": "Save my work with git_commit"}]
    first = oa.chat.completions.create(model="gpt-4.1", tools=openai_tools(), messages=history)
    system = provider.received[-1].body["messages"][0]["content"]
    assert system.startswith("You are a coding agent.\n\nTools you can use (write $name")
    assert "git_commit" in system and sent_tools(provider) == ["read_file"]
    assert first.choices[0].message.content == "$git_commit"  # the model activates it
    history += [{"role": "assistant", "content": "$git_commit"}, {"role": "user", "content": "Go on"}]
    oa.chat.completions.create(model="gpt-4.1", tools=openai_tools(), messages=history)
    assert sent_tools(provider) == ["read_file", "git_commit"]  # activated: sent in full from now on
