"""Everything the gateway's servers offer besides tools, passed through (issue 27, item 1):
resources, resource templates and subscriptions, prompts, completions, logging.

Each list is the servers' lists together, each entry under the name or URI the client sees:

- a prompt's name is prefixed with its server's name as a tool's is (`names.prefix`: where two
  servers list the same name, or always);
- a resource's URI or a template's `uriTemplate` is kept, unless two servers list the same one
  (or `names.prefix` is "always"): then its scheme is prefixed with the server's name and `+`
  (`memory+file:///notes`, a URI still: a scheme may hold `+`), and the gateway takes the prefix
  off before it asks the server.

A request is routed to the server that listed what it names: `resources/read` and
`resources/subscribe` by the URI (a listed resource, a server's `+` prefix, else a template the URI
fits, else the one server that serves resources); `prompts/get` by the name; `completion/complete`
by its reference (a prompt's name or a template's URI). `logging/setLevel` goes to every server that
logs. What the servers send back the same way is passed on: a subscribed resource's update to the
clients that subscribed to it, each log message to every client (its logger named after the
server), and each list's `list_changed`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import mcp.types as types
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated

from toolscope_agent.gateway.upstream import ServerDown, Upstream

SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
VARIABLE = re.compile(r"\{[^}]*\}")


@dataclass(frozen=True)
class Routed:
    server: str
    original: str  # the server's own name or URI


@dataclass
class Directory:
    """The servers' resources, templates and prompts under the names clients see, and the way
    back to each server."""

    resources: list[types.Resource] = field(default_factory=list)
    templates: list[types.ResourceTemplate] = field(default_factory=list)
    prompts: list[types.Prompt] = field(default_factory=list)
    uris: dict[str, Routed] = field(default_factory=dict)  # exposed resource URI -> server's
    uri_templates: dict[str, Routed] = field(default_factory=dict)  # exposed uriTemplate -> server's
    prompt_names: dict[str, Routed] = field(default_factory=dict)  # exposed prompt name -> server's
    patterns: list[tuple[re.Pattern[str], str]] = field(default_factory=list)  # template pattern, server
    servers: tuple[str, ...] = ()  # those serving resources, in configuration order

    @classmethod
    def build(cls, upstreams: Iterable[Any], *, prefix: str, separator: str) -> Directory:
        listed = list(upstreams)
        found = cls(servers=tuple(u.name for u in listed if u.capabilities.resources is not None and u.running))
        counts = _counts(r.uri for u in listed for r in u.resources)
        template_counts = _counts(t.uri_template for u in listed for t in u.templates)
        prompt_counts = _counts(p.name for u in listed for p in u.prompts)
        for upstream in listed:
            server = upstream.name
            for resource in upstream.resources:
                uri = _prefixed_uri(server, resource.uri, prefix, counts)
                if uri not in found.uris:
                    found.uris[uri] = Routed(server, resource.uri)
                    found.resources.append(resource.model_copy(update={"uri": uri}))
            for template in upstream.templates:
                uri = _prefixed_uri(server, template.uri_template, prefix, template_counts)
                if uri not in found.uri_templates:
                    found.uri_templates[uri] = Routed(server, template.uri_template)
                    found.templates.append(template.model_copy(update={"uri_template": uri}))
                    found.patterns.append((_pattern(template.uri_template), server))
            for prompt in upstream.prompts:
                name = prompt.name
                if prefix == "always" or (prefix == "collisions" and prompt_counts[name] > 1):
                    name = f"{server}{separator}{name}"
                if name not in found.prompt_names:
                    found.prompt_names[name] = Routed(server, prompt.name)
                    found.prompts.append(prompt.model_copy(update={"name": name}))
        return found

    def resource(self, uri: str) -> Routed:
        """The server to ask for `uri`, and the URI it knows (MCPError when no server has it)."""
        listed = self.uris.get(uri)
        if listed is not None:
            return listed
        for server in self.servers:  # a collision's prefix: "server+scheme:..."
            if uri.startswith(f"{server}+") and SCHEME.match(uri[len(server) + 1:]):
                return Routed(server, uri[len(server) + 1:])
        for pattern, server in self.patterns:
            if pattern.fullmatch(uri):
                return Routed(server, uri)
        if len(self.servers) == 1:
            return Routed(self.servers[0], uri)
        raise MCPError(code=types.INVALID_PARAMS, message=f"No server here offers the resource {uri}")

    def exposed_uri(self, server: str, uri: str) -> str:
        """The URI a client knows for a server's `uri` (for its updates)."""
        for exposed, routed in self.uris.items():
            if routed == Routed(server, uri):
                return exposed
        return uri

    def template(self, uri_template: str) -> Routed:
        routed = self.uri_templates.get(uri_template)
        if routed is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"No server here offers the template {uri_template}")
        return routed

    def prompt(self, name: str) -> Routed:
        routed = self.prompt_names.get(name)
        if routed is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"No server here offers the prompt {name}")
        return routed


def _counts(values: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts


def _prefixed_uri(server: str, uri: str, prefix: str, counts: Mapping[str, int]) -> str:
    collides = prefix == "always" or (prefix == "collisions" and counts[uri] > 1)
    return f"{server}+{uri}" if collides and SCHEME.match(uri) else uri


def _pattern(uri_template: str) -> re.Pattern[str]:
    """A template's URIs (RFC 6570 as servers use it: each `{...}` one or more characters)."""
    parts = VARIABLE.split(uri_template)
    return re.compile(".+?".join(re.escape(part) for part in parts))


class PassThrough:
    """The gateway's handlers for what is not a tool (mixed into gateway.server.Gateway)."""

    upstreams: dict[str, Upstream]
    clients: dict[str, Any]
    bus: Any
    directory: Directory

    if TYPE_CHECKING:  # the Gateway's own: the client's state
        def _state(self, ctx: Any) -> Any: ...

    async def on_list_resources(self, ctx: Any, params: types.PaginatedRequestParams | None,
                                ) -> types.ListResourcesResult:
        self._state(ctx)
        return types.ListResourcesResult(resources=self.directory.resources)

    async def on_list_resource_templates(self, ctx: Any, params: types.PaginatedRequestParams | None,
                                         ) -> types.ListResourceTemplatesResult:
        self._state(ctx)
        return types.ListResourceTemplatesResult(resource_templates=self.directory.templates)

    async def on_read_resource(self, ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        self._state(ctx)
        routed = self.directory.resource(str(params.uri))
        result: types.ReadResourceResult = await self._ask(
            routed.server, lambda session: session.read_resource(routed.original))
        if routed.original != params.uri:  # the contents carry the URI the client asked for
            result = result.model_copy(update={"contents": [
                content.model_copy(update={"uri": params.uri}) if content.uri == routed.original else content
                for content in result.contents]})
        return result

    async def on_subscribe_resource(self, ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        state = self._state(ctx)
        routed = self.directory.resource(str(params.uri))
        await self._ask(routed.server, lambda session: session.subscribe_resource(routed.original))
        state.subscriptions.add(str(params.uri))
        return types.EmptyResult()

    async def on_unsubscribe_resource(self, ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        state = self._state(ctx)
        uri = str(params.uri)
        state.subscriptions.discard(uri)
        if not any(uri in other.subscriptions for other in self.clients.values()):
            routed = self.directory.resource(uri)
            await self._ask(routed.server, lambda session: session.unsubscribe_resource(routed.original))
        return types.EmptyResult()

    async def on_list_prompts(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        self._state(ctx)
        return types.ListPromptsResult(prompts=self.directory.prompts)

    async def on_get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        self._state(ctx)
        routed = self.directory.prompt(params.name)
        result: types.GetPromptResult = await self._ask(
            routed.server, lambda session: session.get_prompt(routed.original, params.arguments))
        return result

    async def on_completion(self, ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        self._state(ctx)
        ref = params.ref
        if isinstance(ref, types.PromptReference):
            routed = self.directory.prompt(ref.name)
            upstream_ref: types.PromptReference | types.ResourceTemplateReference = ref.model_copy(
                update={"name": routed.original})
        else:
            routed = self.directory.template(ref.uri)
            upstream_ref = ref.model_copy(update={"uri": routed.original})
        argument = params.argument.model_dump(mode="json")
        context = params.context.arguments if params.context is not None else None
        result: types.CompleteResult = await self._ask(
            routed.server, lambda session: session.complete(upstream_ref, argument, context))
        return result

    async def on_set_logging_level(self, ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        self._state(ctx)
        for upstream in self.upstreams.values():
            if upstream.running and upstream.capabilities.logging is not None:
                await self._ask(upstream.name, lambda session: session.set_logging_level(params.level))
        return types.EmptyResult()

    async def _ask(self, server: str, send: Any) -> Any:
        try:
            return await self.upstreams[server].request(send)
        except ServerDown as exc:
            raise MCPError(code=types.INTERNAL_ERROR,
                           message=f"The MCP server {server} is not running ({exc}); toolscope-mcp is restarting "
                                   "it. Try again shortly.") from exc

    async def _pass_on(self, upstream: Any, notice: Any) -> None:
        """A server's resource update (to the clients subscribed to it) or log message (to every
        client, its logger named after the server)."""
        if isinstance(notice, types.ResourceUpdatedNotification):
            uri = self.directory.exposed_uri(upstream.name, str(notice.params.uri))
            for state in list(self.clients.values()):
                if uri in state.subscriptions and state.server_session is not None:
                    await state.server_session.send_resource_updated(uri)
            await self.bus.publish(ResourceUpdated(uri=uri))
        elif isinstance(notice, types.LoggingMessageNotificationParams):
            logger = f"{upstream.name}.{notice.logger}" if notice.logger else upstream.name
            for state in list(self.clients.values()):
                if state.server_session is not None:
                    await state.server_session.send_log_message(notice.level, notice.data, logger=logger)
