"""The recommended policy on sessions recorded through real MCP servers (issue 14, "Must show").

Sessions are played, not written: scripted agent tasks (what changed, commit a fix, history, the
time somewhere, a conversion, a branch review, reading and finding files, remembering a fact, and
tasks that fail: a bad time zone, an unknown revision) call real servers over stdio with the
official `mcp` client: mcp-server-git on a scratch repository and mcp-server-time from PyPI, and,
when `--npm-dir` holds them, @modelcontextprotocol/server-filesystem and server-memory from npm
(bench/mcp_catalogs/capture.py installs them there). Every output is what the server answered.

The agent advertises a realistic multi-server catalog on every turn: the 77 tools seven real
servers answered to `tools/list` (bench/mcp_catalogs/*.json, names two servers share prefixed by
the server). Each session is posted to toolscope as an Anthropic Messages transcript (`is_error`
on failed results) into a scratch PostgreSQL database and processed there; sessions are spread
over the last 7 days, oldest first, so the recommendation's time split learns on the older half.

Then `policy_recommendations` (the Simulate tab's): candidates learnt on the older half, scored on
the newer half; the script prints the Pareto front and the recommended policy's figures.

    .venv/bin/python bench/mcp_recommend.py [--sessions 300] [--seed 7] [--npm-dir /tmp/mcp-npm]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SERVERS = ("git", "time", "fetch", "filesystem", "memory", "everything", "github")
CITIES = {"Tokyo": "Asia/Tokyo", "Paris": "Europe/Paris", "New York": "America/New_York", "Sydney": "Australia/Sydney",
          "London": "Europe/London", "Berlin": "Europe/Berlin"}


@dataclass
class Call:
    server: str
    tool: str
    arguments: dict[str, Any]
    text: str = ""
    failed: bool = False


@dataclass
class Task:
    message: str
    turns: list[list[Call]] = field(default_factory=list)


def catalog() -> tuple[list[dict[str, Any]], dict[tuple[str, str], str]]:
    """The advertised tools (Anthropic shape) and (server, tool) -> advertised name."""
    listed = [(server, tool) for server in SERVERS
              for tool in json.loads((HERE / "mcp_catalogs" / f"{server}.json").read_text())["tools"]]
    counts: dict[str, int] = {}
    for _, tool in listed:
        counts[tool["name"]] = counts.get(tool["name"], 0) + 1
    names = {(server, tool["name"]): tool["name"] if counts[tool["name"]] == 1 else f"{server}_{tool['name']}"
             for server, tool in listed}
    tools = [{"name": names[(server, tool["name"])], "description": tool.get("description", ""),
              "input_schema": tool["inputSchema"]} for server, tool in listed]
    return tools, names


def tasks(rng: random.Random, repo: str, files: str | None, memory: bool) -> Task:
    """One agent task, drawn at random: its message and the calls of each of its turns."""
    city, other = rng.sample(sorted(CITIES), 2)
    choices: list[Task] = [
        Task(rng.choice(["What changed since the last commit?", "Show me my uncommitted changes",
                         "what did I modify"]),
             [[Call("git", "git_status", {"repo_path": repo})],
              [Call("git", "git_diff_unstaged", {"repo_path": repo})]]),
        Task(rng.choice(["Show the recent commit history", "what were the last commits", "git log please"]),
             [[Call("git", "git_log", {"repo_path": repo, "max_count": rng.choice([3, 5, 10])})]]),
        Task(rng.choice([f"What time is it in {city}?", f"current time in {city}", f"Is it night in {city} now?"]),
             [[Call("time", "get_current_time", {"timezone": CITIES[city]})]]),
        Task(rng.choice([f"Convert 14:30 {city} time to {other}", f"If it is 09:00 in {city}, what time in {other}?"]),
             [[Call("time", "convert_time", {"source_timezone": CITIES[city], "time": rng.choice(["09:00", "14:30"]),
                                              "target_timezone": CITIES[other]})]]),
        Task(rng.choice(["Review the branches", "which branches exist", "list git branches"]),
             [[Call("git", "git_branch", {"repo_path": repo, "branch_type": "local"})],
              [Call("git", "git_show", {"repo_path": repo, "revision": "HEAD"})]]),
        Task(rng.choice(["Convert noon on Mars to Tokyo time", "time in Atlantis now"]),  # fails: unknown zone
             [[Call("time", "get_current_time", {"timezone": rng.choice(["Mars/Olympus", "Atlantis/Central"])})]]),
        Task(rng.choice(["show commit deadbeef", "What did revision v9.9 change?"]),  # fails: no such revision
             [[Call("git", "git_show", {"repo_path": repo, "revision": rng.choice(["deadbeef", "v9.9"])})]]),
    ]
    commit = Task(rng.choice(["Commit the fix", "commit my change with a message", "please commit"]),
                  [[Call("git", "git_status", {"repo_path": repo})],
                   [Call("git", "git_add", {"repo_path": repo, "files": ["notes.txt"]})],
                   [Call("git", "git_commit", {"repo_path": repo, "message": "Update notes"})]])
    choices += [commit]
    if files:
        choices += [
            Task(rng.choice(["Read the README", "open the readme file", "what does README.md say"]),
                 [[Call("filesystem", "read_text_file", {"path": f"{files}/README.md"})]]),
            Task(rng.choice(["Find the python files", "which .py files are there", "search for python sources"]),
                 [[Call("filesystem", "search_files", {"path": files, "pattern": "*.py"})],
                  [Call("filesystem", "read_text_file", {"path": f"{files}/app.py"})]]),
            Task(rng.choice(["List the project folder", "what is in the project directory"]),
                 [[Call("filesystem", "list_directory", {"path": files})]]),
        ]
    if memory:
        person = rng.choice(["Alice", "Bob", "Chen"])
        choices += [
            Task(rng.choice([f"Remember that {person} owns the billing service", f"note: {person} is on call"]),
                 [[Call("memory", "create_entities", {"entities": [
                     {"name": person, "entityType": "person", "observations": ["owns the billing service"]}]})]]),
            Task(rng.choice([f"What do you know about {person}?", f"who is {person}"]),
                 [[Call("memory", "search_nodes", {"query": person})]]),
        ]
    return rng.choice(choices)


def _git_repository(path: Path) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.com", "GIT_COMMITTER_NAME": "Ada",
           "GIT_COMMITTER_EMAIL": "ada@example.com", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    path.mkdir()
    (path / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    for command in (["init", "-q", "-b", "main"], ["add", "calc.py"], ["commit", "-q", "-m", "Add calc"]):
        subprocess.run(["git", *command], cwd=path, env=env, check=True)


async def play(count: int, seed: int, workdir: Path, npm_dir: Path | None) -> list[Task]:
    from mcp import ClientSession, StdioServerParameters, stdio_client
    from mcp.shared.exceptions import MCPError

    repo, files = workdir / "repo", workdir / "files"
    _git_repository(repo)
    files.mkdir()
    (files / "README.md").write_text("# Billing\n\nThe billing service charges customers monthly.\n")
    (files / "app.py").write_text("def charge(customer):\n    return customer.plan.price\n")
    binaries = Path(sys.executable).parent
    params = {
        "git": StdioServerParameters(command=str(binaries / "mcp-server-git"), args=["--repository", str(repo)]),
        "time": StdioServerParameters(command=str(binaries / "mcp-server-time"), args=["--local-timezone", "UTC"]),
    }
    node = shutil.which("node")
    npm = npm_dir / "node_modules" / "@modelcontextprotocol" if npm_dir else None
    if node and npm and (npm / "server-filesystem").is_dir() and (npm / "server-memory").is_dir():
        params["filesystem"] = StdioServerParameters(command=node, args=[
            str(npm / "server-filesystem" / "dist" / "index.js"), str(files)])
        params["memory"] = StdioServerParameters(command=node, args=[str(npm / "server-memory" / "dist" / "index.js")],
                                                 env={**os.environ, "MEMORY_FILE_PATH": str(workdir / "memory.json")})
    rng = random.Random(seed)
    played: list[Task] = []
    async with _sessions(params, stdio_client, ClientSession) as sessions:
        for _ in range(count):
            task = tasks(rng, str(repo), str(files) if "filesystem" in sessions else None, "memory" in sessions)
            task = Task(task.message, [[Call(c.server, c.tool, dict(c.arguments)) for c in turn]
                                       for turn in task.turns])
            if task.turns[-1][0].tool == "git_commit":
                (repo / "notes.txt").write_text(f"note {len(played)}\n")
            for call in (call for turn in task.turns for call in turn):
                try:
                    result = await sessions[call.server].call_tool(call.tool, call.arguments)
                except MCPError as error:
                    call.text, call.failed = f"MCP error {error.error.code}: {error.error.message}", True
                    continue
                call.text = "\n".join(block.text for block in result.content if block.type == "text")
                call.failed = bool(result.is_error)
            played.append(task)
    return played


class _sessions:
    """Every server started and initialised, as an async context: {server: ClientSession}."""

    def __init__(self, params: dict[str, Any], stdio_client: Any, client_session: Any) -> None:
        from contextlib import AsyncExitStack

        self.params, self.stdio_client, self.client_session = params, stdio_client, client_session
        self.stack = AsyncExitStack()

    async def __aenter__(self) -> dict[str, Any]:
        sessions = {}
        for name, params in self.params.items():
            streams = await self.stack.enter_async_context(self.stdio_client(params))
            session = await self.stack.enter_async_context(self.client_session(*streams))
            await session.initialize()
            sessions[name] = session
        return sessions

    async def __aexit__(self, *exc: Any) -> None:
        await self.stack.aclose()


def transcript(task: Task, index: int, count: int, tools: list[dict[str, Any]],
               names: dict[tuple[str, str], str]) -> dict[str, Any]:
    """The session as Anthropic Messages, as a host sends it."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": task.message}]
    number = 0
    for turn in task.turns:
        blocks: list[dict[str, Any]] = [{"type": "text", "text": "Let me check."}]
        results = []
        for call in turn:
            number += 1
            call_id = f"toolu_{index:04d}_{number:02d}"
            blocks.append({"type": "tool_use", "id": call_id, "name": names[(call.server, call.tool)],
                           "input": call.arguments})
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id,
                                      "content": [{"type": "text", "text": call.text or "(empty)"}]}
            if call.failed:
                result["is_error"] = True
            results.append(result)
        messages += [{"role": "assistant", "content": blocks}, {"role": "user", "content": results}]
    messages.append({"role": "assistant", "content": [{"type": "text", "text": "Done."}]})
    when = datetime.now(UTC) - timedelta(days=7) + timedelta(days=7) * index / count
    return {"session_id": f"mcp-{index:04d}", "timestamp": when.isoformat().replace("+00:00", "Z"),
            "model": "claude-sonnet-4-5", "system": "You are a coding assistant.", "messages": messages,
            "tools": tools}


def record(played: list[Task]) -> Any:
    """Post every session to toolscope and process it; the project."""
    from tests.api.conftest import KeyClient
    from toolscope.telemetry.models import IngestBatch
    from toolscope.telemetry.services.api_keys import api_key_create
    from toolscope.telemetry.services.processing import batch_process
    from toolscope.telemetry.services.projects import project_create

    created = project_create(slug="mcp", name="MCP agent", owner="owner")
    client = KeyClient(api_key_create(project=created.project, name="bench", scopes=["ingest"]).secret)
    tools, names = catalog()
    for index, task in enumerate(played):
        response = client.post_json("/api/v1/transcripts", transcript(task, index, len(played), tools, names))
        assert response.status_code == 202, response.json()
    for batch_id in IngestBatch.objects.filter(project=created.project).values_list("pk", flat=True):
        batch_process(batch_id=batch_id)
    return created.project


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--npm-dir", type=Path, default=Path(tempfile.gettempdir()) / "mcp-npm")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from _stack import scratch_database

    with tempfile.TemporaryDirectory() as work, scratch_database() as database_url:
        played = anyio.run(play, args.sessions, args.seed, Path(work), args.npm_dir)
        servers = sorted({call.server for task in played for turn in task.turns for call in turn})
        calls = [call for task in played for turn in task.turns for call in turn]
        print(f"played {len(played)} sessions, {len(calls)} calls on {', '.join(servers)} "
              f"({sum(call.failed for call in calls)} failed)")
        os.environ.update(DATABASE_URL=database_url, TOOLSCOPE_ENV="development", LOG_LEVEL="WARNING",
                          DJANGO_SETTINGS_MODULE="toolscope.settings")
        os.environ.pop("CELERY_BROKER_URL", None)
        import django

        django.setup()
        from django.core.management import call_command
        from django.test.utils import setup_test_environment

        setup_test_environment()
        call_command("migrate", verbosity=0)
        project = record(played)
        report(project)


def report(project: Any) -> None:
    from toolscope.policies.services.recommendations import policy_recommendations
    from toolscope.telemetry.models import Session, ToolCall

    print(f"stored {Session.objects.filter(project=project).count()} sessions, "
          f"{ToolCall.objects.filter(project=project).count()} calls "
          f"({ToolCall.objects.filter(project=project).exclude(status='ok').count()} not ok)")
    found = policy_recommendations(project=project, days=8, limit=5000)
    print(f"learnt on {found['fit']} sessions, scored on {found['held_out']}\n")
    print("| candidate (Pareto front) | schema tokens saved | net saved | hard misses | recoverable misses |")
    print("| --- | ---: | ---: | ---: | ---: |")
    rows = {row["name"]: row for row in found["candidates"]}
    for name in found["front"]:  # by hard-miss rate
        row = rows[name]
        mark = " **(recommended)**" if name == found["recommended"] else ""
        print(f"| {name}{mark} | {row['saved_share']:.1%} | {row['net_saved_share']:.1%} | "
              f"{row['hard_miss_rate']:.1%} ({row['hard_misses']}) | {row['recoverable_miss_rate']:.1%} |")
    searching = [row for row in found["candidates"] if row["selection"]["mode"] == "tool_search"]
    if searching:
        best = min(searching, key=lambda row: (row["hard_miss_rate"], -row["net_saved_share"]))
        print(f"\nleast-missing tool_search candidate ({best['name']}): {best['saved_share']:.1%} saved, "
              f"{best['hard_miss_rate']:.1%} hard misses, {best['recoverable_miss_rate']:.1%} recoverable")


if __name__ == "__main__":
    main()
