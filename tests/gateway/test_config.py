"""toolscope-mcp's configuration (the clients' mcpServers JSON plus toolscope), its names when two
servers list the same tool, and what it forwards of a request's `_meta`. No processes."""

from __future__ import annotations

import json
import re

import anyio
import mcp.types as types
import pytest
from toolscope_agent.gateway import ConfigError, Gateway, load_config
from toolscope_agent.gateway.config import parse_config
from toolscope_agent.gateway.upstream import Upstream

CLAUDE_DESKTOP = {  # as Claude Desktop's claude_desktop_config.json writes servers
    "mcpServers": {
        "git": {"command": "uvx", "args": ["mcp-server-git", "--repository", "/src/app"]},
        "docs": {"type": "http", "url": "https://docs.example.com/mcp",
                 "headers": {"Authorization": "Bearer ${TOKEN}"}},
    },
    "toolscope": {"url": "https://toolscope.example.com", "apiKey": "${TOOLSCOPE_API_KEY}", "label": "staging"},
}


def test_the_clients_mcp_servers_json_is_read_with_variables_from_the_environment(tmp_path):
    path = tmp_path / "gateway.json"
    path.write_text(json.dumps(CLAUDE_DESKTOP))
    config = load_config(path, {"TOKEN": "t0k", "TOOLSCOPE_API_KEY": "tsk_live_1"})
    git, docs = config.servers
    assert (git.name, git.transport, git.command, git.args) == ("git", "stdio", "uvx",
                                                               ("mcp-server-git", "--repository", "/src/app"))
    assert (docs.transport, docs.url, dict(docs.headers)) == ("http", "https://docs.example.com/mcp",
                                                              {"Authorization": "Bearer t0k"})
    assert config.toolscope is not None
    assert (config.toolscope.api_key, config.toolscope.label) == ("tsk_live_1", "staging")
    assert (config.prefix, config.separator, config.startup_wait) == ("collisions", "_", 10.0)


@pytest.mark.parametrize(("change", "named"), [
    ({"mcpServers": {}}, "`mcpServers`"),
    ({"mcpServers": {"git": {"args": []}}}, "`mcpServers.git.command`"),
    ({"mcpServers": {"git": {"command": "x", "args": "--flag"}}}, "`mcpServers.git.args`"),
    ({"mcpServers": {"web": {"type": "sse", "url": "http://x"}}}, "`mcpServers.web.type`"),
    ({"mcpServers": {"web": {"url": "ftp://x"}}}, "`mcpServers.web.url`"),
    ({"mcpServers": {"bad name!": {"command": "x"}}}, "`mcpServers.bad name!`"),
    ({"toolscope": {"url": "https://t", "apiKey": "${MISSING}"}},
     "`toolscope.apiKey` names the environment variable MISSING"),
    ({"toolscope": {"url": "toolscope.example.com", "apiKey": "k"}}, "`toolscope.url`"),
    ({"names": {"prefix": "sometimes"}}, "`names.prefix`"),
    ({"startupWait": "10"}, "`startupWait`"),
    ({"startupWait": -1}, "`startupWait`"),
])
def test_a_bad_field_is_named(change, named):
    data = {"mcpServers": {"git": {"command": "mcp-server-git"}}, **change}
    with pytest.raises(ConfigError, match=re.escape(named)):
        parse_config(data, {})


def test_a_file_that_is_not_json_says_where(tmp_path):
    path = tmp_path / "gateway.json"
    path.write_text('{"mcpServers": {')
    with pytest.raises(ConfigError, match=r"is not JSON: .* line 1"):
        load_config(path, {})
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.json", {})


def gateway(prefix: str, listings: dict[str, list[str]]) -> Gateway:
    servers = {name: {"command": name} for name in listings}
    config = parse_config({"mcpServers": servers, "names": {"prefix": prefix}}, {})
    gateway = Gateway(config)
    for name, tools in listings.items():
        gateway.upstreams[name].tools = [{"name": tool, "description": f"{tool} of {name}",
                                          "inputSchema": {"type": "object"}} for tool in tools]
    gateway._route()
    return gateway


LISTINGS = {"github": ["create_issue", "search_code"], "gitlab": ["create_issue", "list_projects"]}


def test_names_two_servers_share_are_prefixed_by_server():
    routes = gateway("collisions", LISTINGS).routes
    assert {name: (route.server, route.name) for name, route in routes.items()} == {
        "github_create_issue": ("github", "create_issue"), "search_code": ("github", "search_code"),
        "gitlab_create_issue": ("gitlab", "create_issue"), "list_projects": ("gitlab", "list_projects")}
    assert routes["github_create_issue"].tool["description"] == "create_issue of github"


def test_prefix_always_and_never():
    assert set(gateway("always", LISTINGS).routes) == {"github_create_issue", "github_search_code",
                                                       "gitlab_create_issue", "gitlab_list_projects"}
    never = gateway("never", LISTINGS).routes  # the first server listing a name keeps it
    assert set(never) == {"create_issue", "search_code", "list_projects"} and never["create_issue"].server == "github"


def test_the_catalog_carries_each_tool_s_server_as_its_source():
    catalog = gateway("collisions", LISTINGS).catalog()
    assert {(tool["name"], tool["source"]) for tool in catalog} == {
        ("github_create_issue", "github"), ("search_code", "github"), ("gitlab_create_issue", "gitlab"),
        ("list_projects", "gitlab")}


class RecordingSession:
    def __init__(self) -> None:
        self.calls: list[tuple[str, object, object]] = []

    async def call_tool(self, name, arguments, *, progress_callback=None, meta=None):
        self.calls.append((name, arguments, meta))
        return types.CallToolResult(content=[types.TextContent(text="ok")])


def test_only_trace_context_is_forwarded_from_a_request_s_meta():
    config = parse_config({"mcpServers": {"git": {"command": "x"}}}, {})
    upstream = Upstream(config.servers[0], on_change=None)  # type: ignore[arg-type]
    session = upstream.session = RecordingSession()  # type: ignore[assignment]
    meta = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tracestate": "k=v",
            "io.modelcontextprotocol/protocolVersion": "2026-07-28", "progressToken": 7}
    anyio.run(upstream.call, "git_status", {"repo_path": "."}, meta)
    anyio.run(upstream.call, "git_status", {}, None)
    assert session.calls == [
        ("git_status", {"repo_path": "."}, {"traceparent": meta["traceparent"], "tracestate": "k=v"}),
        ("git_status", {}, None)]


class RecordingTelemetry:
    def __init__(self) -> None:
        self.calls: list[dict[str, object]] = []

    def tool_call(self, name, arguments, **fields):
        self.calls.append({"name": name, "arguments": arguments, **fields})


def test_arguments_and_outputs_are_redacted_before_they_leave_for_toolscope():
    from toolscope_agent.gateway.state import ClientState
    from toolscope_agent.selector import ToolSelector

    policy = {"selection": {"mode": "all"}, "tools": {"deploy": {"redact": ["token"]}}}
    gateway_ = Gateway(parse_config({"mcpServers": {"ops": {"command": "x"}}}, {}), policy=policy)
    telemetry = RecordingTelemetry()
    state = ClientState("stdio", ToolSelector([{"name": "deploy"}], policy), telemetry)  # type: ignore[arg-type]
    secret = "AKIA" + "QWERTYUIOPASDFGH"  # an AWS access key id
    gateway_._record(state, "deploy", {"token": "plain-looking", "env": "prod", "note": f"key {secret}"},
                     f"deployed with {secret}; all good", "ok", 12.5, "not_required", "c1")
    [call] = telemetry.calls
    assert call["arguments"]["env"] == "prod" and call["arguments"]["token"] != "plain-looking"
    assert secret not in json.dumps(call) and "[REDACTED" in call["output"]
    assert (call["status"], call["duration_ms"], call["call_id"]) == ("ok", 12.5, "c1")
