"""The demo catalog: about forty tools a coding agent sees, with schemas shaped like real ones.

Sources follow the usual mix: local tools built into the agent, plus two MCP servers whose tools
are prefixed by server name. The descriptions are as wordy as real ones on purpose: their size is
what toolscope measures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Schema = dict[str, Any]


@dataclass(frozen=True)
class DemoTool:
    name: str
    description: str
    input_schema: Schema
    source: str = "local"
    scope: str = "read_only"
    requires_approval: bool = False
    redact: tuple[str, ...] = field(default_factory=tuple)


def _str(description: str, **extra: Any) -> Schema:
    return {"type": "string", "description": description, **extra}


def _int(description: str, **extra: Any) -> Schema:
    return {"type": "integer", "description": description, **extra}


def _bool(description: str, default: bool = False) -> Schema:
    return {"type": "boolean", "description": description, "default": default}


def _list(items: Schema, description: str) -> Schema:
    return {"type": "array", "items": items, "description": description}


def _obj(properties: dict[str, Schema], required: tuple[str, ...] = (), description: str = "") -> Schema:
    schema: Schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    if description:
        schema["description"] = description
    return schema


_PATH = _str("Path of the file, relative to the repository root or absolute.")
_REPO = _str("Repository as owner/name, e.g. acme/shopfront.")

FILE_TOOLS = (
    DemoTool("read_file", "Reads a file from the local filesystem. Returns the content with line numbers "
             "(cat -n format). By default reads up to 2000 lines from the start; use offset and limit "
             "for long files. Lines longer than 2000 characters are truncated.",
             _obj({"path": _PATH, "offset": _int("Line number to start reading from.", minimum=1),
                   "limit": _int("Number of lines to read.", minimum=1, maximum=2000)}, ("path",))),
    DemoTool("write_file", "Writes a file to the local filesystem, overwriting it if it exists. Prefer "
             "edit_file for changes to existing files. Never create documentation files unless asked.",
             _obj({"path": _PATH, "content": _str("The full content to write.")}, ("path", "content")),
             scope="write"),
    DemoTool("edit_file", "Performs an exact string replacement in a file. old_string must match the file "
             "exactly, including indentation, and be unique unless replace_all is set. Read the file "
             "first; edits to unread files fail.",
             _obj({"path": _PATH, "old_string": _str("The text to replace."),
                   "new_string": _str("The replacement text; must differ from old_string."),
                   "replace_all": _bool("Replace every occurrence of old_string.")},
                  ("path", "old_string", "new_string")), scope="write"),
    DemoTool("multi_edit", "Applies several edits to one file atomically, in order. Each edit has the "
             "same rules as edit_file. Either all edits apply or none.",
             _obj({"path": _PATH, "edits": _list(_obj({"old_string": _str("Text to replace."),
                                                      "new_string": _str("Replacement."),
                                                      "replace_all": _bool("Replace all.")},
                                                     ("old_string", "new_string")), "Edits in order.")},
                  ("path", "edits")), scope="write"),
    DemoTool("list_dir", "Lists files and directories under a path, one level deep, with sizes. Ignores "
             "entries matching the ignore globs. Prefer glob or grep when you know what to look for.",
             _obj({"path": _str("Absolute or relative directory path."),
                   "ignore": _list(_str("Glob pattern."), "Glob patterns to ignore.")}, ("path",))),
    DemoTool("glob", "Fast file pattern matching for any codebase size. Supports patterns like "
             "'**/*.py' or 'src/**/*.ts'. Returns matching paths sorted by modification time.",
             _obj({"pattern": _str("Glob pattern to match files against."),
                   "path": _str("Directory to search in; defaults to the working directory.")}, ("pattern",))),
    DemoTool("grep", "Searches file contents with ripgrep regular expressions. Filter files with glob or "
             "type. output_mode 'content' shows matching lines, 'files_with_matches' only paths, "
             "'count' match counts.",
             _obj({"pattern": _str("Regular expression to search for."),
                   "path": _str("File or directory to search in."),
                   "glob": _str("Glob to filter files, e.g. '*.py'."),
                   "type": _str("File type, e.g. py, js, rust."),
                   "output_mode": _str("What to show.", enum=["content", "files_with_matches", "count"]),
                   "context": _int("Lines of context around each match.", minimum=0, maximum=20),
                   "case_insensitive": _bool("Ignore case."),
                   "head_limit": _int("Show only the first N results.", minimum=1)}, ("pattern",))),
    DemoTool("delete_file", "Deletes a file. Fails for directories and for files outside the workspace.",
             _obj({"path": _PATH}, ("path",)), scope="write", requires_approval=True),
    DemoTool("move_file", "Moves or renames a file within the workspace, creating parent directories.",
             _obj({"source": _str("Current path."), "destination": _str("New path."),
                   "overwrite": _bool("Replace an existing destination.")}, ("source", "destination")),
             scope="write"),
    DemoTool("notebook_edit", "Replaces, inserts or deletes a cell of a Jupyter notebook (.ipynb).",
             _obj({"notebook_path": _str("Absolute path of the notebook."),
                   "cell_id": _str("Id of the cell to edit."),
                   "new_source": _str("New source of the cell."),
                   "cell_type": _str("Cell type.", enum=["code", "markdown"]),
                   "edit_mode": _str("Operation.", enum=["replace", "insert", "delete"])},
                  ("notebook_path", "new_source")), scope="write"),
)

GIT_TOOLS = (
    DemoTool("git_status", "Shows the working tree status: staged, unstaged and untracked files, and the "
             "current branch with its upstream.",
             _obj({"short": _bool("Use the short format.", True)})),
    DemoTool("git_diff", "Shows changes between the working tree, the index and commits.",
             _obj({"staged": _bool("Show staged changes instead of unstaged."),
                   "ref": _str("Compare against this commit or branch."),
                   "paths": _list(_str("Path."), "Limit the diff to these paths."),
                   "stat": _bool("Show only a diffstat.")})),
    DemoTool("git_log", "Shows the commit log, newest first.",
             _obj({"max_count": _int("Number of commits.", minimum=1, maximum=200, default=20),
                   "path": _str("Only commits touching this path."),
                   "author": _str("Only commits by this author."),
                   "since": _str("Only commits after this date, e.g. '2 weeks ago'."),
                   "oneline": _bool("One line per commit.", True)})),
    DemoTool("git_commit", "Records staged changes (or the given paths) with a message. Follow the "
             "repository's commit message conventions; never amend pushed commits.",
             _obj({"message": _str("The commit message."),
                   "paths": _list(_str("Path."), "Stage these paths before committing."),
                   "amend": _bool("Amend the previous commit.")}, ("message",)),
             scope="write", requires_approval=True),
    DemoTool("git_branch", "Lists, creates or deletes branches.",
             _obj({"action": _str("What to do.", enum=["list", "create", "delete"]),
                   "name": _str("Branch name for create and delete."),
                   "start_point": _str("Commit to start a new branch from.")}, ("action",)), scope="write"),
    DemoTool("git_checkout", "Switches branches or restores working tree files.",
             _obj({"target": _str("Branch, commit or path."),
                   "create": _bool("Create the branch (-b).")}, ("target",)), scope="write"),
    DemoTool("git_blame", "Shows which commit and author last modified each line of a file.",
             _obj({"path": _PATH, "start_line": _int("First line.", minimum=1),
                   "end_line": _int("Last line.", minimum=1)}, ("path",))),
    DemoTool("git_stash", "Stashes or restores uncommitted changes.",
             _obj({"action": _str("Stash operation.", enum=["push", "pop", "list", "drop"]),
                   "message": _str("Message for push.")}, ("action",)), scope="write"),
    DemoTool("git_push", "Pushes the current branch to its remote. Never force-push to main.",
             _obj({"remote": _str("Remote name.", default="origin"), "branch": _str("Branch to push."),
                   "force": _bool("Force-push with lease."),
                   "set_upstream": _bool("Set upstream tracking.")}), scope="write", requires_approval=True),
)

SHELL_TOOLS = (
    DemoTool("bash", "Executes a bash command in a persistent shell session with an optional timeout. "
             "Quote paths with spaces. Avoid find, grep, cat, head and tail: use the dedicated tools. "
             "Output longer than 30000 characters is truncated. Commands that modify state may ask the "
             "user for approval.",
             _obj({"command": _str("The command to execute."),
                   "description": _str("Five to ten words saying what the command does."),
                   "timeout_ms": _int("Timeout in milliseconds.", minimum=1000, maximum=600000),
                   "run_in_background": _bool("Run without waiting; read output with bash_output."),
                   "env": {"type": "object", "additionalProperties": {"type": "string"},
                           "description": "Extra environment variables."}}, ("command",)),
             scope="write", requires_approval=True, redact=("env",)),
    DemoTool("bash_output", "Reads new output of a background shell started with run_in_background.",
             _obj({"shell_id": _str("Id of the background shell."),
                   "filter": _str("Regex: only return matching lines.")}, ("shell_id",))),
    DemoTool("kill_shell", "Stops a background shell by id.",
             _obj({"shell_id": _str("Id of the background shell.")}, ("shell_id",)), scope="write"),
)

TEST_TOOLS = (
    DemoTool("run_tests", "Runs the project's test suite (pytest) or a subset and returns the report. "
             "Prefer running the narrowest selection that covers the change.",
             _obj({"target": _str("Test path, file::test id, or directory; defaults to all tests."),
                   "keyword": _str("Only tests matching this -k expression."),
                   "fail_fast": _bool("Stop at the first failure (-x)."),
                   "verbose": _bool("Verbose output (-v)."),
                   "extra_args": _list(_str("Argument."), "Extra pytest arguments.")})),
    DemoTool("coverage_report", "Runs the tests under coverage and returns per-file line coverage.",
             _obj({"paths": _list(_str("Path."), "Only report on these paths."),
                   "fail_under": _int("Fail below this percentage.", minimum=0, maximum=100)})),
    DemoTool("lint", "Runs the configured linters (ruff, mypy) on paths and returns the findings.",
             _obj({"paths": _list(_str("Path."), "Paths to check; defaults to the whole project."),
                   "fix": _bool("Apply safe automatic fixes."),
                   "tools": _list(_str("Linter.", enum=["ruff", "mypy"]), "Linters to run.")}), scope="write"),
)

WEB_TOOLS = (
    DemoTool("web_search", "Searches the web and returns result titles, URLs and snippets. Use for "
             "documentation, changelogs and error messages newer than your knowledge.",
             _obj({"query": _str("The search query.", minLength=2),
                   "allowed_domains": _list(_str("Domain."), "Only include results from these domains."),
                   "blocked_domains": _list(_str("Domain."), "Never include results from these domains."),
                   "max_results": _int("Number of results.", minimum=1, maximum=20)}, ("query",))),
    DemoTool("web_fetch", "Fetches a URL and returns its main content converted to markdown. HTTP is "
             "upgraded to HTTPS. Results may be summarised if the page is very large.",
             _obj({"url": _str("The URL to fetch.", format="uri"),
                   "prompt": _str("What to extract from the page."),
                   "headers": {"type": "object", "additionalProperties": {"type": "string"},
                               "description": "Extra request headers."}}, ("url",)), redact=("headers",)),
)

_SQL = _str("A single SQL statement.")
DATABASE_TOOLS = (
    DemoTool("sql_query", "Runs a read-only SQL query against the development database (PostgreSQL) and "
             "returns rows as a table. Statements that write are rejected; results are capped at "
             "max_rows.",
             _obj({"query": _SQL, "params": _list({"type": ["string", "number", "boolean", "null"]},
                                                 "Positional parameters for %s placeholders."),
                   "max_rows": _int("Row cap.", minimum=1, maximum=1000, default=100)}, ("query",)),
             redact=("params",)),
    DemoTool("describe_table", "Shows a table's columns, types, defaults, indexes and foreign keys.",
             _obj({"table": _str("Table name, optionally schema-qualified.")}, ("table",))),
    DemoTool("list_tables", "Lists the tables of a schema with estimated row counts and sizes.",
             _obj({"schema": _str("Schema name.", default="public")})),
    DemoTool("explain_query", "Shows the query plan of a SQL statement, optionally with EXPLAIN ANALYZE.",
             _obj({"query": _SQL, "analyze": _bool("Run the query to get actual timings.")}, ("query",))),
)

_PAGING = {"per_page": _int("Results per page.", minimum=1, maximum=100, default=30),
           "page": _int("Page number.", minimum=1, default=1)}
GITHUB = "mcp:github"
GITHUB_TOOLS = (
    DemoTool("github_create_issue", "Create a new issue in a GitHub repository.",
             _obj({"repo": _REPO, "title": _str("Issue title."), "body": _str("Issue body, markdown."),
                   "labels": _list(_str("Label."), "Labels to add."),
                   "assignees": _list(_str("Login."), "Users to assign.")}, ("repo", "title")),
             source=GITHUB, scope="write"),
    DemoTool("github_list_issues", "List issues in a GitHub repository, with filters.",
             _obj({"repo": _REPO, "state": _str("Issue state.", enum=["open", "closed", "all"]),
                   "labels": _list(_str("Label."), "Only issues with all these labels."),
                   "sort": _str("Sort field.", enum=["created", "updated", "comments"]), **_PAGING},
                  ("repo",)), source=GITHUB),
    DemoTool("github_list_pull_requests", "List pull requests in a GitHub repository.",
             _obj({"repo": _REPO, "state": _str("PR state.", enum=["open", "closed", "all"]),
                   "base": _str("Filter by base branch."), "head": _str("Filter by head user:branch."),
                   **_PAGING}, ("repo",)), source=GITHUB),
    DemoTool("github_get_pull_request", "Get a pull request with its description, status checks, "
             "reviews and changed files.",
             _obj({"repo": _REPO, "number": _int("Pull request number.", minimum=1),
                   "include": _list(_str("Part.", enum=["files", "reviews", "checks", "comments"]),
                                    "Extra parts to include.")}, ("repo", "number")), source=GITHUB),
    DemoTool("github_get_file_contents", "Get the contents of a file or directory from a GitHub "
             "repository at a ref.",
             _obj({"repo": _REPO, "path": _str("Path in the repository."),
                   "ref": _str("Branch, tag or commit SHA; defaults to the default branch.")},
                  ("repo", "path")), source=GITHUB),
    DemoTool("github_create_pull_request", "Create a pull request from a pushed branch.",
             _obj({"repo": _REPO, "title": _str("PR title."), "body": _str("PR description, markdown."),
                   "head": _str("Branch with the changes."), "base": _str("Branch to merge into."),
                   "draft": _bool("Open as draft.")}, ("repo", "title", "head", "base")),
             source=GITHUB, scope="write", requires_approval=True),
    DemoTool("github_add_comment", "Add a comment to an issue or pull request.",
             _obj({"repo": _REPO, "number": _int("Issue or PR number.", minimum=1),
                   "body": _str("Comment, markdown.")}, ("repo", "number", "body")),
             source=GITHUB, scope="write"),
    DemoTool("github_search_code", "Search code across GitHub repositories with GitHub's code search "
             "syntax (e.g. 'repo:acme/shopfront language:python Invoice').",
             _obj({"query": _str("Search query."), **_PAGING}, ("query",)), source=GITHUB),
)

LINEAR = "mcp:linear"
_PRIORITY = _int("0 none, 1 urgent, 2 high, 3 medium, 4 low.", minimum=0, maximum=4)
LINEAR_TOOLS = (
    DemoTool("linear_create_issue", "Create a Linear issue in a team.",
             _obj({"team": _str("Team key, e.g. SHOP."), "title": _str("Issue title."),
                   "description": _str("Markdown description."), "priority": _PRIORITY,
                   "labels": _list(_str("Label name."), "Labels."),
                   "project": _str("Project name.")}, ("team", "title")), source=LINEAR, scope="write"),
    DemoTool("linear_search_issues", "Search Linear issues by text and filters.",
             _obj({"query": _str("Text to search in titles and descriptions."),
                   "filter": _obj({"state": _str("Workflow state, e.g. 'In Progress'."),
                                   "assignee": _str("Assignee email or 'me'."),
                                   "team": _str("Team key.")}, description="Structured filters."),
                   "limit": _int("Maximum results.", minimum=1, maximum=50, default=10)})
             , source=LINEAR),
    DemoTool("linear_get_issue", "Get a Linear issue by identifier, with comments and attachments.",
             _obj({"id": _str("Issue identifier, e.g. SHOP-142.", pattern="^[A-Z]+-[0-9]+$")}, ("id",)),
             source=LINEAR),
    DemoTool("linear_update_issue", "Update a Linear issue's state, assignee, priority or fields.",
             _obj({"id": _str("Issue identifier."), "state": _str("New workflow state."),
                   "assignee": _str("Assignee email."), "priority": _PRIORITY,
                   "title": _str("New title."), "description": _str("New description.")}, ("id",)),
             source=LINEAR, scope="write"),
)

# The agent's own search tool (docs/policy.md): it answers from the catalog with toolscope's engine,
# and what it finds is sent from the next turn on. The published policies keep it always on.
SEARCH_TOOLS = (
    DemoTool("tool_search", "Finds tools that are not loaded yet. Describe the capability you need "
             "(e.g. 'open a pull request', 'slow SQL query plan'); the best matches are listed with their "
             "parameters and can be called from the next turn on.",
             _obj({"query": _str("What the tool should do, in a few words.", minLength=2),
                   "top_k": _int("How many tools to list.", minimum=1, maximum=20)}, ("query",))),
)

CATALOG: tuple[DemoTool, ...] = (
    FILE_TOOLS + GIT_TOOLS + SHELL_TOOLS + TEST_TOOLS + WEB_TOOLS + DATABASE_TOOLS + GITHUB_TOOLS + LINEAR_TOOLS
    + SEARCH_TOOLS
)
TOOLS_BY_NAME: dict[str, DemoTool] = {tool.name: tool for tool in CATALOG}

# The policy's groups and the rules that select them from the task message (policy.py publishes them).
GROUPS: dict[str, tuple[str, ...]] = {
    "git": tuple(t.name for t in GIT_TOOLS),
    "testing": ("run_tests", "coverage_report", "lint"),
    "web": ("web_search", "web_fetch"),
    "database": tuple(t.name for t in DATABASE_TOOLS),
    "github": tuple(t.name for t in GITHUB_TOOLS),
    "linear": tuple(t.name for t in LINEAR_TOOLS),
}
CONTEXT_RULES: tuple[tuple[str, tuple[str, ...], str, tuple[str, ...]], ...] = (
    # (name, keywords, regex, groups)
    ("tests", ("test", "tests", "failing", "flaky", "pytest", "coverage"), "", ("testing",)),
    ("version control", ("commit", "branch", "rebase", "diff", "merge"), "", ("git",)),
    ("github", ("github", "pr", "pull", "issue", "review"), r"#\d+", ("github", "git")),
    ("tickets", ("linear", "ticket"), r"\b[A-Z]{2,6}-\d+\b", ("linear",)),
    ("database", ("sql", "query", "migration", "index", "table", "slow"), "", ("database",)),
    ("research", ("docs", "documentation", "upgrade", "deprecation", "changelog"), "", ("web",)),
)
