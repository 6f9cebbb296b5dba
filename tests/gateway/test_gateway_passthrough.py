"""Everything but tools through toolscope-mcp (issue 27, items 1 and 3), each compared with the
same server called directly in the same test: resources, templates, reads, subscriptions and their
updates, prompts, completions, log messages, progress and the servers' instructions. Behind it,
npm's @modelcontextprotocol/server-everything (tests/gateway/npm, pinned) and PyPI's
mcp-server-time; in front, the official Python client."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".venv" / "bin"
NPM_BIN = REPO / "tests" / "gateway" / "npm" / "node_modules" / ".bin"
EVERYTHING = {"command": str(NPM_BIN / "mcp-server-everything"), "args": ["stdio"]}
TIME = {"command": str(BIN / "mcp-server-time"), "args": ["--local-timezone", "UTC"]}
WAIT = 60


@pytest.fixture(autouse=True)
def npm_servers() -> None:
    assert (NPM_BIN / "mcp-server-everything").exists(), "run ./scripts/bootstrap: it installs tests/gateway/npm"


class Seen:
    """What a client session received besides answers."""

    def __init__(self) -> None:
        self.updated: list[str] = []
        self.logs: list[types.LoggingMessageNotificationParams] = []
        self.changed: list[str] = []
        self.arrived = anyio.Event()

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.updated.append(str(message.params.uri))
        elif isinstance(message, (types.ResourceListChangedNotification, types.PromptListChangedNotification,
                                  types.ToolListChangedNotification)):
            self.changed.append(message.method)
        self.arrived.set()

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params)
        self.arrived.set()

    async def until(self, condition: Any) -> None:
        with anyio.fail_after(WAIT):
            while not condition():
                self.arrived = anyio.Event()
                await self.arrived.wait()


def session_with(params: StdioServerParameters, script: Any, errlog: Path) -> Any:
    async def main() -> Any:
        seen = Seen()
        with errlog.open("w") as log:
            async with stdio_client(params, errlog=log) as (read, write), ClientSession(
                    read, write, message_handler=seen.on_message, logging_callback=seen.on_log) as session:
                initialized = await session.initialize()
                return await script(session, initialized, seen)

    return anyio.run(main)


def direct(tmp_path: Path, server: dict[str, Any], script: Any) -> Any:
    return session_with(StdioServerParameters(command=server["command"], args=server["args"]), script,
                        tmp_path / "direct.log")


def gateway(tmp_path: Path, servers: dict[str, Any], script: Any) -> Any:
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps({"mcpServers": servers}))
    params = StdioServerParameters(command=str(BIN / "toolscope-mcp"), args=["--config", str(config)])
    return session_with(params, script, tmp_path / "gateway.log")


async def survey(session: ClientSession, initialized: types.InitializeResult, seen: Seen) -> dict[str, Any]:
    """Every list, a read, a prompt, a completion and a long call with progress."""
    resources = (await session.list_resources()).resources
    templates = (await session.list_resource_templates()).resource_templates
    prompts = (await session.list_prompts()).prompts
    first = resources[0].uri
    read = await session.read_resource(first)
    dynamic = await session.read_resource("demo://resource/dynamic/text/3")
    prompt = await session.get_prompt("args-prompt", {"city": "Lyon", "state": "Rhone"})
    completion = await session.complete(types.PromptReference(name="completable-prompt"),
                                        {"name": "department", "value": "E"})
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    done = await session.call_tool("trigger-long-running-operation", {"duration": 1, "steps": 4},
                                   progress_callback=on_progress)
    return {"capabilities": initialized.capabilities, "instructions": initialized.instructions or "",
            "resources": [r.model_dump(mode="json", exclude_none=True) for r in resources],
            "templates": [t.model_dump(mode="json", exclude_none=True) for t in templates],
            "prompts": [p.model_dump(mode="json", exclude_none=True) for p in prompts],
            "read": read.model_dump(mode="json", exclude_none=True),
            # (its text says when it was made: the time is left out of the comparison)
            "dynamic": re.sub(r"created at .*", "created at", json.dumps(dynamic.model_dump(mode="json",
                                                                                         exclude_none=True))),
            "prompt": prompt.model_dump(mode="json", exclude_none=True),
            "completion": completion.completion.values, "progress": progress,
            "done": [block.model_dump(mode="json") for block in done.content]}


def test_resources_prompts_completions_progress_and_instructions_pass_through(tmp_path):
    alone = direct(tmp_path, EVERYTHING, survey)
    through = gateway(tmp_path, {"everything": EVERYTHING, "time": TIME}, survey)
    for key in ("resources", "templates", "prompts", "read", "dynamic", "prompt", "completion", "progress", "done"):
        assert through[key] == alone[key], key
    assert len(alone["resources"]) == 7 and alone["progress"] == [1.0, 2.0, 3.0, 4.0]
    assert alone["completion"] == ["Engineering"]
    capabilities = through["capabilities"]
    assert capabilities.resources.subscribe and capabilities.resources.list_changed
    assert capabilities.prompts.list_changed and capabilities.completions is not None
    # The server's instructions, whole, under its name.
    assert len(alone["instructions"]) > 1000
    assert f"## everything\n{alone['instructions'].strip()}" in through["instructions"]


def test_two_servers_listing_the_same_resources_and_prompts_are_told_apart(tmp_path):
    async def script(session: ClientSession, initialized: types.InitializeResult, seen: Seen) -> dict[str, Any]:
        resources = [r.uri for r in (await session.list_resources()).resources]
        prompts = [p.name for p in (await session.list_prompts()).prompts]
        read = await session.read_resource("b+demo://resource/static/document/features.md")
        got = await session.get_prompt("a_simple-prompt")
        completion = await session.complete(types.PromptReference(name="b_completable-prompt"),
                                            {"name": "department", "value": "M"})
        return {"resources": resources, "prompts": prompts, "read": read, "prompt": got,
                "completion": completion.completion.values}

    seen = gateway(tmp_path, {"a": EVERYTHING, "b": EVERYTHING}, script)
    assert "a+demo://resource/static/document/features.md" in seen["resources"]
    assert "b+demo://resource/static/document/features.md" in seen["resources"]
    assert len(seen["resources"]) == 14
    assert {"a_simple-prompt", "b_simple-prompt", "a_args-prompt"} <= set(seen["prompts"])
    # The read answers with the URI the client asked for, the content the server's.
    contents = seen["read"].contents
    assert contents[0].uri == "b+demo://resource/static/document/features.md" and contents[0].text
    assert seen["prompt"].messages and seen["completion"] == ["Marketing"]


async def updates_and_logs(session: ClientSession, initialized: types.InitializeResult, seen: Seen) -> dict[str, Any]:
    uri = "demo://resource/static/document/features.md"
    await session.subscribe_resource(uri)
    await session.call_tool("toggle-subscriber-updates", {})
    await seen.until(lambda: uri in seen.updated)
    await session.set_logging_level("debug")
    await session.call_tool("toggle-simulated-logging", {})
    await seen.until(lambda: len(seen.logs) >= 2)
    return {"updated": sorted(set(seen.updated)), "loggers": sorted({log.logger or "" for log in seen.logs})}


def test_subscribed_updates_and_log_messages_reach_the_client(tmp_path):
    alone = direct(tmp_path, EVERYTHING, updates_and_logs)
    through = gateway(tmp_path, {"everything": EVERYTHING, "time": TIME}, updates_and_logs)
    assert alone["updated"] == through["updated"] == ["demo://resource/static/document/features.md"]
    # Each log message comes through with its logger named after the server it came from.
    assert through["loggers"] and all(name.startswith("everything") for name in through["loggers"])
    assert {name.removeprefix("everything").removeprefix(".") for name in through["loggers"]} <= {
        "", *alone["loggers"]}


def survey_with_node(*command: str) -> dict[str, Any]:
    """tests/gateway/npm/survey.mjs: the official TypeScript client (@modelcontextprotocol/sdk, the
    one Claude Code and Claude Desktop embed) surveys a server over stdio."""
    import subprocess

    done = subprocess.run(["node", str(NPM_BIN.parent.parent / "survey.mjs"), *command], capture_output=True,
                          text=True, timeout=120, check=True)
    return json.loads(done.stdout)


def test_the_typescript_client_sees_through_the_gateway_what_it_sees_directly(tmp_path):
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps({"mcpServers": {"everything": EVERYTHING, "time": TIME}}))
    alone = survey_with_node(EVERYTHING["command"], *EVERYTHING["args"])
    through = survey_with_node(str(BIN / "toolscope-mcp"), "--config", str(config))
    for key in ("resources", "templates", "prompts", "read", "prompt", "completion", "done"):
        assert through[key] == alone[key], key
    assert alone["completion"] == ["Sales", "Support"] and len(alone["resources"]) == 7
    # The gateway offers sampling, elicitation and roots upstream (relayed to clients that offer
    # them), so the four tools that need them are listed too; this client offers none.
    needing = {"get-roots-list", "trigger-elicitation-request", "trigger-sampling-request", "trigger-url-elicitation"}
    assert set(through["tools"]) == {*alone["tools"], *needing, "get_current_time", "convert_time"}
    # Progress: the client stops listening when the answer comes, so directly it may miss the last
    # notification; through the gateway each is passed on before the answer.
    assert alone["progress"] and through["progress"][:len(alone["progress"])] == alone["progress"]
    assert through["progress"] == [1, 2, 3]
    assert f"## everything\n{alone['instructions'].strip()}" in through["instructions"]
    for capability in ("logging", "completions", "prompts", "resources", "tools"):
        assert through["capabilities"][capability] == alone["capabilities"][capability], capability
