"""toolscope-mcp supervises its servers (issue 27, items 6 and 7): they start all at once, a slow
one joins after `initialize` with `list_changed`, and one that exits has its tools withdrawn,
calls to them answered with an error naming it, and is started again. Real mcp-server-git and
mcp-server-time from PyPI behind the gateway, the official Python client in front."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

pytestmark = pytest.mark.slow

BIN = Path(__file__).resolve().parents[2] / ".venv" / "bin"
WAIT = 60  # seconds a test waits for an announcement before it fails (never reached when it works)


def git_repository(path: Path) -> Path:
    env = {"GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "a@example.com", "GIT_COMMITTER_NAME": "Ada",
           "GIT_COMMITTER_EMAIL": "a@example.com", "GIT_CONFIG_GLOBAL": "/dev/null", "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=env)
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "First"], cwd=path, check=True, env=env)
    return path


def logged(log: Path, name: str, seconds: float, command: list[str]) -> dict[str, Any]:
    """A server entry that notes when it is started, takes `seconds` to get going, notes that it
    is going, then becomes `command`."""
    script = (f'echo "start {name}" >> {log}; sleep {seconds}; echo "ready {name}" >> {log}; '
              'exec "$@"')
    return {"command": "/bin/sh", "args": ["-c", script, name, *command]}


class Client:
    """The official client's session, and the tools/list_changed notifications it received."""

    def __init__(self, session: ClientSession, changed: list[int], arrived: list[anyio.Event]) -> None:
        self.session, self.changed, self._arrived = session, changed, arrived

    async def names(self) -> list[str]:
        return [tool.name for tool in (await self.session.list_tools()).tools]

    async def announced(self, count: int) -> None:
        """Wait until `count` list_changed notifications have arrived in all."""
        with anyio.fail_after(WAIT):
            while len(self.changed) < count:
                self._arrived[0] = anyio.Event()
                await self._arrived[0].wait()

    async def text(self, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        result = await self.session.call_tool(name, arguments)
        return bool(result.is_error), "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


def through_gateway(tmp_path: Path, servers: dict[str, Any], script: Any, **config: Any) -> Any:
    path = tmp_path / "gateway.json"
    path.write_text(json.dumps({"mcpServers": servers, **config}))

    async def main() -> Any:
        changed: list[int] = []
        arrived = [anyio.Event()]

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                changed.append(1)
                arrived[0].set()

        params = StdioServerParameters(command=str(BIN / "toolscope-mcp"), args=["--config", str(path)])
        with (tmp_path / "gateway.log").open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), \
                    ClientSession(read, write, message_handler=on_message) as session:
                await session.initialize()
                return await script(Client(session, changed, arrived))

    return anyio.run(main)


def test_servers_start_at_once_and_one_slower_than_the_wait_joins_later(tmp_path):
    log = tmp_path / "starts.log"
    repository = git_repository(tmp_path / "repo")
    servers = {
        "time": logged(log, "time", 1, [str(BIN / "mcp-server-time"), "--local-timezone", "UTC"]),
        "other": logged(log, "other", 1, [str(BIN / "mcp-server-time"), "--local-timezone", "UTC"]),
        # Slower than the gateway waits: `initialize` is answered without it.
        "git": logged(log, "git", 6, [str(BIN / "mcp-server-git"), "--repository", str(repository)]),
    }

    async def script(client: Client) -> tuple[list[str], list[str]]:
        before = await client.names()
        await client.announced(1)
        return before, await client.names()

    before, after = through_gateway(tmp_path, servers, script, startupWait=3)
    assert "git_status" not in before and "time_get_current_time" in before and "other_convert_time" in before
    assert "git_status" in after and "time_get_current_time" in after
    # Started all at once: every server was started before any was ready.
    lines = log.read_text().split("\n")
    assert sorted(line for line in lines[:3]) == ["start git", "start other", "start time"], lines
    assert "has not started after 3 s: its tools join when it does" in (tmp_path / "gateway.log").read_text()


def test_a_server_that_exits_is_withdrawn_named_in_errors_and_started_again(tmp_path):
    repository = git_repository(tmp_path / "repo")
    servers = {"git": {"command": str(BIN / "mcp-server-git"), "args": ["--repository", str(repository)]},
               "time": {"command": str(BIN / "mcp-server-time"), "args": ["--local-timezone", "UTC"]}}

    def kill_git() -> list[int]:
        found = subprocess.run(["pgrep", "-f", f"mcp-server-git --repository {repository}"],
                               capture_output=True, text=True).stdout.split()
        for pid in found:
            os.kill(int(pid), signal.SIGKILL)
        return [int(pid) for pid in found]

    async def script(client: Client) -> dict[str, Any]:
        await client.names()  # listed first, as clients do: a call of a tool not listed is a miss (list_changed)
        seen: dict[str, Any] = {"first": await client.text("git_status", {"repo_path": str(repository)})}
        assert client.changed == []
        seen["killed"] = kill_git()
        await client.announced(1)  # its tools are withdrawn
        seen["withdrawn"] = await client.names()
        seen["while_down"] = await client.text("git_status", {"repo_path": str(repository)})
        await client.announced(2)  # started again: its tools are back
        seen["back"] = await client.names()
        seen["after"] = await client.text("git_log", {"repo_path": str(repository)})
        return seen

    seen = through_gateway(tmp_path, servers, script)
    assert seen["first"][0] is False and "On branch main" in seen["first"][1]
    assert len(seen["killed"]) == 1
    assert "git_status" not in seen["withdrawn"] and "get_current_time" in seen["withdrawn"]
    error, text = seen["while_down"]
    assert error and "belongs to the MCP server git, which is not running" in text and "restarting" in text
    assert "git_status" in seen["back"]
    assert seen["after"][0] is False and "First" in seen["after"][1]
    assert "upstream git stopped (it exited): its tools are withdrawn, restarting in 1 s" in (
        tmp_path / "gateway.log").read_text()
