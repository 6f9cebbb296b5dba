"""toolscope-mcp end to end: real MCP servers from PyPI (mcp-server-git on a scratch repository,
mcp-server-time) behind the gateway, started as a client starts it (the console script over
stdio), the official MCP client in front, and a real toolscope (live server, Celery worker,
PostgreSQL) serving the published policy and receiving the telemetry.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from tests.e2e.conftest import ResponseDroppingProxy, ingest_queue, wait_for, worker  # noqa: F401 -- fixtures
from tests.factories import make_key, make_project, make_user
from toolscope.policies.models import CompactionRule, Policy, Tool
from toolscope.policies.services.catalog import catalog_upsert
from toolscope.policies.services.publish import policy_publish
from toolscope.telemetry.models import BatchStatus, IngestBatch, Session, ToolCall, Turn

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".venv" / "bin"
CATALOGS = REPO / "bench" / "mcp_catalogs"
COMMITS = 40


def catalog() -> list[dict[str, Any]]:
    """The git and time servers' tools as they list them (captured from the pinned versions)."""
    return [{"name": tool["name"], "description": tool.get("description", ""), "input_schema": tool["inputSchema"],
             "source": server}
            for server in ("git", "time") for tool in json.loads((CATALOGS / f"{server}.json").read_text())["tools"]]


@pytest.fixture
def repository(tmp_path) -> Path:
    path = tmp_path / "repo"
    env = {"GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.com", "GIT_COMMITTER_NAME": "Ada",
           "GIT_COMMITTER_EMAIL": "ada@example.com", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
           "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=env)
    for n in range(COMMITS):
        (path / "notes.txt").write_text(f"note {n}\n")
        subprocess.run(["git", "add", "notes.txt"], cwd=path, check=True, env=env)
        subprocess.run(["git", "commit", "-q", "-m", f"Change number {n} of the notes"], cwd=path, check=True, env=env)
    return path


@pytest.fixture
def project(transactional_db):
    project = make_project("gateway")
    catalog_upsert(project=project, definitions=catalog())
    return project


def publish(project, *, mode: str, always_on: list[str], compaction: dict[str, int] | None = None,
            approval: tuple[str, ...] = ()) -> None:
    policy = Policy.objects.get_or_create(project=project)[0]
    policy.mode = mode
    policy.save()
    policy.always_on.set(Tool.objects.filter(project=project, name__in=always_on))
    for tools, max_tokens in (compaction or {}).items():
        CompactionRule.objects.create(policy=policy, tools=tools, max_tokens=max_tokens, strategy="head_tail")
    Tool.objects.filter(project=project, name__in=approval).update(requires_approval=True)
    policy_publish(policy=policy, user=make_user())


def write_config(tmp_path: Path, repository: Path, toolscope: dict[str, Any] | None) -> Path:
    config = {"mcpServers": {
        "git": {"command": str(BIN / "mcp-server-git"), "args": ["--repository", str(repository)]},
        "time": {"type": "stdio", "command": str(BIN / "mcp-server-time"), "args": ["--local-timezone", "UTC"]},
    }}
    if toolscope is not None:
        config["toolscope"] = toolscope
    path = tmp_path / "gateway.json"
    path.write_text(json.dumps(config))
    return path


class Connected:
    """The official client connected to the gateway, with the notifications it received."""

    def __init__(self, session: ClientSession, changed: list[str]) -> None:
        self.session, self.changed = session, changed

    async def names(self) -> list[str]:
        return [tool.name for tool in (await self.session.list_tools()).tools]

    async def call(self, name: str, **arguments: Any) -> types.CallToolResult:
        return await self.session.call_tool(name, arguments)

    async def changed_to(self, count: int) -> None:
        with anyio.fail_after(10):
            while len(self.changed) < count:
                await anyio.sleep(0.02)


@asynccontextmanager
async def gateway(config: Path, *, elicitation: Any = None, env: dict[str, str] | None = None,
                  ) -> AsyncIterator[Connected]:
    changed: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.append(message.method)

    params = StdioServerParameters(command=str(BIN / "toolscope-mcp"), args=["--config", str(config)],
                                   env={"HOME": str(config.parent), "PATH": f"{BIN}:/usr/bin:/bin", **(env or {})})
    async with stdio_client(params) as (read, write), ClientSession(
            read, write, message_handler=on_message, elicitation_callback=elicitation,
            client_info=types.Implementation(name="claude-code", version="2.1.0")) as session:
        await session.initialize()
        yield Connected(session, changed)


def text(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


def processed() -> bool:
    return IngestBatch.objects.exists() and not IngestBatch.objects.exclude(status=BatchStatus.DONE).exists()


def test_the_policy_filters_compacts_and_suppresses_and_telemetry_equals_what_passed(
        live_server, worker, project, repository, tmp_path):  # noqa: F811 -- the worker fixture
    publish(project, mode="context_rules", always_on=["git_status", "git_log", "get_current_time"],
            compaction={"git_log": 80})
    key = make_key(project, scopes=("ingest", "policy:read")).secret
    config = write_config(tmp_path, repository, {"url": live_server.url, "apiKey": "${GATEWAY_KEY}",
                                                 "cacheDir": str(tmp_path / "cache")})

    async def run() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with gateway(config, env={"GATEWAY_KEY": key}) as client:
            seen["listed"] = await client.names()
            log = await client.call("git_log", repo_path=str(repository), max_count=COMMITS)
            seen["log"] = text(log)
            artifact = seen["log"].split('retrieve_tool_output(id="')[1].split('"')[0]
            seen["original"] = text(await client.call("retrieve_tool_output", id=artifact))
            seen["status"] = [text(await client.call("git_status", repo_path=str(repository))) for _ in range(2)]
            bad = await client.call("get_current_time", timezone="Mars/Olympus")
            seen["bad"] = (bad.is_error, text(bad))
            # Not sent by the policy: forwarded all the same, then sent (sticky) and announced.
            branch = await client.call("git_branch", repo_path=str(repository), branch_type="local")
            seen["branch"] = (branch.is_error, text(branch))
            await client.changed_to(1)
            seen["relisted"] = await client.names()
        return seen

    seen = anyio.run(run)
    # Left-out tools are reached through toolscope's search (context_rules mode: issue 27, item 9).
    assert seen["listed"] == ["git_status", "git_log", "get_current_time", "tool_search", "retrieve_tool_output"]
    assert seen["log"].count("Change number") < COMMITS and 'retrieve_tool_output(id="' in seen["log"]
    assert all(f"Change number {n} of the notes" in seen["original"] for n in range(COMMITS))
    assert "working tree clean" in seen["status"][0]
    assert seen["bad"][0] is True and "Mars/Olympus" in seen["bad"][1]
    assert seen["branch"] == (False, "* main")
    assert seen["relisted"] == ["git_status", "git_log", "git_branch", "get_current_time", "tool_search",
                                "retrieve_tool_output"]

    wait_for(processed, 60, "the gateway's telemetry processed")
    session = Session.objects.get(project=project)
    assert session.agent_name == "claude-code" and session.ended_at is not None
    assert session.metadata["gateway"] == "toolscope-mcp" and session.metadata["servers"] == ["git", "time"]
    assert session.metadata["client"] == {"name": "claude-code", "version": "2.1.0"}
    # A turn per tools/list answer: what was advertised (the gateway's own tools are not catalog tools).
    turns = list(Turn.objects.filter(session=session).order_by("index"))
    advertised = [sorted(tool["name"] for tool in turn.advertised_set.tools) if turn.advertised_set else []
                  for turn in turns]
    # (The official client also lists by itself before calling a tool it has not seen listed.)
    before = sorted(["git_status", "git_log", "get_current_time"])
    after = sorted([*before, "git_branch"])
    assert advertised[0] == before and advertised[-1] == after and set(map(tuple, advertised)) == {
        tuple(before), tuple(after)}
    calls = list(ToolCall.objects.filter(session=session).order_by("started_at", "id"))
    assert [(call.tool_name, call.status) for call in calls] == [
        ("git_log", "ok"), ("git_status", "ok"), ("git_status", "ok"), ("get_current_time", "error"),
        ("git_branch", "ok")]
    assert calls[0].arguments == {"repo_path": str(repository), "max_count": COMMITS}
    # The original was sent, not what the model saw: toolscope compacts it alike and keeps it whole
    # under the same id, so the server can answer retrieve_tool_output too.
    assert calls[0].output == seen["log"] and calls[0].artifact.original == seen["original"]
    assert f'id="{calls[0].artifact.content_id}"' in seen["log"]
    assert calls[2].duplicate_of_id == calls[1].pk
    # The model saw no call id through MCP: the placeholder cites the first call's arguments, and
    # the server's accounting predicts the very text the gateway sent.
    assert seen["status"][1] == (f'[same output as the earlier git_status call with {{"repo_path": '
                                 f'"{repository}"}}; not repeated]')
    assert calls[2].placeholder == seen["status"][1]
    # The catalog the gateway registered is the one the servers list: nothing new, by source.
    assert set(Tool.objects.filter(project=project).values_list("source", flat=True)) == {"git", "time"}
    assert Tool.objects.filter(project=project).count() == len(catalog())


def test_a_search_loads_a_tool_and_the_client_is_told(live_server, project, repository, tmp_path):
    publish(project, mode="tool_search", always_on=[])
    key = make_key(project, scopes=("ingest", "policy:read")).secret
    config = write_config(tmp_path, repository, {"url": live_server.url, "apiKey": key,
                                                 "cacheDir": str(tmp_path / "cache")})

    async def run() -> tuple[list[str], str, list[str], int]:
        async with gateway(config) as client:
            first = await client.names()
            found = text(await client.call("tool_search", query="show the commit history log"))
            await client.changed_to(1)
            return first, found, await client.names(), len(client.changed)

    first, found, after, notified = anyio.run(run)
    assert first == ["tool_search"]
    assert found.startswith("These tools are now available:") and "git_log" in found
    assert "git_log" in after and after[-1] == "tool_search" and notified == 1


def test_approval_is_asked_through_elicitation_or_refused(live_server, project, repository, tmp_path):
    publish(project, mode="all", always_on=[], approval=("git_create_branch",))
    key = make_key(project, scopes=("ingest", "policy:read")).secret
    config = write_config(tmp_path, repository, {"url": live_server.url, "apiKey": key,
                                                 "cacheDir": str(tmp_path / "cache")})
    asked: list[str] = []

    def answering(approve: bool):
        async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            asked.append(params.message)
            return types.ElicitResult(action="accept", content={"approve": approve})
        return elicit

    async def create(elicitation: Any, branch: str) -> types.CallToolResult:
        async with gateway(config, elicitation=elicitation) as client:
            return await client.call("git_create_branch", repo_path=str(repository), branch_name=branch)

    approved = anyio.run(create, answering(True), "feature-a")
    declined = anyio.run(create, answering(False), "feature-b")
    unable = anyio.run(create, None, "feature-c")
    assert not approved.is_error and "feature-a" in text(approved)
    assert declined.is_error and "not given" in text(declined)
    assert unable.is_error and "cannot ask" in text(unable)
    assert len(asked) == 2 and "git_create_branch" in asked[0] and "feature-a" in asked[0]
    branches = subprocess.run(["git", "branch", "--list"], cwd=repository, capture_output=True, text=True).stdout
    assert "feature-a" in branches and "feature-b" not in branches and "feature-c" not in branches


@pytest.fixture
def forwarder(live_server) -> Iterator[ResponseDroppingProxy]:
    """A TCP forwarder to toolscope (dropping nothing) that the test closes: toolscope "down"."""
    host, port = live_server.url.removeprefix("http://").split(":")
    running = ResponseDroppingProxy((host, int(port)), drop=0)
    yield running
    running.close()


def test_the_gateway_keeps_serving_the_last_policy_with_toolscope_down(live_server, forwarder, project, repository,
                                                                       tmp_path):
    publish(project, mode="context_rules", always_on=["git_status", "get_current_time"])
    key = make_key(project, scopes=("ingest", "policy:read")).secret
    config = write_config(tmp_path, repository, {"url": f"http://127.0.0.1:{forwarder.port}", "apiKey": key,
                                                 "cacheDir": str(tmp_path / "cache")})

    async def session() -> tuple[list[str], bool, str]:
        async with gateway(config) as client:
            names = await client.names()
            result = await client.call("get_current_time", timezone="Asia/Tokyo")
            return names, result.is_error, text(result)

    online = anyio.run(session)
    forwarder.close()  # toolscope unreachable from now on; the gateway starts again
    offline = anyio.run(session)
    assert online[0] == offline[0] == ["git_status", "get_current_time", "tool_search"]  # the policy kept on disk
    assert offline[1] is False and "Asia/Tokyo" in offline[2]


class Switchable(ResponseDroppingProxy):
    """A TCP forwarder to toolscope that goes down (its port closed: connections refused) and
    comes back up on the same port."""

    def __init__(self, target: tuple[str, int]) -> None:
        super().__init__(target, drop=0)

    def down(self) -> None:
        self.listener.close()

    def up(self) -> None:
        import socket
        import threading

        self.listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()


OUTAGE_SECONDS = 60


def test_nothing_the_gateway_saw_is_lost_across_a_toolscope_outage_and_a_restart(
        live_server, worker, project, repository, tmp_path):  # noqa: F811 -- the worker fixture
    """Issue 27, item 5: toolscope stopped for 60 s; calls made during it, in a gateway that is
    restarted meanwhile, are spooled to disk and delivered once it is back: every call recorded
    once, each session with its agent and metadata."""
    publish(project, mode="context_rules", always_on=["git_status", "get_current_time"])
    key = make_key(project, scopes=("ingest", "policy:read")).secret
    host, port = live_server.url.removeprefix("http://").split(":")
    proxy = Switchable((host, int(port)))
    config = write_config(tmp_path, repository, {"url": f"http://127.0.0.1:{proxy.port}", "apiKey": key,
                                                 "cacheDir": str(tmp_path / "cache")})
    zones = ["Asia/Tokyo", "Europe/Paris", "America/Lima", "Africa/Cairo", "Australia/Perth", "Europe/Oslo"]

    async def calls(timezones: list[str], *, then: Any = None) -> None:
        async with gateway(config) as client:
            await client.names()
            for zone in timezones:
                result = await client.call("get_current_time", timezone=zone)
                assert not result.is_error and zone in text(result)
            if then is not None:
                then()

    try:
        anyio.run(calls, zones[:1])  # toolscope up: delivered at once
        began = time.monotonic()
        proxy.down()
        anyio.run(calls, zones[1:4])  # the first gateway: its telemetry spooled when it stops
        anyio.run(calls, zones[4:])  # restarted, still down
        spool = list((tmp_path / "cache" / "spool").rglob("*.json.gz"))
        assert spool, "nothing was spooled"
        time.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - began)))
        proxy.up()
        # A third run sends the spool (a restarted gateway finds it) and records one more call.
        anyio.run(calls, ["Europe/Rome"])
        wait_for(lambda: ToolCall.objects.filter(session__project=project).count() >= len(zones) + 1 and processed(),
                 90, "every call recorded")
    finally:
        proxy.close()
    recorded = sorted(ToolCall.objects.filter(session__project=project).values_list("arguments__timezone", flat=True))
    assert recorded == sorted([*zones, "Europe/Rome"])  # each once
    sessions = list(Session.objects.filter(project=project))
    assert len(sessions) == 4
    assert all(s.agent_name == "claude-code" and s.metadata.get("gateway") == "toolscope-mcp" for s in sessions)
    assert not list((tmp_path / "cache" / "spool").rglob("*.json.gz"))  # the spool was emptied
