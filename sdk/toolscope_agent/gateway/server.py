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
import logging
import time
import warnings
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
import mcp.types as types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ToolsListChanged

from toolscope_agent._version import __version__
from toolscope_agent.client import Client
from toolscope_agent.engine.duplicates import MCP_GATEWAY
from toolscope_agent.engine.render import RETRIEVE_TOOL, SEARCH_TOOL
from toolscope_agent.errors import ToolscopeError, UnreachableError
from toolscope_agent.gateway.config import GatewayConfig, ToolscopeConfig
from toolscope_agent.gateway.passthrough import Directory, PassThrough
from toolscope_agent.gateway.state import ClientState, Route
from toolscope_agent.gateway.tools import ToolHandlers, as_listed, wire_tool
from toolscope_agent.gateway.upstream import Upstream
from toolscope_agent.policy import DEFAULT_POLICY, PolicyCache, default_cache_dir
from toolscope_agent.selector import ToolSelector
from toolscope_agent.session import Session

logger = logging.getLogger("toolscope_agent.gateway")

CLOSE_SECONDS = 1.0
IDLE_SECONDS = 3600.0
"""A Streamable HTTP client unseen this long has its session ended (telemetry) and forgotten."""


class Gateway(ToolHandlers, PassThrough):
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
        self._wire = {name: as_listed(route.tool) for name, route in routes.items()}
        for synthetic in (SEARCH_TOOL, RETRIEVE_TOOL, self._activate_tool("")):
            if synthetic["name"] not in routes:
                self._wire[synthetic["name"]] = wire_tool(synthetic)
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
            await self._announce(what)
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
            await self._announce("resources")
            await self._announce("prompts")

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
        metadata = {"gateway": MCP_GATEWAY, "gateway_version": __version__, "transport": self.transport,
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
        state.selected = tuple(state.selector.select("").names)
        if state.server_session is not None:
            await state.server_session.send_tool_list_changed()
        await self.bus.publish(ToolsListChanged())

    async def _announce(self, what: str) -> None:
        """Tell every client its resources or prompts changed (both protocol eras)."""
        for state in list(self.clients.values()):
            if state.server_session is None:
                continue
            if what == "resources":
                await state.server_session.send_resource_list_changed()
            else:
                await state.server_session.send_prompt_list_changed()
        await self.bus.publish(ResourcesListChanged() if what == "resources" else PromptsListChanged())


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
