"""Capture real MCP servers' `tools/list` answers as the input of the tool-search benchmark (issue 13).

Each server is started as a subprocess over stdio with the official MCP client (`mcp`, the
project's pinned 2.3.0), initialized, and asked `tools/list` (following `nextCursor` until the
last page). The tool objects are taken from the raw JSON-RPC responses, before the client's
pydantic models see them, so name, description, inputSchema (and any title, annotations,
outputSchema, _meta) are exactly what the server sent, in the server's key order. Each server's
catalog is written to `bench/mcp_catalogs/<server>.json`:

    {"server": ..., "package": ..., "version": ..., "captured": "YYYY-MM-DD",
     "server_info": <initialize's serverInfo>, "tools": [<tool as sent>, ...]}

Pinned versions (what the committed JSON files were captured with):

    PyPI  mcp-server-git                         2026.10.19   (requirements.txt)
    PyPI  mcp-server-time                        2026.10.19   (requirements.txt)
    PyPI  mcp-server-fetch                       2026.10.24   (not in requirements.txt; see below)
    npm   @modelcontextprotocol/server-filesystem 2026.8.31
    npm   @modelcontextprotocol/server-memory     2026.8.31
    npm   @modelcontextprotocol/server-everything 2026.8.31
    npm   @modelcontextprotocol/server-github     2025.4.8    (deprecated upstream; lists its tools
                                                              without a token, needs none to start)

Setup:
- The PyPI servers are looked up next to the running interpreter (the project's .venv/bin), then
  on PATH. mcp-server-fetch is not a project requirement; it installs into the project venv
  without changing any pinned package: `.venv/bin/pip install mcp-server-fetch==2026.10.24`
  (or put any venv's bin on PATH that has it).
- The npm servers are installed, when missing, with `npm install` into --npm-dir (default
  `<tmp>/mcp-npm`, outside the repository) and run with `node <package>/<bin>`.
- Nothing needs the network once installed: servers only list their tools here (git gets a
  throwaway repository, filesystem a throwaway allowed directory, memory a throwaway file).

A version other than the pin stops the capture unless --any-version is given (then the JSON
files record the version actually run, and the pins above should be updated with them).

Run: .venv/bin/python bench/mcp_catalogs/capture.py [--only git,time] [--npm-dir DIR] [--any-version]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client, types
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCResponse

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Server:
    name: str  # the catalog's key: bench/mcp_catalogs/<name>.json, query targets "<name>/<tool>"
    registry: str  # "pypi" or "npm"
    package: str
    version: str
    # Builds the command line from a scratch directory (for repositories, allowed roots, files).
    command: Callable[[Path, Path], tuple[str, list[str], dict[str, str]]]


def _pypi(executable: str, *args: str) -> Callable[[Path, Path], tuple[str, list[str], dict[str, str]]]:
    def build(scratch: Path, npm_dir: Path) -> tuple[str, list[str], dict[str, str]]:
        extra = [arg.replace("{scratch}", str(scratch)) for arg in args]
        return _python_executable(executable), extra, {}

    return build


def _npm(package: str, bin_name: str, *args: str, env: dict[str, str] | None = None
         ) -> Callable[[Path, Path], tuple[str, list[str], dict[str, str]]]:
    def build(scratch: Path, npm_dir: Path) -> tuple[str, list[str], dict[str, str]]:
        root = npm_dir / "node_modules" / package
        manifest = json.loads((root / "package.json").read_text())
        script = root / manifest["bin"][bin_name]
        extra = [arg.replace("{scratch}", str(scratch)) for arg in args]
        environment = {key: value.replace("{scratch}", str(scratch)) for key, value in (env or {}).items()}
        return _node(), [str(script), *extra], environment

    return build


SERVERS = [
    Server("git", "pypi", "mcp-server-git", "2026.10.19",
           _pypi("mcp-server-git", "--repository", "{scratch}/repo")),
    Server("time", "pypi", "mcp-server-time", "2026.10.19",
           _pypi("mcp-server-time", "--local-timezone", "UTC")),
    Server("fetch", "pypi", "mcp-server-fetch", "2026.10.24", _pypi("mcp-server-fetch")),
    Server("filesystem", "npm", "@modelcontextprotocol/server-filesystem", "2026.8.31",
           _npm("@modelcontextprotocol/server-filesystem", "mcp-server-filesystem", "{scratch}/allowed")),
    Server("memory", "npm", "@modelcontextprotocol/server-memory", "2026.8.31",
           _npm("@modelcontextprotocol/server-memory", "mcp-server-memory",
                env={"MEMORY_FILE_PATH": "{scratch}/memory.jsonl"})),
    Server("everything", "npm", "@modelcontextprotocol/server-everything", "2026.8.31",
           _npm("@modelcontextprotocol/server-everything", "mcp-server-everything", "stdio")),
    Server("github", "npm", "@modelcontextprotocol/server-github", "2025.4.8",
           _npm("@modelcontextprotocol/server-github", "mcp-server-github")),
]


def _python_executable(name: str) -> str:
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise SystemExit(f"{name} not found next to {sys.executable} or on PATH; "
                         f"install it: {Path(sys.executable).parent / 'pip'} install {name}")
    return found


def _node() -> str:
    found = shutil.which("node")
    if found is None:
        raise SystemExit("node not found on PATH (the npm servers need Node.js 18 or later)")
    return found


def _installed_version(server: Server, npm_dir: Path) -> str:
    if server.registry == "npm":
        manifest = npm_dir / "node_modules" / server.package / "package.json"
        return str(json.loads(manifest.read_text())["version"])
    # The PyPI server's own interpreter (its venv may not be this one) reports its version.
    executable = Path(_python_executable(server.package))
    python = executable.parent / "python"
    interpreter = str(python) if python.exists() else sys.executable
    code = f"import importlib.metadata as m; print(m.version({server.package!r}))"
    return subprocess.run([interpreter, "-c", code], check=True, capture_output=True, text=True).stdout.strip()


def _ensure_npm(servers: list[Server], npm_dir: Path) -> None:
    missing = [s for s in servers if s.registry == "npm"
               and not (npm_dir / "node_modules" / s.package / "package.json").exists()]
    if not missing:
        return
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("npm not found on PATH")
    npm_dir.mkdir(parents=True, exist_ok=True)
    if not (npm_dir / "package.json").exists():
        (npm_dir / "package.json").write_text('{"name": "mcp-npm", "private": true}\n')
    specs = [f"{s.package}@{s.version}" for s in missing]
    print(f"npm install into {npm_dir}: {' '.join(specs)}", file=sys.stderr)
    subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(npm_dir), *specs], check=True)


def _scratch(root: Path) -> Path:
    (root / "allowed").mkdir()
    repo = root / "repo"
    repo.mkdir()
    git = shutil.which("git")
    if git is None:
        raise SystemExit("git not found on PATH (mcp-server-git needs a repository)")
    subprocess.run([git, "init", "-q", str(repo)], check=True)
    return root


async def _list_tools(params: StdioServerParameters) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Initializes the server and lists its tools; returns serverInfo and the raw tool objects."""
    pages: list[list[dict[str, Any]]] = []
    with anyio.fail_after(60):
        async with stdio_client(params, errlog=sys.stderr) as (read_stream, write_stream):
            # A tap between the transport and the session keeps every tools/list result as it came
            # off the wire (JSONRPCResponse.result is the decoded JSON object, untouched by the
            # models); only a tools/list result carries a "tools" list.
            tap_send, tap_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

            async def relay() -> None:
                async with tap_send:
                    async for item in read_stream:
                        if isinstance(item, SessionMessage) and isinstance(item.message, JSONRPCResponse):
                            tools = item.message.result.get("tools")
                            if isinstance(tools, list):
                                pages.append(json.loads(json.dumps(tools)))
                        await tap_send.send(item)

            async with anyio.create_task_group() as group:
                group.start_soon(relay)
                async with ClientSession(tap_receive, write_stream) as session:
                    initialized = await session.initialize()
                    server_info = initialized.server_info.model_dump(by_alias=True, exclude_none=True)
                    listed = await session.list_tools()
                    while listed.next_cursor is not None:
                        cursor = types.PaginatedRequestParams(cursor=listed.next_cursor)
                        listed = await session.list_tools(params=cursor)
                group.cancel_scope.cancel()
    return server_info, [tool for page in pages for tool in page]


def capture(server: Server, npm_dir: Path, any_version: bool, today: str) -> dict[str, Any]:
    version = _installed_version(server, npm_dir)
    if version != server.version and not any_version:
        raise SystemExit(f"{server.package} is {version}, pinned {server.version}: "
                         "install the pin, or pass --any-version to capture what is installed")
    with tempfile.TemporaryDirectory(prefix=f"mcp-{server.name}-") as tmp:
        scratch = _scratch(Path(tmp))
        command, args, env = server.command(scratch, npm_dir)
        params = StdioServerParameters(command=command, args=args, env=env or None, cwd=str(scratch))
        server_info, tools = anyio.run(_list_tools, params)
    return {"server": server.name, "package": server.package, "version": version, "captured": today,
            "server_info": server_info, "tools": tools}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated server names (default: all)")
    parser.add_argument("--npm-dir", type=Path, default=Path(tempfile.gettempdir()) / "mcp-npm",
                        help="where the npm servers are installed (default: <tmp>/mcp-npm)")
    parser.add_argument("--any-version", action="store_true", help="capture whatever version is installed")
    parser.add_argument("--out", type=Path, default=HERE, help="where the <server>.json files go")
    options = parser.parse_args()
    servers = SERVERS
    if options.only:
        wanted = set(options.only.split(","))
        unknown = wanted - {s.name for s in SERVERS}
        if unknown:
            raise SystemExit(f"unknown servers: {', '.join(sorted(unknown))}")
        servers = [s for s in SERVERS if s.name in wanted]
    os.environ.setdefault("NO_COLOR", "1")
    _ensure_npm(servers, options.npm_dir)
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    for server in servers:
        catalog = capture(server, options.npm_dir, options.any_version, today)
        path = options.out / f"{server.name}.json"
        path.write_text(json.dumps(catalog, indent=2, ensure_ascii=False) + "\n")
        print(f"{server.name:<11} {server.package} {catalog['version']}: {len(catalog['tools'])} tools -> {path}")


if __name__ == "__main__":
    main()
