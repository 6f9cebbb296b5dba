"""The gateway's tools: `tools/list` answers the policy's selection (with `tool_search`,
`activate_tools` and `retrieve_tool_output` as the policy needs them), `tools/call` forwards to
the server that lists the tool and passes its answer through the output rules, and each call is
recorded (mixed into gateway.server.Gateway; see its module docstring)."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import mcp.types as types
from mcp.server import ServerRequestContext
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError

from toolscope_agent.engine.compaction import RETRIEVE_TOOL_NAME, rules_from_policy
from toolscope_agent.engine.redaction import redact_text
from toolscope_agent.engine.render import SEARCH_TOOL_NAME, menu_text
from toolscope_agent.engine.search import answer_text
from toolscope_agent.gateway.outputs import replaced
from toolscope_agent.gateway.relay import ELICITATION
from toolscope_agent.gateway.state import ClientState, Route
from toolscope_agent.gateway.upstream import ServerDown, Upstream

logger = logging.getLogger("toolscope_agent.gateway")

ACTIVATE_TOOL_NAME = "activate_tools"
APPROVAL_SCHEMA = {"type": "object", "properties": {"approve": {"type": "boolean", "title": "Allow this call"}},
                   "required": ["approve"]}

class ToolHandlers:
    """The gateway's tools/list and tools/call (mixed into gateway.server.Gateway)."""

    routes: dict[str, Route]
    upstreams: dict[str, Upstream]
    stats: dict[str, int]
    _wire: dict[str, types.Tool]
    _gone: dict[str, str]

    if TYPE_CHECKING:  # the Gateway's own
        def _state(self, ctx: Any) -> ClientState: ...

        async def _notify(self, state: ClientState) -> None: ...

    # -- tools/list -----------------------------------------------------------------------------

    async def on_list_tools(self, ctx: ServerRequestContext[Any],
                            params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        state = self._state(ctx)
        selection = state.selector.select("")
        state.selected = tuple(selection.names)
        names = list(selection.names)
        tools = [self._wire[name] for name in names]
        if selection.mode == "progressive" and selection.deferred:
            menu_tool = wire_tool(self._activate_tool(menu_text(selection.deferred, (), hint_prefix="")))
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
            upstream = self.upstreams[route.server]
            if task_required(route.tool):
                result = await upstream.call_as_task(route.name, arguments, ctx.meta)
            else:
                result = await upstream.call(route.name, arguments, ctx.meta, _progress(ctx))
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
        # The model never sees this id (the client's own stays between it and the model): a
        # duplicate placeholder cites the first call's arguments, as recorded (redacted).
        call_id = uuid.uuid4().hex[:16]
        redacted = state.selector.redact(name, arguments)
        if text:
            prepared = state.selector.prepare_output(name, call_id, text, arguments=redacted)
            if prepared != text:
                result = replaced(result, prepared, output_schema=route.tool.get("outputSchema"))
        state.selector.observe("", [{"name": name, "arguments": arguments}])
        self._record(state, name, redacted, text, "error" if result.is_error else "ok", duration, approval, call_id,
                     redacted=True)
        # A missed tool is sticky or activated from now on: its schema joins the list. A call of a
        # listed tool can change the list too: a context rule keyed by it (`after_tools`) now matches.
        if missed or tuple(state.selector.select("").names) != state.selected:
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
                duration_ms: float, approval: str, call_id: str | None = None, *, redacted: bool = False) -> None:
        session = state.session
        if session is None:
            return
        if not redacted:
            arguments = state.selector.redact(name, arguments)
        session.tool_call(name, arguments, output=redact_text(output), status=status,  # type: ignore[arg-type]
                          duration_ms=round(duration_ms, 3), approval=approval, call_id=call_id)  # type: ignore[arg-type]


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


def task_required(tool: Mapping[str, Any]) -> bool:
    """Whether a server's tool runs only as an MCP task (the gateway runs it so for its clients)."""
    execution = tool.get("execution")
    return isinstance(execution, Mapping) and execution.get("taskSupport") == "required"


def as_listed(tool: Mapping[str, Any]) -> types.Tool:
    """A server's tool as the gateway lists it: as the server sent it, except that a tool that
    runs only as a task is listed as a plain tool (the gateway offers its clients no tasks: it
    runs the task itself and answers the call with its result)."""
    if task_required(tool):
        execution = {key: value for key, value in tool["execution"].items() if key != "taskSupport"}
        tool = {key: value for key, value in tool.items() if key != "execution"} | (
            {"execution": execution} if execution else {})
    return types.Tool.model_validate(tool)


def wire_tool(tool: Mapping[str, Any]) -> types.Tool:
    schema = tool.get("inputSchema", tool.get("input_schema", {"type": "object"}))
    return types.Tool.model_validate({"name": tool["name"], "description": tool.get("description", ""),
                                      "inputSchema": schema})


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)
