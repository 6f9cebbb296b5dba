"""Arguments and outputs of the MCP servers' tools: GitHub and Linear.

MCP servers answer with pretty-printed JSON of their upstream API, which is why their outputs are
large for what they say; the demo keeps that shape.
"""

from __future__ import annotations

import json
import random
import re
from datetime import timedelta
from typing import Any

from toolscope.telemetry.demo import repo
from toolscope.telemetry.demo.calls import Builder, CallResult
from toolscope.telemetry.demo.tasks import SessionState

_PR_TITLES = ("Fix VAT rounding for Austria", "Cursor pagination for products", "Bump stripe to 11.3",
              "Cache carrier rates per zone", "Split accounts.auth into tokens and passwords",
              "Speed up orders list (select_related customer)", "Retry Stripe webhooks with backoff",
              "Add refund_reason to orders", "Upgrade celery to 5.4", "Flaky test: search ranking ties")
_USERS = ("mkowalski", "jdoe", "priya-s", "tbauer", "renovate[bot]", "alopez")
_LINEAR_STATES = ("Backlog", "Todo", "In Progress", "In Review", "Done")


def _iso(state: SessionState, days_ago: float) -> str:
    return (state.started_at - timedelta(days=days_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _json(value: Any) -> str:
    return json.dumps(value, indent=2)


def _ms(rng: random.Random) -> float:
    return round(rng.uniform(180, 1600), 1)


def _pull(state: SessionState, number: int, rng: random.Random) -> dict[str, Any]:
    title = _PR_TITLES[number % len(_PR_TITLES)]
    head = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
    return {
        "number": number, "title": title, "state": "open", "draft": rng.random() < 0.2,
        "user": {"login": rng.choice(_USERS), "type": "User"},
        "html_url": f"https://github.com/{repo.REPO}/pull/{number}",
        "head": {"ref": head, "sha": f"{rng.getrandbits(160):040x}"}, "base": {"ref": "main"},
        "labels": [{"name": name} for name in rng.sample(("bug", "billing", "dependencies", "perf"), 2)],
        "requested_reviewers": [{"login": rng.choice(_USERS)}],
        "created_at": _iso(state, rng.uniform(1, 20)), "updated_at": _iso(state, rng.uniform(0, 1)),
        "mergeable_state": rng.choice(("clean", "blocked", "behind", "unstable")),
    }


def github_list_pull_requests(state: SessionState) -> CallResult:
    # The same open pull requests for every session on a given day: seeded by name, not by session.
    rng = random.Random(repo.stable_seed("pulls", state.started_at.date()))
    pulls = [_pull(state, number, rng) for number in range(520, 520 - rng.randint(6, 11), -1)]
    return CallResult({"repo": repo.REPO, "state": "open", "per_page": 30}, _json(pulls), duration_ms=_ms(state.rng))


def github_get_pull_request(state: SessionState) -> CallResult:
    rng = state.rng
    number = rng.randint(505, 520)
    arguments = {"repo": repo.REPO, "number": number, "include": ["files", "checks"]}
    if rng.random() < 0.06:
        error = f"404 Not Found: GET https://api.github.com/repos/{repo.REPO}/pulls/{number + 400}"
        arguments["number"] = number + 400
        return CallResult(arguments, error, "error", error, _ms(rng))
    pull = _pull(state, number, random.Random(repo.stable_seed("pull", number)))
    pull["body"] = f"Closes SHOP-{1200 + number % 300}.\n\n## What\n{pull['title']}.\n\n## Testing\n- pytest -q"
    pull["files"] = [{"filename": path, "status": "modified", "additions": 3, "deletions": 1,
                      "patch": repo.diff(path, 1).split("\n", 4)[-1]}
                     for path in rng.sample(sorted(repo.SOURCE_FILES), 3)]
    pull["checks"] = [{"name": name, "conclusion": rng.choice(("success", "success", "failure"))}
                      for name in ("lint", "tests (3.12)", "build")]
    return CallResult(arguments, _json(pull), duration_ms=_ms(rng))


def github_get_file_contents(state: SessionState) -> CallResult:
    path = state.task.focus
    text = repo.file_text(path)
    content = {"type": "file", "name": path.rsplit("/", 1)[1], "path": path, "size": len(text),
               "sha": f"{repo.stable_seed(path):08x}", "encoding": "utf-8", "content": text,
               "html_url": f"https://github.com/{repo.REPO}/blob/main/{path}"}
    return CallResult({"repo": repo.REPO, "path": path, "ref": "main"}, _json(content), duration_ms=_ms(state.rng))


def github_list_issues(state: SessionState) -> CallResult:
    rng = random.Random(repo.stable_seed("issues", state.started_at.date()))
    issues = [{"number": n, "title": f"{rng.choice(('Bug', 'Regression', 'Crash'))}: {title.lower()}",
               "state": "open", "labels": [{"name": "bug"}], "comments": rng.randint(0, 12),
               "user": {"login": rng.choice(_USERS)}, "created_at": _iso(state, rng.uniform(2, 60)),
               "html_url": f"https://github.com/{repo.REPO}/issues/{n}"}
              for n, title in zip(range(498, 480, -2), _PR_TITLES, strict=False)]
    return CallResult({"repo": repo.REPO, "state": "open", "labels": ["bug"]}, _json(issues),
                      duration_ms=_ms(state.rng))


def github_create_issue(state: SessionState) -> CallResult:
    number = state.rng.randint(521, 560)
    title = f"Flaky: {state.task.test}"
    created = {"number": number, "title": title, "state": "open",
               "html_url": f"https://github.com/{repo.REPO}/issues/{number}"}
    arguments = {"repo": repo.REPO, "title": title, "labels": ["bug", "flaky-test"],
                 "body": f"Seen on CI for {state.task.branch}. Fails about 1 in 5 runs."}
    return CallResult(arguments, _json(created), duration_ms=_ms(state.rng))


def github_create_pull_request(state: SessionState) -> CallResult:
    number = state.rng.randint(521, 560)
    title = state.task.message.split(".")[0][:70]
    arguments = {"repo": repo.REPO, "title": title, "head": state.task.branch, "base": "main",
                 "body": f"{state.task.message}\n\nFiles: {', '.join(state.edited) or 'none'}"}
    created = {"number": number, "state": "open", "draft": False,
               "html_url": f"https://github.com/{repo.REPO}/pull/{number}"}
    return CallResult(arguments, _json(created), duration_ms=_ms(state.rng))


def github_add_comment(state: SessionState) -> CallResult:
    number = state.rng.randint(505, 520)
    body = "The failing check is `tests (3.12)`: the rounding test expects per-line rounding."
    comment = {"id": state.rng.getrandbits(31), "body": body,
               "html_url": f"https://github.com/{repo.REPO}/pull/{number}#issuecomment-2451"}
    return CallResult({"repo": repo.REPO, "number": number, "body": body}, _json(comment), duration_ms=_ms(state.rng))


def _linear_issue(state: SessionState, key: str, rng: random.Random) -> dict[str, Any]:
    return {"identifier": key, "title": rng.choice(_PR_TITLES), "state": {"name": rng.choice(_LINEAR_STATES)},
            "priority": rng.randint(1, 4), "assignee": {"email": f"{rng.choice(_USERS)}@acme.dev"},
            "url": f"https://linear.app/acme/issue/{key.lower()}", "updatedAt": _iso(state, rng.uniform(0, 9))}


def linear_search_issues(state: SessionState) -> CallResult:
    rng = random.Random(repo.stable_seed("linear", state.task.kind))
    issues = [_linear_issue(state, f"SHOP-{rng.randint(1200, 1499)}", rng) for _ in range(rng.randint(3, 8))]
    arguments = {"query": state.task.kind.replace("_", " "), "filter": {"team": "SHOP"}, "limit": 10}
    return CallResult(arguments, _json({"issues": issues}), duration_ms=_ms(state.rng))


def linear_get_issue(state: SessionState) -> CallResult:
    key = re.search(r"SHOP-\d+", state.task.message)
    identifier = key.group(0) if key else f"SHOP-{state.rng.randint(1200, 1499)}"
    issue = _linear_issue(state, identifier, random.Random(repo.stable_seed(identifier)))
    issue["description"] = ("Austrian invoices must round VAT per line item, not on the total.\n\n"
                            "Acceptance criteria:\n- totals match the tax office calculator\n"
                            "- existing invoices are not renumbered")
    issue["comments"] = [{"user": "tbauer", "body": "Customer support has 14 tickets about this."}]
    return CallResult({"id": identifier}, _json(issue), duration_ms=_ms(state.rng))


def linear_create_issue(state: SessionState) -> CallResult:
    identifier = f"SHOP-{state.rng.randint(1500, 1599)}"
    arguments = {"team": "SHOP", "title": f"Flaky test in {state.task.test}", "priority": 3, "labels": ["bug"]}
    created = {"success": True, "issue": {"identifier": identifier,
                                          "url": f"https://linear.app/acme/issue/{identifier.lower()}"}}
    return CallResult(arguments, _json(created), duration_ms=_ms(state.rng))


MCP_BUILDERS: dict[str, Builder] = {
    "github_list_pull_requests": github_list_pull_requests, "github_get_pull_request": github_get_pull_request,
    "github_get_file_contents": github_get_file_contents, "github_list_issues": github_list_issues,
    "github_create_issue": github_create_issue, "github_create_pull_request": github_create_pull_request,
    "github_add_comment": github_add_comment, "linear_search_issues": linear_search_issues,
    "linear_get_issue": linear_get_issue, "linear_create_issue": linear_create_issue,
}
