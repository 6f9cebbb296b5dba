"""What the demo agent is asked to do, and what it remembers while doing it.

A task has a kind; the kind shifts which tools the agent reaches for (a slow-query task uses the
database tools, a PR review the GitHub ones), which gives the catalog its long tail.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime

from toolscope.telemetry.demo import repo


@dataclass(frozen=True)
class Task:
    kind: str
    message: str
    focus: str  # the source file the task is about
    test: str  # the test file that covers it
    branch: str


@dataclass
class SessionState:
    """What a session has done so far: edits change later reads, earlier reads can repeat."""

    rng: random.Random
    task: Task
    started_at: datetime
    versions: dict[str, int] = field(default_factory=dict)
    reads: list[str] = field(default_factory=list)
    commits: int = 0
    legacy_line: int = 1  # where the next page of the legacy module starts (long sessions)

    def version(self, path: str) -> int:
        return self.versions.get(path, 0)

    @property
    def edited(self) -> list[str]:
        return sorted(path for path, version in self.versions.items() if version)


# kind -> message templates. {test}, {name}, {focus}, {symbol}, {issue}, {pr} are filled per task.
_MESSAGES: dict[str, tuple[str, ...]] = {
    "fix_test": (
        "Fix the failing test in {test}::{name}",
        ("CI is red on main: {test} fails with an AssertionError. Find the cause and fix it, don't just "
        "change the assertion."),
        "{name} is flaky on CI (fails about 1 in 5 runs). Figure out why and make it deterministic.",
    ),
    "feature": (
        ("Add cursor pagination to the product list endpoint in src/shopfront/catalog/views.py; keep "
        "page-number pagination working for old clients."),
        "Add a refund_reason field to orders, expose it in the orders API and cover it with tests.",
        "Cache carrier rates in {focus} for 10 minutes per (carrier, zone) and add tests.",
        "Add an `--dry-run` option to the invoice export task in src/shopfront/tasks.py.",
    ),
    "refactor": (
        "Rename {symbol} to something clearer and update every caller and test.",
        ("Extract the retry logic in src/shopfront/billing/stripe_client.py into a small helper with "
        "exponential backoff, no behaviour change."),
        "{focus} has grown too big. Split it without changing behaviour; tests must stay green.",
    ),
    "database": (
        "The orders list endpoint is slow (p95 2.3s). Find the N+1 or missing index and fix it.",
        ("Write a SQL query that finds customers with more than 3 refunds in the last 30 days and "
        "add it as a management command."),
        "Check whether billing_invoice has duplicate invoice numbers in the dev database and explain why.",
    ),
    "github": (
        "Review the open pull requests on acme/shopfront and summarise what is blocking #{pr}.",
        "Open a pull request for the current branch with a description of the change and link {issue}.",
        "Go through the issues labelled bug on GitHub and tell me which ones are already fixed on main.",
    ),
    "ticket": (
        "Pick up {issue} from Linear (VAT rounding for Austria) and implement it.",
        "Create a Linear ticket for the flaky test in {test} with what you find, then try to fix it.",
        "What is the status of {issue}? Update the code if the acceptance criteria changed.",
    ),
    "upgrade": (
        "Upgrade Django to 5.1 and fix the deprecation warnings the test run prints.",
        "Bump stripe to v11 and adapt src/shopfront/billing/stripe_client.py to the new API.",
        "Upgrade celery to 5.4 and check the changelog for anything that affects our tasks.",
    ),
    "build": (
        "The docker build fails after the last dependency bump. Fix it.",
        "Set up the dev environment from scratch and make sure the whole test suite passes.",
        "ruff and mypy complain on main after the merge of #{pr}; make lint pass.",
    ),
}
KINDS: tuple[str, ...] = tuple(_MESSAGES)


def task_pick(rng: random.Random, kinds: tuple[str, ...] = KINDS) -> Task:
    kind = rng.choice(kinds)
    test = rng.choice([p for p in repo.SOURCE_FILES if p.startswith("tests/")])
    focus = _source_for(test)
    values = {
        "test": test,
        "name": rng.choice(repo.symbols(test)),
        "focus": focus,
        "symbol": rng.choice(repo.symbols(focus) or ["compute_invoice_total"]),
        "issue": f"SHOP-{rng.randint(1200, 1499)}",
        "pr": str(rng.randint(400, 520)),
    }
    message = rng.choice(_MESSAGES[kind]).format(**values)
    # A message that names a file makes that file the one the agent works on.
    focus = next((p for p in repo.SOURCE_FILES if p in message and p.startswith("src/")), focus)
    branch = f"{kind.replace('_', '-')}/{values['issue'].lower()}"
    return Task(kind=kind, message=message, focus=focus, test=test, branch=branch)


LEGACY_KIND = "legacy"


def legacy_task(rng: random.Random) -> Task:
    """The task of a long session: porting a module too big to read at once, page by page."""
    issue = f"SHOP-{rng.randint(1200, 1499)}"
    message = (f"Port the VAT and discount rules of {repo.LEGACY_PATH} (11,000 lines) into "
               f"src/shopfront/billing/tax.py. Read the whole legacy module first, keep behaviour identical "
               f"and every test green. Ticket {issue}.")
    return Task(kind=LEGACY_KIND, message=message, focus="src/shopfront/billing/tax.py",
                test="tests/billing/test_tax.py", branch=f"legacy/{issue.lower()}")


def _source_for(test: str) -> str:
    """The source module a test file covers, falling back to its package's services."""
    app = test.split("/")[1]
    candidates = [p for p in repo.SOURCE_FILES if p.startswith(f"src/shopfront/{app}/")]
    name = test.rsplit("/test_", 1)[1]
    exact = [p for p in candidates if p.endswith("/" + name)]
    return (exact or candidates or ["src/shopfront/tasks.py"])[0]
