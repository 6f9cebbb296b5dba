"""The gateway's configuration file: the clients' own `mcpServers` JSON, plus toolscope.

    {
      "mcpServers": {
        "git":  {"command": "mcp-server-git", "args": ["--repository", "."]},
        "time": {"type": "stdio", "command": "mcp-server-time", "env": {"TZ": "UTC"}},
        "docs": {"type": "http", "url": "https://docs.example.com/mcp",
                 "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}
      },
      "toolscope": {"url": "https://toolscope.example.com", "apiKey": "${TOOLSCOPE_API_KEY}",
                    "label": "production"},
      "names": {"prefix": "collisions", "separator": "_"}
    }

`mcpServers` entries are read as Claude Desktop, Claude Code and Cursor write them: `command`,
`args`, `env`, `cwd` start a server over stdio; `url` (with `headers`) reaches one over Streamable
HTTP; `type` ("stdio", "http" or "streamable-http") is optional. `${VAR}` and `${VAR:-default}`
in any string are read from the environment, so keys stay out of the file. Without a
`toolscope` section the gateway records nothing and applies `policy` (a policy document as
GET /api/v1/policy serves one), or serves every tool.

`startupWait` (seconds, default 10): how long the gateway waits for its servers, all started at
once, before it answers `initialize`; a server still starting then joins later, its tools
announced with `notifications/tools/list_changed`. A server that exits is started again (1 s,
then doubling up to 60 s), its tools withdrawn meanwhile.

`names.prefix`: "collisions" (default) prefixes a tool with its server's name only where two
servers list the same name; "always" prefixes every tool; "never" keeps upstream names (the
first server listing a name wins, and the gateway logs the others).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PREFIX_MODES = ("collisions", "always", "never")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_SERVER_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class ConfigError(ValueError):
    """The configuration file is missing, not JSON, or has a field the gateway cannot use; the
    message names the field."""


@dataclass(frozen=True)
class ServerConfig:
    name: str
    transport: str  # "stdio" or "http"
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolscopeConfig:
    url: str
    api_key: str
    label: str = "production"
    agent_name: str | None = None
    cache_dir: str | None = None
    policy_ttl: float = 60.0
    spool_dir: str | None = None  # None: <cache directory>/spool/<a digest of url and key>


@dataclass(frozen=True)
class GatewayConfig:
    servers: tuple[ServerConfig, ...]
    toolscope: ToolscopeConfig | None = None
    prefix: str = "collisions"
    separator: str = "_"
    policy: Mapping[str, Any] | None = None
    startup_wait: float = 10.0


def load_config(path: str | Path, environ: Mapping[str, str] | None = None) -> GatewayConfig:
    """Read and check the configuration file at `path` (see the module docstring)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the configuration file {path}: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    return parse_config(data, os.environ if environ is None else environ)


def parse_config(data: Any, environ: Mapping[str, str]) -> GatewayConfig:
    if not isinstance(data, dict):
        raise ConfigError("the configuration must be a JSON object with an `mcpServers` object")
    data = _expand(data, environ, "")
    servers = data.get("mcpServers")
    if not isinstance(servers, dict) or not servers:
        raise ConfigError("`mcpServers` must be an object naming at least one server")
    names = data.get("names", {})
    if not isinstance(names, dict):
        raise ConfigError("`names` must be an object")
    prefix = names.get("prefix", "collisions")
    if prefix not in PREFIX_MODES:
        raise ConfigError(f"`names.prefix` must be one of {', '.join(PREFIX_MODES)}, not {prefix!r}")
    separator = names.get("separator", "_")
    if not isinstance(separator, str) or not re.fullmatch(r"[A-Za-z0-9_.-]{1,3}", separator):
        raise ConfigError("`names.separator` must be 1 to 3 of letters, digits, `_`, `.` or `-`")
    policy = data.get("policy")
    if policy is not None and not (isinstance(policy, dict) and isinstance(policy.get("selection", {}), dict)):
        raise ConfigError("`policy` must be a policy document: an object with a `selection` object")
    startup_wait = data.get("startupWait", 10.0)
    if isinstance(startup_wait, bool) or not isinstance(startup_wait, (int, float)) or not 0 <= startup_wait <= 600:
        raise ConfigError("`startupWait` must be a number of seconds from 0 to 600")
    return GatewayConfig(
        servers=tuple(_server(name, entry) for name, entry in servers.items()),
        startup_wait=float(startup_wait),
        toolscope=_toolscope(data.get("toolscope")),
        prefix=prefix,
        separator=separator,
        policy=policy,
    )


def _expand(value: Any, environ: Mapping[str, str], where: str) -> Any:
    if isinstance(value, str):
        def replace(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in environ:
                return environ[name]
            if default is not None:
                return default
            raise ConfigError(f"`{where}` names the environment variable {name}, which is not set")
        return _VARIABLE.sub(replace, value)
    if isinstance(value, list):
        return [_expand(item, environ, f"{where}[{index}]") for index, item in enumerate(value)]
    if isinstance(value, dict):
        return {key: _expand(item, environ, f"{where}.{key}" if where else key) for key, item in value.items()}
    return value


def _strings(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigError(f"`{where}` must be an object of strings")
    return dict(value)


def _server(name: str, entry: Any) -> ServerConfig:
    where = f"mcpServers.{name}"
    if not _SERVER_NAME.match(name):
        raise ConfigError(f"`{where}`: a server name is 1 to 64 of letters, digits, `_`, `.` or `-`")
    if not isinstance(entry, dict):
        raise ConfigError(f"`{where}` must be an object with a `command` or a `url`")
    kind = entry.get("type")
    if kind is None:
        kind = "http" if "url" in entry else "stdio"
    if kind in ("http", "streamable-http", "streamableHttp"):
        url = entry.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError(f"`{where}.url` must be an http:// or https:// URL")
        return ServerConfig(name, "http", url=url, headers=_strings(entry.get("headers"), f"{where}.headers"))
    if kind != "stdio":
        raise ConfigError(f"`{where}.type` must be stdio or http, not {kind!r} (SSE servers are not supported)")
    command = entry.get("command")
    if not isinstance(command, str) or not command:
        raise ConfigError(f"`{where}.command` must be the program to start")
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        raise ConfigError(f"`{where}.args` must be a list of strings")
    cwd = entry.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise ConfigError(f"`{where}.cwd` must be a string")
    return ServerConfig(name, "stdio", command=command, args=tuple(args), cwd=cwd,
                        env=_strings(entry.get("env"), f"{where}.env"))


def _toolscope(entry: Any) -> ToolscopeConfig | None:
    if entry is None:
        return None
    if not isinstance(entry, dict):
        raise ConfigError("`toolscope` must be an object with `url` and `apiKey`")
    url, key = entry.get("url"), entry.get("apiKey")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ConfigError("`toolscope.url` must be the toolscope server's http:// or https:// URL")
    if not isinstance(key, str) or not key:
        raise ConfigError("`toolscope.apiKey` must be an API key with the ingest and policy:read scopes")
    label = entry.get("label", "production")
    if not isinstance(label, str) or not label:
        raise ConfigError("`toolscope.label` must name the policy label to serve")
    agent = entry.get("agentName")
    if agent is not None and not isinstance(agent, str):
        raise ConfigError("`toolscope.agentName` must be a string")
    cache_dir = entry.get("cacheDir")
    if cache_dir is not None and not isinstance(cache_dir, str):
        raise ConfigError("`toolscope.cacheDir` must be a directory path")
    ttl = entry.get("policyTtlSeconds", 60)
    if not isinstance(ttl, (int, float)) or isinstance(ttl, bool) or ttl < 0:
        raise ConfigError("`toolscope.policyTtlSeconds` must be a number of seconds ≥ 0")
    spool_dir = entry.get("spoolDir")
    if spool_dir is not None and not isinstance(spool_dir, str):
        raise ConfigError("`toolscope.spoolDir` must be a directory path")
    return ToolscopeConfig(url=url, api_key=key, label=label, agent_name=agent, cache_dir=cache_dir,
                           policy_ttl=float(ttl), spool_dir=spool_dir)
