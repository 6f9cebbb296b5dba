"""Arguments and outputs of the local tools (files, git, shell, tests) for one call.

Each builder reads and updates the session's state, so an edit shows up in later reads, diffs
and test runs, and an unchanged file read twice returns the same text twice.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolscope_agent.engine.search import answer_text, search_tools

from toolscope.telemetry.demo import repo, shell
from toolscope.telemetry.demo.catalog import CATALOG
from toolscope.telemetry.demo.tasks import LEGACY_KIND, SessionState


@dataclass
class CallResult:
    arguments: dict[str, Any]
    output: str
    status: str = "ok"
    error: str = ""
    duration_ms: float = 5.0
    retries: int = 0


Builder = Callable[[SessionState], CallResult]


def _ms(rng: random.Random, low: float, high: float) -> float:
    return round(rng.uniform(low, high), 1)


def _path_to_read(state: SessionState) -> str:
    rng, task = state.rng, state.task
    if state.reads and rng.random() < 0.3:
        # Agents re-read files they already have in context, often verbatim.
        return rng.choice(list(dict.fromkeys(state.reads)))
    app_dir = task.focus.rsplit("/", 1)[0] + "/"
    neighbours = [p for p in repo.SOURCE_FILES if p.startswith(app_dir)]
    config = ["pyproject.toml", "docker-compose.yml"] if task.kind in ("upgrade", "build") else ["README.md"]
    return rng.choice([task.focus, task.focus, task.test, *neighbours, *config])


LEGACY_PAGE = 200  # lines per read: a page stays under production's read_file compaction limit


def _legacy_page(state: SessionState) -> CallResult:
    start = state.legacy_line
    state.legacy_line += LEGACY_PAGE
    text = repo.legacy_page(start, LEGACY_PAGE)
    arguments = {"path": repo.LEGACY_PATH, "offset": start, "limit": LEGACY_PAGE}
    return CallResult(arguments, text, duration_ms=_ms(state.rng, 2, 20))


def read_file(state: SessionState) -> CallResult:
    rng = state.rng
    if state.task.kind == LEGACY_KIND and state.legacy_line < repo.legacy_lines() and rng.random() < 0.85:
        return _legacy_page(state)
    if rng.random() < 0.04:
        path = state.task.focus.replace("shopfront/", "shopfront/core/")
        message = f"File does not exist: {path}. Current working directory: {repo.ROOT}"
        return CallResult({"path": path}, message, "error", "File does not exist.", _ms(rng, 0.3, 2))
    path = _path_to_read(state)
    state.reads.append(path)
    text = repo.numbered(repo.file_text(path, state.version(path)))
    return CallResult({"path": path}, text, duration_ms=_ms(rng, 0.8, 14))


def _path_to_edit(state: SessionState) -> str:
    rng, task = state.rng, state.task
    candidates = [task.focus] * 3 + [task.test] + [p for p in state.reads if p in repo.SOURCE_FILES]
    return rng.choice(candidates)


def edit_file(state: SessionState) -> CallResult:
    rng = state.rng
    path = _path_to_edit(state)
    version = state.version(path)
    new_text, old, new = repo.edit(repo.file_text(path, version), version)
    arguments = {"path": path, "old_string": old, "new_string": new}
    if rng.random() < 0.08:
        arguments["old_string"] = old.replace("    ", "  ")  # the classic: wrong indentation
        error = "String to replace not found in file."
        return CallResult(arguments, f"{error}\nString: {arguments['old_string']}", "error", error, _ms(rng, 1, 5))
    state.versions[path] = version + 1
    at = new_text.splitlines().index(new.splitlines()[1]) + 1
    snippet = repo.numbered(new_text, offset=max(1, at - 4), limit=9)
    output = f"The file {path} has been updated. Here's the result of running `cat -n` on a snippet:\n{snippet}"
    return CallResult(arguments, output, duration_ms=_ms(rng, 2, 20))


def multi_edit(state: SessionState) -> CallResult:
    path = _path_to_edit(state)
    version = state.version(path)
    first = repo.edit(repo.file_text(path, version), version)
    second = repo.edit(first[0], version + 1)
    state.versions[path] = version + 2
    edits = [{"old_string": first[1], "new_string": first[2]}, {"old_string": second[1], "new_string": second[2]}]
    return CallResult({"path": path, "edits": edits}, f"Applied 2 edits to {path}",
                      duration_ms=_ms(state.rng, 3, 25))


def write_file(state: SessionState) -> CallResult:
    entity = repo.SOURCE_FILES[state.task.test][0]
    path = state.task.test.replace(".py", f"_regression_{state.rng.randint(2, 9)}.py")
    body = repo.file_text(state.task.test).split("\n\n\n", 1)[-1]
    content = f'"""Regression tests for the {entity} fix."""\n\nimport pytest\n\n\n{body}'
    return CallResult({"path": path, "content": content}, f"File created successfully at: {path}",
                      duration_ms=_ms(state.rng, 2, 10))


def list_dir(state: SessionState) -> CallResult:
    path = state.rng.choice(["src/shopfront", "tests", ".", state.task.focus.rsplit("/", 1)[0]])
    return CallResult({"path": path}, repo.list_dir(path), duration_ms=_ms(state.rng, 1, 6))


def glob(state: SessionState) -> CallResult:
    app = state.task.focus.split("/")[2]
    pattern = state.rng.choice(["**/*.py", "tests/**/test_*.py", f"src/shopfront/{app}/*.py",
                                "**/*.toml", "**/migrations/*.py", f"**/*{app}*"])
    return CallResult({"pattern": pattern}, repo.glob(pattern), duration_ms=_ms(state.rng, 3, 40))


def grep(state: SessionState) -> CallResult:
    rng = state.rng
    symbol = rng.choice(repo.symbols(state.task.focus) or ["compute_invoice_total"])
    pattern = rng.choice([f"def {symbol}", symbol, rf"{symbol}\(", "select_related", "PermissionDenied",
                          r"logger\.info", "TODO|FIXME", r"Decimal\(", "VAT_RATES", "save\\(update_fields"])
    files_only = rng.random() < 0.3
    arguments: dict[str, Any] = {"pattern": pattern, "glob": "*.py"}
    arguments["output_mode"] = "files_with_matches" if files_only else "content"
    output = repo.grep(pattern, glob="*.py", files_only=files_only)
    return CallResult(arguments, output, duration_ms=_ms(rng, 8, 180))


def git_status(state: SessionState) -> CallResult:
    lines = [f"## {state.task.branch}...origin/{state.task.branch}"]
    lines += [f" M {path}" for path in state.edited]
    return CallResult({}, "\n".join(lines), duration_ms=_ms(state.rng, 10, 60))


def git_diff(state: SessionState) -> CallResult:
    output = "\n".join(repo.diff(path, state.version(path)) for path in state.edited)
    return CallResult({}, output, duration_ms=_ms(state.rng, 10, 80))


def git_log(state: SessionState) -> CallResult:
    # The same history for every session: the repository does not change under the demo.
    history = random.Random(repo.stable_seed("git log"))
    subjects = ("Fix VAT rounding for AT", "Add cursor pagination to products", "Bump stripe to 10.12",
                "Cache carrier rates", "Refactor order services", "Fix flaky search test",
                "Add refund reason to orders", "Upgrade celery to 5.4", "Speed up orders list query",
                "Split accounts.auth", "Retry Stripe webhooks with backoff", "Lint: enable ruff B rules")
    lines = [f"{history.getrandbits(28):07x} {subject} (#{520 - n})" for n, subject in enumerate(subjects)]
    return CallResult({"max_count": 10}, "\n".join(lines[:10]), duration_ms=_ms(state.rng, 8, 40))


def git_commit(state: SessionState) -> CallResult:
    state.commits += 1
    message = state.task.message.split(".")[0][:60]
    files = len(state.edited) or 1
    sha = f"{state.rng.getrandbits(28):07x}"
    stat = f"{files} file{'s' * (files > 1)} changed, {files * 2} insertions(+)"
    output = f"[{state.task.branch} {sha}] {message}\n {stat}"
    return CallResult({"message": message, "paths": state.edited}, output, duration_ms=_ms(state.rng, 40, 300))


def git_branch(state: SessionState) -> CallResult:
    branch = state.task.branch
    return CallResult({"action": "create", "name": branch}, f"Created branch '{branch}' from 'main'.",
                      duration_ms=_ms(state.rng, 10, 50))


def git_checkout(state: SessionState) -> CallResult:
    branch = state.task.branch
    return CallResult({"target": branch, "create": True}, f"Switched to a new branch '{branch}'",
                      duration_ms=_ms(state.rng, 20, 150))


def git_push(state: SessionState) -> CallResult:
    branch = state.task.branch
    output = (f"To github.com:{repo.REPO}.git\n * [new branch]      {branch} -> {branch}\n"
              f"branch '{branch}' set up to track 'origin/{branch}'.")
    return CallResult({"remote": "origin", "branch": branch, "set_upstream": True}, output,
                      duration_ms=_ms(state.rng, 800, 3500))


def _failing(state: SessionState) -> int:
    """Failing tests: a fix_test task fails until its source file has been edited."""
    if state.task.kind == "fix_test" and not state.version(state.task.focus):
        return state.rng.randint(1, 2)
    return 1 if state.rng.random() < 0.12 else 0


def run_tests(state: SessionState) -> CallResult:
    rng, task = state.rng, state.task
    target = rng.choice([task.test, task.test, task.test.rsplit("/", 1)[0], ""])
    arguments: dict[str, Any] = {"target": target, "fail_fast": rng.random() < 0.4} if target else {}
    report = shell.pytest_report(rng, target=target, failing=_failing(state), verbose=rng.random() < 0.3)
    # The tool ran: failing tests are its result, not an error of the call.
    return CallResult(arguments, report, duration_ms=_ms(rng, 1500, 45000))


def lint(state: SessionState) -> CallResult:
    output = shell.ruff_log(state.rng) + "\n\n" + shell.mypy_log(state.rng)
    return CallResult({"paths": ["src", "tests"], "tools": ["ruff", "mypy"]}, output,
                      duration_ms=_ms(state.rng, 2000, 15000))


def bash_output(state: SessionState) -> CallResult:
    tail = shell.pytest_report(state.rng, verbose=True).splitlines()[-40:]
    return CallResult({"shell_id": "bash_1"}, "\n".join(tail), duration_ms=_ms(state.rng, 1, 5))


_BASH_BY_KIND: dict[str, tuple[str, ...]] = {
    "fix_test": ("pytest {test} -q", "pytest {test} -x -v", "pytest -q", "git log --oneline -5"),
    "feature": ("pytest {test} -q", "python manage.py makemigrations {app}", "pytest -q", "ls -la {dir}"),
    "refactor": ("pytest -q", "ruff check .", "wc -l {focus}", "pytest {test} -q"),
    "database": ("python manage.py migrate", "python manage.py makemigrations {app}", "pytest {test} -q"),
    "github": ("git log --oneline -5", "gh pr checks", "pytest -q"),
    "ticket": ("pytest {test} -q", "pytest -q", "git log --oneline -5"),
    "upgrade": ("pip install -U 'django>=5.1,<5.2'", "pytest -q -W error::DeprecationWarning",
                "pip list --outdated"),
    "build": ("pip install -e '.[dev]'", "docker compose build web", "ruff check .", "mypy src", "pytest -v"),
    LEGACY_KIND: ("pytest {test} -q", "pytest -q", "ruff check .", "git log --oneline -5"),
}
_BASH_PURPOSE = {"pytest": "Run the tests", "pip": "Install dependencies", "docker": "Build the web image",
                 "ruff": "Lint the project", "mypy": "Type-check the sources", "git": "Show recent commits",
                 "python": "Run a Django management command", "ls": "List the package", "wc": "Count lines",
                 "gh": "Show the checks of the pull request"}


def _bash_run(state: SessionState, command: str) -> tuple[str, int]:
    """The output and exit code of a command, consistent with the session's edits."""
    rng, program = state.rng, command.split()[0]
    if program == "pytest":
        parts = command.split()
        target = parts[1] if len(parts) > 1 and not parts[1].startswith("-") else ""
        failing = _failing(state)
        return shell.pytest_report(rng, target=target, failing=failing, verbose="-v" in parts), int(failing > 0)
    if command.startswith("pip install -e"):
        return shell.pip_install_log(rng), 0
    if command.startswith("pip install"):
        return "\n".join(shell.pip_install_log(rng).splitlines()[3:9]), 0
    if program == "docker":
        broken = state.task.kind == "build" and not state.edited
        tail = "\nERROR: failed to solve: process \"/bin/sh -c pip install -r requirements.txt\" did not complete"
        return shell.docker_build_log(rng) + (tail if broken else ""), int(broken)
    if program in ("ruff", "mypy"):
        return (shell.ruff_log(rng) if program == "ruff" else shell.mypy_log(rng)), 1
    if "migrate" in command:
        return shell.migrate_log(), 0
    return _bash_small(state, command), 0


def _bash_small(state: SessionState, command: str) -> str:
    if "makemigrations" in command:
        app = command.split()[-1]
        return f"Migrations for '{app}':\n  src/shopfront/{app}/migrations/0016_auto.py\n    - Add field refund_reason"
    if command.startswith("git log"):
        return "\n".join(git_log(state).output.splitlines()[:5])
    if command.startswith("wc"):
        return f"  {len(repo.file_text(state.task.focus).splitlines())} {state.task.focus}"
    if command.startswith("ls"):
        return repo.list_dir(state.task.focus.rsplit("/", 1)[0])
    if command.startswith("gh"):
        return "lint\tpass\t41s\ntests\tfail\t3m12s\nbuild\tpass\t1m05s"
    return (
        "Package    Version Latest Type\n---------- ------- ------ -----\n"
        "celery     5.3.6   5.4.0  wheel\nstripe     10.12.0 11.3.0 wheel"
    )


def bash(state: SessionState) -> CallResult:
    rng, task = state.rng, state.task
    template = rng.choice(_BASH_BY_KIND[task.kind])
    command = template.format(test=task.test, focus=task.focus, app=task.focus.split("/")[2],
                              dir=task.focus.rsplit("/", 1)[0])
    arguments: dict[str, Any] = {"command": command, "description": _BASH_PURPOSE[command.split()[0]]}
    if command.split()[0] in ("docker", "pip"):
        arguments["timeout_ms"] = 600_000
    output, exit_code = _bash_run(state, command)
    duration = _ms(rng, 2000, 90000) if len(output) > 2000 else _ms(rng, 30, 1500)
    if exit_code:
        return CallResult(arguments, output, "error", f"Command exited with code {exit_code}", duration)
    return CallResult(arguments, output, duration_ms=duration)


# What the model asks its tool_search tool for, by task kind: the capabilities each task reaches for.
_SEARCH_QUERIES: dict[str, tuple[str, ...]] = {
    "fix_test": ("test coverage of a file", "read the output of a background shell"),
    "feature": ("create a database migration", "open a pull request"),
    "refactor": ("who changed this line", "edit several places of one file"),
    "database": ("slow SQL query plan", "list database tables", "describe table columns"),
    "github": ("open a pull request", "comment on a pull request", "list issues"),
    "ticket": ("linear issue details", "update a ticket state"),
    "upgrade": ("fetch a changelog page", "search the web for a deprecation"),
    "build": ("run the linters", "stop a background shell"),
    LEGACY_KIND: ("test coverage of a file", "who changed this line"),
}
_SEARCH_CATALOG = tuple({"name": t.name, "description": t.description, "input_schema": t.input_schema,
                         "source": t.source} for t in CATALOG)


def tool_search(state: SessionState) -> CallResult:
    """Answered as the SDK answers it: the engine's ranking over the catalog, a line per tool."""
    query = state.rng.choice(_SEARCH_QUERIES[state.task.kind])
    hits = search_tools(_SEARCH_CATALOG, query, top_k=8)
    output = answer_text(hits)
    return CallResult({"query": query}, output, duration_ms=_ms(state.rng, 1, 8))


LOCAL_BUILDERS: dict[str, Builder] = {
    "read_file": read_file, "edit_file": edit_file, "multi_edit": multi_edit, "write_file": write_file,
    "list_dir": list_dir, "glob": glob, "grep": grep, "git_status": git_status, "git_diff": git_diff,
    "git_log": git_log, "git_commit": git_commit, "git_branch": git_branch, "git_checkout": git_checkout,
    "git_push": git_push, "run_tests": run_tests, "lint": lint, "bash_output": bash_output, "bash": bash,
    "tool_search": tool_search,
}
