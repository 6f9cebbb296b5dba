"""The gateway: one MCP server in front of several, applying the published policy to every client.

Per client connection (a stdio gateway serves one; over Streamable HTTP, each `mcp-session-id`
is one) the gateway keeps a ToolSelector, the SDK's: the same engine and session state as an
agent that embeds the SDK, so what toolscope simulates is what the gateway does.

- `tools/list` answers the selection: the policy's always-on set, what rules and the session
  have brought in, `tool_search` in that mode (its results load tools, then
  `notifications/tools/list_changed`), `activate_tools` in progressive mode (its description is
  the menu; activating sends list_changed), and `retrieve_tool_output` when outputs may be
  shortened.
- `tools/call` is forwarded to the server that lists the tool (a tool the policy left out is
  forwarded too, and counted as a miss), then its text output goes through the policy's output
  rules: a placeholder for a repeat, compaction with the original behind `retrieve_tool_output`,
  the tool's `max_result_tokens`. A tool with `requires_approval` asks the person through MCP
  elicitation when the client offers it, else answers with a refusal the model can read.
- Telemetry, when a toolscope section is configured: the upstream catalogs (PUT /api/v1/tools,
  source = server name), a session per client connection, a turn per `tools/list` answer (what
  was advertised), a tool call per call (arguments redacted, output, duration, `isError` as
  status), through the SDK's batched, non-blocking exporter. The policy comes from the SDK's
  PolicyCache: revalidated in the background, the last good one kept on disk, so the gateway
  keeps serving with toolscope down.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
import warnings
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
import mcp.types as types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ToolsListChanged

from toolscope_agent._version import __version__
from toolscope_agent.client import Client
from toolscope_agent.engine.compaction import RETRIEVE_TOOL_NAME, rules_from_policy
from toolscope_agent.engine.redaction import redact_text
from toolscope_agent.engine.render import RETRIEVE_TOOL, SEARCH_TOOL, SEARCH_TOOL_NAME, menu_text
from toolscope_agent.engine.search import answer_text
from toolscope_agent.errors import ToolscopeError, UnreachableError
from toolscope_agent.gateway.config import GatewayConfig, ToolscopeConfig
from toolscope_agent.gateway.outputs import replaced
from toolscope_agent.gateway.passthrough import Directory, PassThrough
from toolscope_agent.gateway.upstream import ServerDown, Upstream
from toolscope_agent.policy import DEFAULT_POLICY, PolicyCache, default_cache_dir
from toolscope_agent.selector import ToolSelector
from toolscope_agent.session import Session

logger = logging.getLogger("toolscope_agent.gateway")

ACTIVATE_TOOL_NAME = "activate_tools"
ELICITATION = types.ClientCapabilities(elicitation=types.ElicitationCapability())
APPROVAL_SCHEMA = {"type": "object", "properties": {"approve": {"type": "boolean", "title": "Allow this call"}},
                   "required": ["approve"]}
CLOSE_SECONDS = 1.0
IDLE_SECONDS = 3600.0
"""A Streamable HTTP client unseen this long has its session ended (telemetry) and forgotten."""


@dataclass(frozen=True)
class Route:
    server: str
    name: str  # the upstream's name for the tool
    tool: dict[str, Any]  # as the upstream listed it, under the name clients see


@dataclass
class ClientState:
    """One client connection's selector, telemetry session and what it was last told."""

    key: str
    selector: ToolSelector
    session: Session | None
    advertised: set[str] = field(default_factory=set)
    subscriptions: set[str] = field(default_factory=set)  # resource URIs (as the client knows them)
    server_session: Any = None  # the last request's ServerSession: notifications go through it
    seen: float = field(default_factory=time.monotonic)
    misses: int = 0


class Gateway(PassThrough):
    def __init__(self, config: GatewayConfig, *, transport: str = "stdio",
                 policy: PolicyCache | Mapping[str, Any] | None = None, client: Client | None = None) -> None:
        """`policy` and `client` default to what the configuration's toolscope section gives
        (PolicyCache, Client; the configured `policy` until toolscope first answers), or without
        one to the configured `policy` (else every tool) and recording nothing."""
        self.config, self.transport = config, transport
        toolscope = config.toolscope
        self._owns_client = client is None and toolscope is not None
        if client is None and toolscope is not None:
            client = Client(toolscope.url, toolscope.api_key, spool_dir=spool_directory(toolscope))
        if policy is None and toolscope is not None:
            policy = PolicyCache(toolscope.url, toolscope.api_key, label=toolscope.label, ttl=toolscope.policy_ttl,
                                 cache_dir=toolscope.cache_dir, default=dict(config.policy or DEFAULT_POLICY))
        elif policy is None:
            policy = config.policy if config.policy is not None else DEFAULT_POLICY
        self.policy, self.client = policy, client
        self.upstreams = {server.name: Upstream(server, self._upstream_changed, self._pass_on, self._last_client)
                          for server in config.servers}
        self.directory = Directory()
        self.routes: dict[str, Route] = {}
        self.clients: dict[str, ClientState] = {}
        self.bus = InMemorySubscriptionBus()
        self._wire: dict[str, types.Tool] = {}
        self._tasks: anyio.abc.TaskGroup | None = None
        self.stats = {"calls": 0, "misses": 0, "list_changed": 0}
        self._started = False  # routes are built once `running` has waited for the servers
        self._registration = 0  # the latest catalog registration's number
        self._gone: dict[str, str] = {}  # exposed tool name -> server, for tools of a stopped server

    # -- lifecycle ----------------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Gateway]:
        """Upstreams started at once and supervised (each in its own task: Upstream.run), served
        when all have started or failed, or after `startupWait` (a slower one joins later with
        `list_changed`); the policy loaded (at most its timeout), the catalogs registered in the
        background; on exit, every client's session ended and telemetry flushed."""
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            for upstream in self.upstreams.values():
                tasks.start_soon(upstream.run)
            # The tokenizer compaction counts with (about a second to load), loaded meanwhile.
            tokenizer = anyio.Event()

            async def load_tokenizer() -> None:
                await anyio.to_thread.run_sync(lambda: ToolSelector([], self.policy).counter)
                tokenizer.set()

            tasks.start_soon(load_tokenizer)
            with anyio.move_on_after(self.config.startup_wait):
                for upstream in self.upstreams.values():
                    await upstream.settled.wait()
            for upstream in self.upstreams.values():
                if not upstream.settled.is_set():
                    logger.warning("upstream %s has not started after %.0f s: its tools join when it does",
                                   upstream.name, self.config.startup_wait)
            self._started = True
            self._route()
            if isinstance(self.policy, PolicyCache):
                await anyio.to_thread.run_sync(self.policy.get)
            await tokenizer.wait()  # before the first call needs it
            tasks.start_soon(self._register_catalog)
            try:
                yield self
            finally:
                tasks.cancel_scope.cancel()
                self._close_all()

    def instructions(self) -> str | None:
        """The servers' own instructions, each under its server's name (what each would have told
        the client directly), for the gateway's `initialize` answer."""
        parts = [f"## {name}\n{upstream.instructions.strip()}" for name, upstream in self.upstreams.items()
                 if upstream.instructions.strip()]
        return ("Tools from several MCP servers, through toolscope-mcp. Their instructions:\n\n"
                + "\n\n".join(parts)) if parts else None

    def _close_all(self) -> None:
        for state in self.clients.values():
            if state.session is not None:
                state.session.end()
        self.clients.clear()
        if self.client is not None and self._owns_client:
            # Clients give a server about 2 s to exit once its stdin closes, then kill it: what
            # toolscope has not taken after CLOSE_SECONDS is spooled, for the next run to send.
            self.client.close(timeout=CLOSE_SECONDS)
        elif self.client is not None:
            self.client.flush(timeout=5)

    def server(self) -> Server[Gateway]:
        """The low-level MCP server to run (stdio or Streamable HTTP) inside `running()`."""
        gateway = self

        @asynccontextmanager
        async def lifespan(server: Server[Gateway]) -> AsyncIterator[Gateway]:
            async with gateway.running():
                server.instructions = gateway.instructions()
                if isinstance(server, _GatewayServer):  # options made before the servers started (stdio)
                    for options in server.issued or ():
                        options.instructions = server.instructions
                    server.issued = None  # those made from now on have them
                yield gateway

        with warnings.catch_warnings():  # logging is deprecated from 2026-07-28; older clients use it
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            return _GatewayServer(
                "toolscope-mcp", version=__version__, lifespan=lifespan,
                on_list_tools=self.on_list_tools, on_call_tool=self.on_call_tool,
                on_list_resources=self.on_list_resources, on_list_resource_templates=self.on_list_resource_templates,
                on_read_resource=self.on_read_resource, on_subscribe_resource=self.on_subscribe_resource,
                on_unsubscribe_resource=self.on_unsubscribe_resource, on_list_prompts=self.on_list_prompts,
                on_get_prompt=self.on_get_prompt, on_completion=self.on_completion,
                on_set_logging_level=self.on_set_logging_level, on_roots_list_changed=self.on_roots_list_changed,
                on_subscriptions_listen=ListenHandler(self.bus))

    # -- the catalog --------------------------------------------------------------------------

    def _route(self) -> None:
        """Each upstream tool under the name clients see (see config: names.prefix)."""
        listing = [(name, tool) for name, upstream in self.upstreams.items() for tool in upstream.tools]
        counts: dict[str, int] = {}
        for _, tool in listing:
            counts[tool["name"]] = counts.get(tool["name"], 0) + 1
        routes: dict[str, Route] = {}
        for server, tool in listing:
            prefixed = (self.config.prefix == "always"
                        or (self.config.prefix == "collisions" and counts[tool["name"]] > 1))
            exposed = f"{server}{self.config.separator}{tool['name']}" if prefixed else tool["name"]
            if exposed in routes:
                logger.warning("tool %s of %s hidden: %s lists the same name", tool["name"], server,
                               routes[exposed].server)
                continue
            routes[exposed] = Route(server, tool["name"], {**tool, "name": exposed})
        self.routes = routes
        self.directory = Directory.build(self.upstreams.values(), prefix=self.config.prefix,
                                         separator=self.config.separator)
        self._wire = {name: types.Tool.model_validate(route.tool) for name, route in routes.items()}
        for synthetic in (SEARCH_TOOL, RETRIEVE_TOOL, self._activate_tool("")):
            if synthetic["name"] not in routes:
                self._wire[synthetic["name"]] = _wire_tool(synthetic)
        catalog = self.catalog()
        for state in self.clients.values():
            state.selector.replace_tools(catalog)

    def catalog(self) -> list[dict[str, Any]]:
        """The tools as the selector and toolscope see them: exposed name, source = server."""
        return [{**route.tool, "source": route.server} for route in self.routes.values()]

    async def _register_catalog(self) -> None:
        """Register the catalog, again and again (1 s, doubling to 5 minutes) while toolscope
        cannot take it; a newer registration (the servers changed) replaces this one."""
        if self.client is None:
            return
        client, catalog = self.client, self.catalog()
        if not catalog:  # no server has listed a tool yet: nothing to register
            return
        self._registration += 1
        mine, wait = self._registration, 1.0
        while mine == self._registration:
            try:
                await anyio.to_thread.run_sync(lambda: client.register_tools(catalog))
                return
            except ToolscopeError as exc:  # toolscope down, or the key lacks ingest: serve anyway
                if wait == 1.0:
                    logger.warning("could not register the catalog with toolscope (%s); trying again", exc)
                if isinstance(exc, UnreachableError) or exc.status is None or exc.status >= 500 or exc.status == 429:
                    await anyio.sleep(wait)
                    wait = min(wait * 2, 300.0)
                else:
                    return

    async def _upstream_changed(self, upstream: Upstream, what: str) -> None:
        if not self._started:  # still starting: `running` routes every server at once
            return
        if what in ("resources", "prompts"):
            self._route()
            for state in list(self.clients.values()):
                await self._notify_list(state, what)
            await self.bus.publish(ResourcesListChanged() if what == "resources" else PromptsListChanged())
            return
        before = {name: route.server for name, route in self.routes.items()}
        self._route()
        self._gone = {**{name: server for name, server in self._gone.items() if name not in self.routes},
                      **{name: server for name, server in before.items()
                         if name not in self.routes and not self.upstreams[server].running}}
        if self._tasks is not None:
            self._tasks.start_soon(self._register_catalog)
        for state in list(self.clients.values()):
            await self._notify(state)
        if what == "all":  # it started or stopped: its resources and prompts came or went too
            for state in list(self.clients.values()):
                await self._notify_list(state, "resources")
                await self._notify_list(state, "prompts")
            await self.bus.publish(ResourcesListChanged())
            await self.bus.publish(PromptsListChanged())

    # -- clients ------------------------------------------------------------------------------

    def _state(self, ctx: ServerRequestContext[Any]) -> ClientState:
        key = self._client_key(ctx)
        state = self.clients.get(key)
        if state is None:
            self._expire()
            state = self.clients[key] = ClientState(key, ToolSelector(self.catalog(), self.policy, client=self.client),
                                                    self._session(ctx))
        state.seen = time.monotonic()
        state.server_session = ctx.session
        return state

    def _last_client(self) -> Any:
        """The ServerSession of the client seen last (a server's roots/list outside any call)."""
        states = [state for state in self.clients.values() if state.server_session is not None]
        return max(states, key=lambda state: state.seen).server_session if states else None

    async def on_roots_list_changed(self, ctx: ServerRequestContext[Any], params: Any) -> None:
        for upstream in self.upstreams.values():
            if upstream.session is not None and upstream.running:
                await upstream.session.send_roots_list_changed()

    def _client_key(self, ctx: ServerRequestContext[Any]) -> str:
        request = ctx.request
        session_id = request.headers.get("mcp-session-id") if request is not None else None
        if session_id:
            return f"http:{session_id}"
        if self.transport == "stdio":
            return "stdio"
        info = ctx.session.client_params.client_info if ctx.session.client_params else None
        return f"client:{info.name}/{info.version}" if info else "client:anonymous"

    def _session(self, ctx: ServerRequestContext[Any]) -> Session | None:
        if self.client is None:
            return None
        info = ctx.session.client_params.client_info if ctx.session.client_params else None
        toolscope = self.config.toolscope
        agent = ((toolscope.agent_name if toolscope is not None else None) or (info.name if info else None)
                 or "mcp-client")
        metadata = {"gateway": "toolscope-mcp", "gateway_version": __version__, "transport": self.transport,
                    "servers": sorted(self.upstreams),
                    "client": {"name": info.name, "version": info.version} if info else None}
        session = self.client.session(agent_name=agent, metadata=metadata)
        session.start()
        return session

    def _expire(self) -> None:
        cutoff = time.monotonic() - IDLE_SECONDS
        for key in [key for key, state in self.clients.items() if state.seen < cutoff]:
            state = self.clients.pop(key)
            if state.session is not None:
                state.session.end()

    async def _notify(self, state: ClientState) -> None:
        """Tell the client its tools changed (both protocol eras)."""
        self.stats["list_changed"] += 1
        if state.server_session is not None:
            await state.server_session.send_tool_list_changed()
        await self.bus.publish(ToolsListChanged())

    @staticmethod
    async def _notify_list(state: ClientState, what: str) -> None:
        if state.server_session is None:
            return
        if what == "resources":
            await state.server_session.send_resource_list_changed()
        else:
            await state.server_session.send_prompt_list_changed()

    # -- tools/list -----------------------------------------------------------------------------

    async def on_list_tools(self, ctx: ServerRequestContext[Any],
                            params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        state = self._state(ctx)
        selection = state.selector.select("")
        names = list(selection.names)
        tools = [self._wire[name] for name in names]
        if selection.mode == "progressive" and selection.deferred:
            menu_tool = _wire_tool(self._activate_tool(menu_text(selection.deferred, (), hint_prefix="")))
            tools.append(menu_tool)
            names.append(ACTIVATE_TOOL_NAME)
        if selection.mode == "context_rules" and selection.deferred and SEARCH_TOOL_NAME not in names:
            # MCP carries no task message, so rules keyed by words never fire here (those keyed
            # by calls do): the search reaches what they would have sent (issue 27, item 9).
            tools.append(self._wire[SEARCH_TOOL_NAME])
            names.append(SEARCH_TOOL_NAME)
        if self._may_shorten(state) and RETRIEVE_TOOL_NAME not in names:
            tools.append(self._wire[RETRIEVE_TOOL_NAME])
            names.append(RETRIEVE_TOOL_NAME)
        state.advertised = set(names)
        if state.session is not None:
            state.session.turn(tools=[self._advertised(name) for name in names if name in self.routes])
        return types.ListToolsResult(tools=tools)

    def _advertised(self, name: str) -> dict[str, Any]:
        route = self.routes[name]
        return {**route.tool, "source": route.server}

    def _may_shorten(self, state: ClientState) -> bool:
        policy = state.selector.policy
        try:
            if rules_from_policy(policy):
                return True
        except ValueError:
            pass
        tools = policy.get("tools")
        return isinstance(tools, Mapping) and any(
            isinstance(settings, Mapping) and settings.get("max_result_tokens") for settings in tools.values())

    def _activate_tool(self, menu: str) -> dict[str, Any]:
        lines = menu.split("\n")[1:] if menu else []
        return {"name": ACTIVATE_TOOL_NAME,
                "description": "More tools are available. Call this with the names of those you need; they are "
                               "added to your tools.\n" + "\n".join(lines),
                "inputSchema": {"type": "object", "properties": {"names": {
                    "type": "array", "items": {"type": "string"}, "description": "Tool names from the list."}},
                    "required": ["names"]}}

    # -- tools/call -----------------------------------------------------------------------------

    async def on_call_tool(self, ctx: ServerRequestContext[Any],
                           params: types.CallToolRequestParams) -> types.CallToolResult | types.InputRequiredResult:
        state = self._state(ctx)
        name, arguments = params.name, dict(params.arguments or {})
        if name not in self.routes:
            if name == SEARCH_TOOL_NAME:
                return await self._search(state, arguments)
            if name == RETRIEVE_TOOL_NAME:  # may ask toolscope for an original this process does not hold
                original = await anyio.to_thread.run_sync(state.selector.retrieve_tool_output,
                                                          str(arguments.get("id", "")))
                return _text(original)
            if name == ACTIVATE_TOOL_NAME:
                return await self._activate(state, arguments)
            gone = self._gone.get(name)
            if gone is not None:
                upstream = self.upstreams[gone]
                self._record(state, name, arguments, f"server {gone} is not running", "error", 0.0, "not_required")
                return _text(f"The tool {name} belongs to the MCP server {gone}, which is not running "
                             f"({upstream.failure or 'stopped'}); toolscope-mcp is restarting it. Try again "
                             "shortly, or use another tool.", error=True)
            self._record(state, name, arguments, f"Unknown tool: {name}", "unknown_tool", 0.0, "not_required")
            return _text(f"There is no tool named {name}. Use one of the tools listed.", error=True)
        route = self.routes[name]
        missed = name not in state.advertised
        if missed:
            state.misses += 1
            self.stats["misses"] += 1
            logger.info("%s called %s, which the policy did not send: forwarded", state.key, name)
        approval = "not_required"
        if state.selector.tool_settings(name).get("requires_approval"):
            asked = await self._approval(ctx, params, name, arguments)
            if isinstance(asked, types.InputRequiredResult):
                return asked
            approval = asked
            if approval != "approved":
                self._record(state, name, arguments, "not approved", "denied", 0.0, approval)
                return _text(f"The call to {name} needs a person's approval, and it was not given"
                             + (" (this client cannot ask: MCP elicitation)." if approval == "timed_out" else "."),
                             error=True)
        started = time.perf_counter()
        relay = self.upstreams[route.server].relay
        caller = (ctx.session, ctx.request_id)
        relay.calls.append(caller)  # the server's sampling, elicitation and roots requests go to this client
        try:
            result = await self.upstreams[route.server].call(route.name, arguments, ctx.meta, _progress(ctx))
        except anyio.get_cancelled_exc_class():  # the client cancelled it (notifications/cancelled)
            duration = (time.perf_counter() - started) * 1000
            self._record(state, name, arguments, "cancelled by the client", "error", duration, approval)
            raise
        except ServerDown as exc:
            duration = (time.perf_counter() - started) * 1000
            self._record(state, name, arguments, f"server {route.server} is not running: {exc}", "error", duration,
                         approval)
            return _text(f"The MCP server {route.server}, which runs {name}, is not running ({exc}); "
                         "toolscope-mcp is restarting it. Try again shortly.", error=True)
        except MCPError as exc:
            duration = (time.perf_counter() - started) * 1000
            self._record(state, name, arguments, exc.error.message, "error", duration, approval)
            return _text(f"{route.server} refused the call: {exc.error.message}", error=True)
        finally:
            relay.calls.remove(caller)
        duration = (time.perf_counter() - started) * 1000
        self.stats["calls"] += 1
        text = "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))
        call_id = uuid.uuid4().hex[:16]
        if text:
            prepared = state.selector.prepare_output(name, call_id, text)
            if prepared != text:
                result = replaced(result, prepared, output_schema=route.tool.get("outputSchema"))
        listed = None if missed else state.selector.select("").names
        state.selector.observe("", [{"name": name, "arguments": arguments}])
        self._record(state, name, arguments, text, "error" if result.is_error else "ok", duration, approval, call_id)
        # A missed tool is sticky or activated from now on: its schema joins the list. A call of a
        # listed tool can change the list too: a context rule keyed by it (`after_tools`) now matches.
        if missed or state.selector.select("").names != listed:
            await self._notify(state)
        return result

    async def _search(self, state: ClientState, arguments: dict[str, Any]) -> types.CallToolResult:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            return _text("Say what you need to do in `query`.", error=True)
        hits = await anyio.to_thread.run_sync(state.selector.search, query)  # semantic search asks toolscope
        before = set(state.selector.state.loaded)
        state.selector.observe("", [{"name": SEARCH_TOOL_NAME, "arguments": arguments,
                                     "results": [hit.name for hit in hits]}])
        self._record(state, SEARCH_TOOL_NAME, arguments, "\n".join(hit.summary for hit in hits), "ok", 0.0,
                     "not_required")
        if set(state.selector.state.loaded) != before:
            await self._notify(state)
        return _text(answer_text(hits, "These tools are now available:"))

    async def _activate(self, state: ClientState, arguments: dict[str, Any]) -> types.CallToolResult:
        wanted = arguments.get("names")
        if not isinstance(wanted, list) or not all(isinstance(name, str) for name in wanted):
            return _text("Pass `names`: a list of tool names from the list.", error=True)
        known = [name for name in wanted if name in self.routes]
        unknown = [name for name in wanted if name not in self.routes]
        state.selector.observe("", [{"name": name, "arguments": {}} for name in known])
        if known:
            await self._notify(state)
        answer = f"Added: {', '.join(known)}." if known else "Nothing added."
        return _text(answer + (f" Not tools here: {', '.join(unknown)}." if unknown else ""))

    async def _approval(self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams, name: str,
                        arguments: dict[str, Any]) -> str | types.InputRequiredResult:
        """"approved", "denied" (declined or cancelled), "timed_out" (the client cannot ask),
        or, on the stateless protocol, the InputRequiredResult the client answers by retrying."""
        session = ctx.session
        if not session.check_client_capability(ELICITATION):
            return "timed_out"
        message = f"Allow the tool {name} to run with {json.dumps(arguments, ensure_ascii=False)[:500]}?"
        answer: Any
        if session.can_send_request:
            answer = await session.elicit_form(message, APPROVAL_SCHEMA, related_request_id=ctx.request_id)
        else:
            answered = (params.input_responses or {}).get("approval")
            if answered is None:
                return types.InputRequiredResult(
                    input_requests={"approval": types.ElicitRequest(params=types.ElicitRequestFormParams(
                        message=message, requested_schema=APPROVAL_SCHEMA))},
                    request_state="approval")
            answer = answered
        content = getattr(answer, "content", None) or {}
        accepted = getattr(answer, "action", None) == "accept" and content.get("approve") is True
        return "approved" if accepted else "denied"

    # -- telemetry ----------------------------------------------------------------------------

    def _record(self, state: ClientState, name: str, arguments: dict[str, Any], output: str, status: str,
                duration_ms: float, approval: str, call_id: str | None = None) -> None:
        session = state.session
        if session is None:
            return
        redacted = state.selector.redact(name, arguments)
        session.tool_call(name, redacted, output=redact_text(output), status=status,  # type: ignore[arg-type]
                          duration_ms=round(duration_ms, 3), approval=approval, call_id=call_id)  # type: ignore[arg-type]


class _GatewayServer(Server[Gateway]):
    """Declares `listChanged` for tools, resources and prompts: the Streamable HTTP session
    manager asks for the default initialization options, which would not. Keeps the options it
    made (`issued`): the servers' instructions join them once the servers have started."""

    issued: list[Any] | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.issued = []

    def create_initialization_options(self, notification_options: NotificationOptions | None = None,
                                      experimental_capabilities: dict[str, dict[str, Any]] | None = None,
                                      extensions: Any = None) -> Any:
        options = notification_options or NotificationOptions(tools_changed=True, resources_changed=True,
                                                              prompts_changed=True)
        made = super().create_initialization_options(options, experimental_capabilities, extensions)
        if self.issued is not None:
            self.issued.append(made)
        return made


def spool_directory(toolscope: ToolscopeConfig) -> Path:
    """Where the gateway keeps telemetry toolscope could not take (toolscope_agent.spool): the
    configured `spoolDir`, else one per toolscope and key under the cache directory."""
    if toolscope.spool_dir:
        return Path(toolscope.spool_dir)
    base = Path(toolscope.cache_dir) if toolscope.cache_dir else default_cache_dir()
    digest = hashlib.sha256(f"{toolscope.url}\n{toolscope.api_key}".encode()).hexdigest()[:16]
    return base / "spool" / digest


def _progress(ctx: ServerRequestContext[Any]) -> ProgressFnT | None:
    """What passes a server's progress on to the client, when the client asked for progress."""
    meta: Mapping[str, Any] = ctx.meta or {}
    token = meta.get("progressToken", meta.get("progress_token"))
    if not isinstance(token, (str, int)) or isinstance(token, bool):
        return None
    session, request_id = ctx.session, ctx.request_id

    async def forward(progress: float, total: float | None, message: str | None) -> None:
        await session.send_progress_notification(token, progress, total, message,
                                                 related_request_id=str(request_id) if request_id is not None else None)

    return forward


def _wire_tool(tool: Mapping[str, Any]) -> types.Tool:
    schema = tool.get("inputSchema", tool.get("input_schema", {"type": "object"}))
    return types.Tool.model_validate({"name": tool["name"], "description": tool.get("description", ""),
                                      "inputSchema": schema})


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)
