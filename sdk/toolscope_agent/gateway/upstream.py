"""One upstream MCP server: started over stdio or reached over Streamable HTTP with the official
client, its tools listed (every page), its calls forwarded, its `tools/list_changed` followed.

`run()` supervises it for the gateway's lifetime: it connects, then pings the server every
PING_SECONDS; when the server exits (a ping or a call finds the connection closed) its tools are
withdrawn (the gateway tells its clients: `list_changed`), and it is started again after a
backoff (RESTART_BACKOFF doubling to RESTART_BACKOFF_MAX), its tools coming back the same way.
The first attempt sets `settled`, so the gateway can start every server at once and wait for all
of them, a slow one only so long (the configuration's `startupWait`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, suppress
from typing import Any

import anyio
import httpx2
import mcp.types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.types import CONNECTION_CLOSED

from toolscope_agent._version import __version__
from toolscope_agent.gateway.config import ServerConfig
from toolscope_agent.gateway.relay import Relay

logger = logging.getLogger("toolscope_agent.gateway")

CLIENT_INFO = types.Implementation(name="toolscope-mcp", version=__version__)
# Forwarded from a client's request `_meta` to the upstream call: W3C trace context only, never
# the protocol's own `io.modelcontextprotocol/*` keys.
TRACE_KEYS = ("traceparent", "tracestate")
PING_SECONDS = 2.0
"""How often a running server is pinged: a server that exited is noticed this soon at the latest."""
RESTART_BACKOFF = 1.0
RESTART_BACKOFF_MAX = 60.0
TASK_TTL_MS = 3_600_000
"""How long a server keeps a task the gateway runs for a client (its result is fetched at once)."""
TASK_CANCEL_SECONDS = 5.0


class ServerDown(Exception):
    """A call to a server that is not running (it has not started yet, or it exited and is being
    started again)."""


Changed = Callable[["Upstream", str], Awaitable[None]]
"""Told what of a server's changed: "tools", "resources" (and templates), "prompts" or "all"
(it started or stopped)."""
Noticed = Callable[["Upstream", Any], Awaitable[None]]
"""Told of a notification to pass on: a resource updated, or a log message."""


class Upstream:
    def __init__(self, config: ServerConfig, on_change: Changed, on_notice: Noticed | None = None,
                 last_client: Callable[[], Any] | None = None) -> None:
        self.config = config
        self.name = config.name
        self.relay = Relay(config.name, last_client or (lambda: None))
        self.session: ClientSession | None = None
        # The session's dispatcher, for the one request the official client cannot send typed: a
        # task-augmented tools/call, which the SDK checks as a CallToolResult.
        self._dispatcher: JSONRPCDispatcher[Any] | None = None
        self._version = ""
        self.tools: list[dict[str, Any]] = []
        # What else it serves (issue 27, item 1), as it sent them, every page.
        self.resources: list[types.Resource] = []
        self.templates: list[types.ResourceTemplate] = []
        self.prompts: list[types.Prompt] = []
        self.capabilities = types.ServerCapabilities()
        self.instructions = ""
        self.settled = anyio.Event()  # the first start attempt is over (started or failed)
        self.failure = ""  # why it is not running, when it is not
        self.restarts = 0
        self._on_change = on_change
        self._on_notice = on_notice
        self._closed = anyio.Event()

    async def run(self) -> None:
        """Start the server and keep it running (see the module's docstring); cancelled with
        the gateway. Connection and shutdown happen in this task, as the client requires."""
        backoff = RESTART_BACKOFF
        while True:
            self._closed = anyio.Event()
            began = time.monotonic()
            try:
                async with AsyncExitStack() as stack:
                    await self.start(stack)
                    self.failure = ""
                    await self._on_change(self, "all")  # a no-op while the gateway is starting
                    self.settled.set()
                    async with anyio.create_task_group() as watching:
                        watching.start_soon(self._ping)
                        await self._closed.wait()
                        watching.cancel_scope.cancel()
                    self.failure = "it exited"
            except Exception as exc:  # it did not start, or its connection broke while closing
                self.failure = self.failure or _reason(exc)
            first = not self.settled.is_set()
            self.settled.set()
            had_tools = bool(self.tools)  # a server that never started had nothing to withdraw
            self.session, self.tools, self.resources, self.templates, self.prompts = None, [], [], [], []
            if first:
                logger.error("upstream %s did not start, its tools are left out: %s", self.name, self.failure)
            else:
                logger.error("upstream %s stopped (%s): its tools are withdrawn, restarting in %.0f s",
                             self.name, self.failure, backoff)
            if had_tools or not first:
                await self._on_change(self, "all")
            if time.monotonic() - began > RESTART_BACKOFF_MAX:  # it ran a while: start over quickly
                backoff = RESTART_BACKOFF
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, RESTART_BACKOFF_MAX)
            self.restarts += 1

    async def _ping(self) -> None:
        while self.session is not None:
            await anyio.sleep(PING_SECONDS)
            try:
                await self.session.send_ping()
            except MCPError as exc:
                self._lost(exc)
                return

    def _lost(self, exc: MCPError) -> None:
        if exc.error.code == CONNECTION_CLOSED:
            self._closed.set()

    async def start(self, stack: AsyncExitStack) -> None:
        """Connect (in the task that owns `stack`), initialise and list the tools."""
        if self.config.transport == "stdio":
            params = StdioServerParameters(command=self.config.command, args=list(self.config.args),
                                           env=dict(self.config.env) or None, cwd=self.config.cwd)
            read, write = await stack.enter_async_context(stdio_client(params))
        else:
            http = await stack.enter_async_context(httpx2.AsyncClient(
                headers=dict(self.config.headers), timeout=httpx2.Timeout(30.0, read=300.0), follow_redirects=True))
            read, write = await stack.enter_async_context(streamable_http_client(self.config.url, http_client=http))
        self._dispatcher = JSONRPCDispatcher(read, write)
        self.session = await stack.enter_async_context(_PassThroughSession(
            dispatcher=self._dispatcher, message_handler=self._message, logging_callback=self._log,
            client_info=CLIENT_INFO,
            sampling_callback=self.relay.sampling, elicitation_callback=self.relay.elicitation,
            list_roots_callback=self.relay.roots))
        initialized = await self.session.initialize()
        self._version = str(initialized.protocol_version)
        self.instructions = initialized.instructions or ""
        self.capabilities = initialized.capabilities
        self.tools = await self.list_tools()
        await self._list_resources()
        await self._list_prompts()
        logger.info("upstream %s: %d tools", self.name, len(self.tools))

    async def list_tools(self) -> list[dict[str, Any]]:
        """Every tool the server lists, as it sent them (wire names: inputSchema, outputSchema…)."""
        assert self.session is not None
        return [tool.model_dump(by_alias=True, mode="json", exclude_none=True)
                for tool in await _every_page(self.session.list_tools, "tools")]

    @property
    def running(self) -> bool:
        return self.session is not None and not self._closed.is_set()

    async def call(self, name: str, arguments: dict[str, Any] | None, meta: Mapping[str, Any] | None,
                   progress: ProgressFnT | None = None) -> types.CallToolResult:
        """Forward a call (its progress to `progress`). Raises ServerDown when the server is not
        running (or stops during the call), MCPError when it refuses the call."""
        trace = {key: meta[key] for key in TRACE_KEYS if meta and isinstance(meta.get(key), str)}
        forwarded = types.RequestParamsMeta(**trace)  # type: ignore[typeddict-item]  # extra_items=Any
        result: types.CallToolResult = await self.request(lambda session: session.call_tool(
            name, arguments, progress_callback=progress, meta=forwarded or None))
        return result

    async def call_as_task(self, name: str, arguments: dict[str, Any] | None,
                           meta: Mapping[str, Any] | None) -> types.CallToolResult:
        """Run a tool that requires MCP tasks (`execution.taskSupport: "required"`) and answer with
        its result: the call creates a task, `tasks/result` waits for it to end (the server's
        requests meanwhile, an elicitation say, are relayed as any call's). A cancelled call
        cancels the task. Raises as `call`."""
        params: dict[str, Any] = {"name": name, "arguments": arguments or {}, "task": {"ttl": TASK_TTL_MS}}
        trace = {key: meta[key] for key in TRACE_KEYS if meta and isinstance(meta.get(key), str)}
        if trace:
            params["_meta"] = trace
        created = types.CreateTaskResult.model_validate(await self.request(lambda session: self._raw_request(
            "tools/call", params)))
        task = types.GetTaskPayloadRequestParams(task_id=created.task.task_id)
        try:
            result: types.CallToolResult = await self.request(lambda session: session.send_request(
                types.GetTaskPayloadRequest(params=task), types.CallToolResult))
            return result
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True), anyio.move_on_after(TASK_CANCEL_SECONDS), suppress(Exception):
                await self.request(lambda session: session.send_request(
                    types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task.task_id)),
                    types.CancelTaskResult))
            raise

    async def _raw_request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self._dispatcher is not None  # set with the session
        return await self._dispatcher.send_raw_request(
            method, params, {"headers": {MCP_PROTOCOL_VERSION_HEADER: self._version}})

    async def request(self, send: Callable[[ClientSession], Awaitable[Any]]) -> Any:
        """Send a request with the running session: ServerDown when there is none (or the server
        stops meanwhile), MCPError when the server refuses it."""
        session = self.session
        if session is None or self._closed.is_set():
            raise ServerDown(self.failure or "it has not started")
        try:
            return await send(session)
        except MCPError as exc:
            if exc.error.code == CONNECTION_CLOSED:
                self.failure = "it exited during a request"
                self._lost(exc)
                raise ServerDown(self.failure) from exc
            raise

    async def _list_resources(self) -> None:
        assert self.session is not None
        if self.capabilities.resources is None:
            return
        self.resources = await _every_page(self.session.list_resources, "resources")
        self.templates = await _every_page(self.session.list_resource_templates, "resource_templates")

    async def _list_prompts(self) -> None:
        assert self.session is not None
        if self.capabilities.prompts is None:
            return
        self.prompts = await _every_page(self.session.list_prompts, "prompts")

    async def _message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.tools = await self.list_tools()
            logger.info("upstream %s changed its tools: %d now", self.name, len(self.tools))
            await self._on_change(self, "tools")
        elif isinstance(message, types.ResourceListChangedNotification):
            await self._list_resources()
            await self._on_change(self, "resources")
        elif isinstance(message, types.PromptListChangedNotification):
            await self._list_prompts()
            await self._on_change(self, "prompts")
        elif isinstance(message, types.ResourceUpdatedNotification):
            if self._on_notice is not None:
                await self._on_notice(self, message)
        elif isinstance(message, Exception):
            logger.warning("upstream %s: %s", self.name, message)

    async def _log(self, params: types.LoggingMessageNotificationParams) -> None:
        if self._on_notice is not None:
            await self._on_notice(self, params)


class _PassThroughSession(ClientSession):
    """A client session that leaves results unchecked against the tools' output schemas: the
    gateway passes them on, and the client in front checks them against the schemas it was
    listed (checking twice cost a quarter of a millisecond per call)."""

    async def validate_tool_result(self, name: str, result: types.CallToolResult) -> None:
        return None


async def _every_page(fetch: Callable[..., Awaitable[Any]], field: str) -> list[Any]:
    """Every item of a paginated list (`field` of each page), following the cursors."""
    items: list[Any] = []
    cursor: str | None = None
    while True:
        page = await fetch(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        items += getattr(page, field)
        cursor = page.next_cursor
        if not cursor:
            return items


def _reason(exc: BaseException) -> str:
    """The innermost message of an exception (anyio wraps a task's failure in groups)."""
    while getattr(exc, "exceptions", None):
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    return f"{type(exc).__name__}: {exc}"
