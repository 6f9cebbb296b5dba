"""One upstream MCP server: started over stdio or reached over Streamable HTTP with the official
client, its tools listed (every page), its calls forwarded, its `tools/list_changed` followed."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from typing import Any

import httpx2
import mcp.types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from toolscope_agent._version import __version__
from toolscope_agent.gateway.config import ServerConfig

logger = logging.getLogger("toolscope_agent.gateway")

CLIENT_INFO = types.Implementation(name="toolscope-mcp", version=__version__)
# Forwarded from a client's request `_meta` to the upstream call: W3C trace context only, never
# the protocol's own `io.modelcontextprotocol/*` keys.
TRACE_KEYS = ("traceparent", "tracestate")


class Upstream:
    def __init__(self, config: ServerConfig, on_change: Callable[[Upstream], Awaitable[None]]) -> None:
        self.config = config
        self.name = config.name
        self.session: ClientSession | None = None
        self.tools: list[dict[str, Any]] = []
        self._on_change = on_change

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
        self.session = await stack.enter_async_context(_PassThroughSession(
            read, write, message_handler=self._message, client_info=CLIENT_INFO))
        await self.session.initialize()
        self.tools = await self.list_tools()
        logger.info("upstream %s: %d tools", self.name, len(self.tools))

    async def list_tools(self) -> list[dict[str, Any]]:
        """Every tool the server lists, as it sent them (wire names: inputSchema, outputSchema…)."""
        assert self.session is not None
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            page = await self.session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
            tools += [tool.model_dump(by_alias=True, mode="json", exclude_none=True) for tool in page.tools]
            cursor = page.next_cursor
            if not cursor:
                return tools

    async def call(self, name: str, arguments: dict[str, Any] | None, meta: Mapping[str, Any] | None,
                   ) -> types.CallToolResult:
        assert self.session is not None
        trace = {key: meta[key] for key in TRACE_KEYS if meta and isinstance(meta.get(key), str)}
        forwarded = types.RequestParamsMeta(**trace)  # type: ignore[typeddict-item]  # extra_items=Any
        return await self.session.call_tool(name, arguments, meta=forwarded or None)

    async def _message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.tools = await self.list_tools()
            logger.info("upstream %s changed its tools: %d now", self.name, len(self.tools))
            await self._on_change(self)
        elif isinstance(message, Exception):
            logger.warning("upstream %s: %s", self.name, message)


class _PassThroughSession(ClientSession):
    """A client session that leaves results unchecked against the tools' output schemas: the
    gateway passes them on, and the client in front checks them against the schemas it was
    listed (checking twice cost a quarter of a millisecond per call)."""

    async def validate_tool_result(self, name: str, result: types.CallToolResult) -> None:
        return None
