"""toolscope-proxy: the model API, with the published policy applied where the task is visible.

An ASGI app (Starlette) between an agent and its provider. For OpenAI Chat Completions
(`/v1/chat/completions`), OpenAI Responses (`/v1/responses`) and Anthropic Messages
(`/v1/messages`) it reads the request's tools, its task (the latest user message) and its
conversation, and in `enforce` mode sends the tools the policy selects for that task, rendered as
the SDK renders them (the same engine: `ToolSelector`); in `observe` mode it forwards the request
unchanged. Every other path is forwarded as it is.

What goes back to the client is the provider's answer unchanged: status, headers (rate-limit
headers included) and body; a stream is passed through chunk by chunk as it arrives, read on the
side (`StreamReader`) for the usage and the calls. The client's own provider key goes upstream in
its header and nowhere else: never stored, never logged, never sent to toolscope.

Telemetry (recorder.py): each request a turn (tools sent, usage with cache reads and writes,
latency, system prompt, task, new messages), each tool call with its result from the next request,
through the SDK's client and its disk spool: nothing is lost while toolscope is away.

toolscope's `tool_search` and `retrieve_tool_output` are answered by the proxy itself for whole
answers (`_answering`): the extra round trips are the proxy's, recorded as turns. In a stream
they are left out. Progressive mode's menu goes in the system prompt (`Protocol.with_note`); a
policy using the provider's own deferred loading (`tool_search.provider_search`) is sent as
rendered. Tool results are given to the model
as the policy says (duplicate placeholders, compaction: `_outputs`), the same text every request.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from toolscope_agent.client import Client
from toolscope_agent.engine.compaction import RETRIEVE_TOOL_NAME
from toolscope_agent.engine.render import SEARCH_TOOL_NAME, render
from toolscope_agent.policy import PolicyCache
from toolscope_agent.proxy.config import ProxyConfig
from toolscope_agent.proxy.protocols import PROTOCOLS, Call, Protocol, StreamReader, names, prompted
from toolscope_agent.proxy.recorder import SESSION_HEADER, Recorder
from toolscope_agent.selector import ToolSelector

logger = logging.getLogger("toolscope_agent.proxy")

# Never forwarded either way (RFC 9110 §7.6.1), and what the proxy sets itself.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                        "trailers", "transfer-encoding", "upgrade", "host", "content-length"})
# The client-side tools of toolscope's engine the proxy answers itself (for whole answers).
ENGINE_TOOLS = frozenset({SEARCH_TOOL_NAME, RETRIEVE_TOOL_NAME})
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
# Searches the proxy answers for one client request before it hands the model's answer back.
MAX_SEARCH_ROUNDS = 3


class Proxy:
    def __init__(self, config: ProxyConfig, *, policy: PolicyCache | Mapping[str, Any] | None = None,
                 recorder: Recorder | None = None, http: httpx.AsyncClient | None = None,
                 client: Client | None = None) -> None:
        """`client`: where `retrieve_tool_output` asks for an original this process does not hold."""
        self.config = config
        self.policy = policy
        self.client = client
        self.recorder = recorder or Recorder(None, mode=config.mode)
        # No cap on upstream connections: httpx's default (100) made the 101st concurrent stream
        # wait for one to end (bench/proxy_streams.py); every client request is one upstream.
        self.http = http or httpx.AsyncClient(timeout=httpx.Timeout(config.timeout, connect=10.0),
                                              limits=httpx.Limits(max_connections=None, max_keepalive_connections=100))
        self._engines: OrderedDict[str, _Engine] = OrderedDict()
        self._warned_engine_tools = False

    def app(self, *, on_shutdown: Callable[[], None] | None = None) -> Starlette:
        """The ASGI app. `on_shutdown` runs when the server stops (inside it: uvicorn re-raises a
        SIGTERM once it has shut down, so code after `uvicorn.run` would never run)."""
        routes = [Route(path, self.model_request, methods=["POST"]) for path in PROTOCOLS]
        routes.append(Route("/{path:path}", self.passthrough, methods=METHODS))

        @contextlib.asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            yield
            await self.http.aclose()
            if on_shutdown is not None:
                on_shutdown()

        return Starlette(routes=routes, lifespan=lifespan)

    # -- model requests --------------------------------------------------------------------------

    async def model_request(self, request: Request) -> Response:
        protocol = PROTOCOLS[request.url.path]
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return await self._forward(request, raw, protocol.provider)
        key = self.recorder.key(protocol, body, request.headers)
        conversation = self.recorder.conversation(key, model=body.get("model"))
        self.recorder.results(conversation, protocol, body)
        tools = protocol.tools(body)
        if self.config.mode == "shadow":
            return await self._shadowed(request, raw, protocol, body, key, conversation, tools)
        engine = self._engine(key, tools) if self.config.mode == "enforce" and tools else None
        selector = engine.selector if engine is not None else None
        # A whole answer can be held back while the proxy answers the model's tool_search and
        # retrieve_tool_output itself; a stream is passed on as it comes, so it never carries them.
        answers = engine is not None and not body.get("stream")
        if engine is not None and selector is not None:
            body = self._outputs(engine, protocol, body)
            sent, menu = self._enforced(selector, protocol, body, answered=answers)
            if answers and ENGINE_TOOLS & set(names(sent)):
                return await self._answering(request, protocol, body, selector, conversation, sent, menu)
            body = protocol.with_note(protocol.with_tools(body, sent), menu)
            raw = json.dumps(body, ensure_ascii=False).encode()
        else:
            sent = tools
        started = time.perf_counter()

        def record(response: Mapping[str, Any] | None) -> None:
            latency = (time.perf_counter() - started) * 1000
            self.recorder.turn(conversation, protocol, body, tools=sent, response=response, latency_ms=latency)
            if selector is not None and response:
                _observe(selector, protocol, response)

        return await self._forward(request, raw, protocol.provider, protocol=protocol, on_done=record,
                                   model=body.get("model"))

    async def _shadowed(self, request: Request, raw: bytes, protocol: Protocol, body: dict[str, Any], key: str,
                        conversation: Any, tools: list[dict[str, Any]]) -> Response:
        """Shadow mode: the request goes upstream unchanged; its turn records what the policy
        would have sent in its place (`shadow_tools`), so an operator sees, request by request, what
        enforcing would send and which calls it would have missed before enforcing it."""
        engine = self._engine(key, tools) if tools else None
        shadow = names(prompted(engine.selector.tools(protocol.task(body), format=protocol.format))) \
            if engine is not None else None
        started = time.perf_counter()

        def record(response: Mapping[str, Any] | None) -> None:
            self.recorder.turn(conversation, protocol, body, tools=tools, response=response,
                               latency_ms=(time.perf_counter() - started) * 1000, shadow_tools=shadow)
            if engine is not None and response:
                _observe(engine.selector, protocol, response)

        return await self._forward(request, raw, protocol.provider, protocol=protocol, on_done=record,
                                   model=body.get("model"))

    def _engine(self, key: str, tools: list[dict[str, Any]]) -> _Engine | None:
        """The conversation's selector (its session state, duplicates seen, originals kept) with
        this request's tools as its catalog."""
        if self.policy is None:
            return None
        engine = self._engines.get(key)
        if engine is None:
            engine = self._engines[key] = _Engine(ToolSelector(tools, self.policy, client=self.client))
            while len(self._engines) > self.recorder.max_sessions:
                self._engines.popitem(last=False)
        else:
            engine.selector.replace_tools(tools)
        self._engines.move_to_end(key)
        return engine

    def _outputs(self, engine: _Engine, protocol: Protocol, body: dict[str, Any]) -> dict[str, Any]:
        """The request with its tool results as the policy gives them to the model: a repeated
        output as a placeholder naming the first, a long one compacted to its rule (naming the
        id `retrieve_tool_output` takes). Each result is decided once, the first time the proxy
        sees it, and given the same text in every later request, so the prompt cache keeps the
        conversation's prefix; the recorder keeps the originals."""
        calls = protocol.history_calls(body)
        for result in protocol.results(body):
            if result.call_id in engine.texts:
                continue
            call = calls.get(result.call_id)
            name = call.name if call is not None else ""
            given = engine.selector.prepare_output(name, result.call_id, result.output) \
                if name and not result.is_error else result.output
            # None: passed on as the client sent it (an image block stays an image block).
            engine.texts[result.call_id] = given if given != result.output else None
        changed = {call_id: text for call_id, text in engine.texts.items() if text is not None}
        return protocol.with_results(body, changed) if changed else body

    def _enforced(self, selector: ToolSelector, protocol: Protocol, body: Mapping[str, Any], *,
                  answered: bool = False) -> tuple[list[dict[str, Any]], str]:
        """The tools to send: the policy's, with `retrieve_tool_output` where the policy compacts,
        less toolscope's own tools the proxy cannot answer here (it answers them for a whole
        answer, `answered`; never in a stream); and progressive mode's menu ("" otherwise), which
        goes in the system prompt: the model activates a tool by writing its name after the
        menu's prefix, which the proxy reads in its answer."""
        selection = selector.select(protocol.task(body))
        rendered = render(selection, protocol.format, selector.policy)
        if answered and _compacts(selector.policy) and RETRIEVE_TOOL_NAME not in names(rendered):
            rendered = [*rendered, selector.retrieve_tool(protocol.format)]
        kept = rendered if answered else [tool for tool in rendered if names([tool])[0] not in ENGINE_TOOLS]
        if len(kept) < len(rendered) and not self._warned_engine_tools:
            self._warned_engine_tools = True
            logger.warning("toolscope-proxy: toolscope's own tools (%s) are left out of streamed requests: the "
                           "proxy answers them for whole answers only",
                           ", ".join(sorted(set(names(rendered)) - set(names(kept)))))
        return kept, selection.menu or ""

    async def _answering(self, request: Request, protocol: Protocol, body: dict[str, Any], selector: ToolSelector,
                         conversation: Any, sent: list[dict[str, Any]], menu: str) -> Response:
        """The request with toolscope's own tools among its tools, answered here: while the
        model's answer calls only those (`tool_search`, `retrieve_tool_output`), the proxy runs
        them, adds the calls and their answers to the conversation, and asks again (with the tools
        a search found). Each round trip is a recorded turn, each answer a recorded call; the
        client gets the last answer."""
        client_items = len(protocol.conversation(body))
        headers = _upstream_headers(request)
        url = self._url(protocol.provider, request, body.get("model"))
        if url is None:
            return _no_upstream(protocol.provider)
        for _round in range(MAX_SEARCH_ROUNDS + 1):
            current = protocol.with_note(protocol.with_tools(body, sent), menu)
            started = time.perf_counter()
            try:
                upstream = await self.http.post(url, headers=headers,
                                                content=json.dumps(current, ensure_ascii=False).encode())
            except httpx.HTTPError as exc:
                return _unreachable(protocol.provider, "POST", url, exc)
            try:
                answer = upstream.json() if upstream.is_success else None
            except ValueError:
                answer = None
            answer = answer if isinstance(answer, dict) else None
            latency = (time.perf_counter() - started) * 1000
            _safely(lambda response, c=current, t=sent, ms=latency: self.recorder.turn(
                conversation, protocol, c, tools=t, response=response, latency_ms=ms), answer)
            if answer is not None:
                _observe(selector, protocol, answer)
            calls = protocol.calls(answer or {})
            ours = [call for call in calls if call.name in ENGINE_TOOLS]
            if answer is None or not ours or len(ours) < len(calls) or _round == MAX_SEARCH_ROUNDS:
                if conversation is not None:
                    conversation.seen = client_items
                return _passed_back(upstream)
            results = [(call, _engine_answer(selector, protocol, call)) for call in ours]
            body = protocol.continued(body, answer, results)
            self.recorder.results(conversation, protocol, body)
            sent, menu = self._enforced(selector, protocol, body, answered=True)
        raise AssertionError("unreachable")  # the loop returns by its last round

    # -- forwarding ------------------------------------------------------------------------------

    async def passthrough(self, request: Request) -> Response:
        provider = "anthropic" if "anthropic-version" in request.headers or "x-api-key" in request.headers \
            else "openai"
        return await self._forward(request, await request.body(), provider)

    async def _forward(self, request: Request, content: bytes, provider: str, *, protocol: Protocol | None = None,
                       on_done: Any = None, model: Any = None) -> Response:
        url = self._url(provider, request, model)
        if url is None:
            return _no_upstream(provider)
        headers = _upstream_headers(request)
        upstream_request = self.http.build_request(request.method, url, headers=headers, content=content)
        try:
            upstream = await self.http.send(upstream_request, stream=True)
        except httpx.HTTPError as exc:
            return _unreachable(provider, request.method, url, exc)
        back = _headers_back(upstream)
        streamed = upstream.headers.get("content-type", "").startswith("text/event-stream")
        if streamed:
            reader = StreamReader(protocol) if protocol is not None and upstream.is_success else None

            async def chunks() -> AsyncIterator[bytes]:
                async for chunk in upstream.aiter_raw():
                    if reader is not None:
                        reader.feed(chunk)
                    yield chunk
                # Recorded before the stream's end reaches the client, so the client's next
                # request (with this answer's tool results) always finds this turn recorded.
                if on_done is not None:
                    _safely(on_done, reader.body() if reader is not None else None)

            async def finish() -> None:
                await upstream.aclose()

            stream = StreamingResponse(chunks(), status_code=upstream.status_code, background=BackgroundTask(finish))
            stream.raw_headers = [(n.encode("latin-1"), v.encode("latin-1")) for n, v in back]
            return stream
        data = await upstream.aread()
        await upstream.aclose()
        if on_done is not None:  # a refused request is a request too: recorded, without usage
            try:
                parsed = json.loads(data) if upstream.is_success else None
            except ValueError:
                parsed = None
            _safely(on_done, parsed if isinstance(parsed, dict) else None)
        return _passed_back(upstream)

    def _url(self, provider: str, request: Request, model: Any = None) -> str | None:
        """The upstream URL: the first route whose glob the request's model matches, else the
        API's upstream."""
        routed = (base for glob, base in self.config.routes if isinstance(model, str) and fnmatchcase(model, glob))
        base = next(routed, None) or self.config.upstreams.get(provider)
        if not base:
            return None
        return base.rstrip("/") + request.url.path + (f"?{request.url.query}" if request.url.query else "")


def _upstream_headers(request: Request) -> list[tuple[str, str]]:
    """The client's headers for the provider (its key among them), less hop-by-hop ones and the
    proxy's own; asked uncompressed, as the proxy reads the answer on its way back."""
    headers = [(name, value) for name, value in request.headers.items()
               if name.lower() not in HOP_BY_HOP and name.lower() not in ("accept-encoding", SESSION_HEADER)]
    headers.append(("accept-encoding", "identity"))
    return headers


def _headers_back(upstream: httpx.Response) -> list[tuple[str, str]]:
    return [(name, value) for name, value in upstream.headers.items()
            if name.lower() not in HOP_BY_HOP and name.lower() != "content-encoding"]


def _passed_back(upstream: httpx.Response) -> Response:
    """A whole upstream answer as the client gets it: status, headers and body unchanged."""
    response = Response(upstream.content, status_code=upstream.status_code)
    response.raw_headers = [(n.encode("latin-1"), v.encode("latin-1")) for n, v in _headers_back(upstream)]
    response.raw_headers.append((b"content-length", str(len(upstream.content)).encode()))
    return response


@dataclass
class _Engine:
    """A conversation's engine: its selector, and the text each tool result was given by call id
    (None: as the client sent it)."""

    selector: ToolSelector
    texts: dict[str, str | None] = field(default_factory=dict)


def _compacts(policy: Mapping[str, Any]) -> bool:
    """Whether the policy may shorten an output (a compaction rule, a tool's max_result_tokens)."""
    outputs = policy.get("outputs")
    rules = outputs.get("compaction") if isinstance(outputs, Mapping) else None
    tools = policy.get("tools")
    limits = [settings.get("max_result_tokens") for settings in tools.values()
              if isinstance(settings, Mapping)] if isinstance(tools, Mapping) else []
    return bool(rules) or any(isinstance(limit, int) and limit > 0 for limit in limits)


def _engine_answer(selector: ToolSelector, protocol: Protocol, call: Call) -> Any:
    arguments = call.arguments if isinstance(call.arguments, Mapping) else {}
    if call.name == RETRIEVE_TOOL_NAME:
        return selector.retrieve_tool_output(str(arguments.get("id", "")))
    return selector.search_answer(str(arguments.get("query", "")), format=protocol.format, call_id=call.call_id)


def _safely(callback: Any, argument: Any) -> None:
    """Recording never fails a request: the answer has gone to the client already or is about to."""
    try:
        callback(argument)
    except Exception:  # telemetry must not break the agent
        logger.exception("toolscope-proxy: recording a request failed")


def _observe(selector: ToolSelector, protocol: Protocol, response: Mapping[str, Any]) -> None:
    """The model's answer told to the selector: its text (progressive activations) and calls."""
    selector.observe(protocol.output_text(response), [
        {"name": call.name, "arguments": call.arguments} for call in protocol.calls(response)])


def _no_upstream(provider: str) -> JSONResponse:
    return _error(502, f"no upstream configured for {provider} (--{provider}-base-url)")


def _unreachable(provider: str, method: str, url: str, exc: Exception) -> JSONResponse:
    logger.warning("toolscope-proxy: %s %s failed: %s", method, url, type(exc).__name__)
    return _error(502, f"the upstream {provider} API could not be reached ({type(exc).__name__})")


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"type": "toolscope_proxy_error", "message": message}}, status_code=status)
