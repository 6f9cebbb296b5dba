"""Calls that go wrong before the tool runs: unknown tools, invalid arguments, denied approvals."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolscope.telemetry.demo.calls import CallResult
from toolscope.telemetry.demo.catalog import DemoTool
from toolscope.telemetry.demo.tasks import SessionState

# Names models invent: tools of other agents (str_replace_editor, python) or of an MCP server the
# agent does not have loaded (github_get_issue).
_UNKNOWN: tuple[tuple[str, Callable[[SessionState], dict[str, Any]]], ...] = (
    ("str_replace_editor", lambda s: {"command": "view", "path": s.task.focus}),
    ("search_files", lambda s: {"query": s.task.focus.rsplit("/", 1)[1].removesuffix(".py")}),
    ("run_command", lambda s: {"cmd": f"pytest {s.task.test} -q"}),
    ("view_file", lambda s: {"path": s.task.test}),
    ("python", lambda s: {"code": "import django; print(django.get_version())"}),
    ("github_get_issue", lambda s: {"repo": "acme/shopfront", "number": 497}),
    ("todo_write", lambda s: {"todos": [{"content": s.task.message[:60], "status": "in_progress"}]}),
)
_DESTRUCTIVE = (
    "rm -rf .venv && python -m venv .venv && pip install -e '.[dev]'",
    "git push --force origin HEAD:main",
    "docker system prune -af --volumes",
    "git reset --hard origin/main",
)
DENIED_OUTPUT = "The user doesn't want to proceed with this tool use. The tool use was rejected."


def unknown_tool(state: SessionState) -> tuple[str, CallResult]:
    name, arguments = state.rng.choice(_UNKNOWN)
    message = f"Error: No such tool available: {name}"
    return name, CallResult(arguments(state), message, "unknown_tool", message, duration_ms=0.1)


def schema_error(state: SessionState, tool: DemoTool, result: CallResult) -> CallResult:
    """The call as the model sent it: a required argument missing, or one the schema forbids."""
    arguments = dict(result.arguments)
    required = [key for key in tool.input_schema.get("required", []) if key in arguments]
    if required and state.rng.random() < 0.7:
        missing = state.rng.choice(required)
        del arguments[missing]
        issue = f"The required parameter `{missing}` is missing"
    else:
        arguments["recursive"] = True
        issue = "An unexpected parameter `recursive` was provided"
    message = f"InputValidationError: {tool.name} failed due to the following issue:\n{issue}"
    return CallResult(arguments, message, "schema_error", message, duration_ms=0.2)


def denied(state: SessionState, tool: DemoTool, result: CallResult) -> CallResult:
    arguments = dict(result.arguments)
    if tool.name == "bash":
        # What users refuse in practice: the destructive commands.
        arguments = {"command": state.rng.choice(_DESTRUCTIVE), "description": "Reset the environment"}
    waited = round(state.rng.uniform(1500, 45000), 1)  # the time a person took to answer
    return CallResult(arguments, DENIED_OUTPUT, "denied", "Denied by the user.", duration_ms=waited)
