"""Screenshots of every dashboard page into docs/screenshots/ (run through ./scripts/screenshots).

The demo project is built in a throwaway SQLite database (the embedded default, tasks in-process)
with a fixed seed and anchor, and served by `manage.py runserver` in a child process whose clock
(django.utils.timezone.now, which everything in the service reads) starts at the anchor: "Last 24
hours", "Last 7 days", a simulation of the last 14 days and every "Started" column show the same
data on every run. Debian's Chromium, driven by Playwright, logs in as the demo's admin and shoots
each page in PAGES whole, once its charts are drawn and the network is idle, in a window made as
tall as the page (so sticky bars sit where they belong); pages taller than MAX_HEIGHT are clipped.
docs/screenshots/README.md, the index, is written from PAGES.

Not part of the service: Playwright is a development dependency (requirements-dev.txt).
tests/dashboard/test_screenshots.py checks that every route of dashboard/urls.py is in PAGES or in
EXCLUDED with its reason, and that the committed index matches PAGES.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "screenshots"
SEED = 42
SESSIONS = 300
ANCHOR = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)  # the demo's sessions end before it
CLOCK_START = ANCHOR + timedelta(minutes=5)  # the served clock starts here and runs on
VIEWPORT = {"width": 1366, "height": 900}
MAX_HEIGHT = 4000  # px: taller pages are clipped (the index says so)
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
SLUG = "demo"
OTHER_SLUG = "support-bot"  # a second, empty project: with one, home redirects to its overview
TOOL = "read_file"
MESSAGE = "The tests in tests/api fail since the last commit: find out why and fix it."
# How long a simulation or a recommendation of the demo may take in the in-process runner.
RUN_TIMEOUT_MS = 600_000


@dataclass(frozen=True)
class Page:
    file: str  # docs/screenshots/<file>
    route: str  # the URL name it shows ("dashboard:..." or another app's), for the coverage test
    caption: str  # one line for the index


P = f"/p/{SLUG}"
PAGES: list[Page] = [
    Page("00-login.png", "dashboard:login", "The login form (dashboard and admin share the demo's `admin` user)."),
    Page("01-projects.png", "dashboard:home",
         "Home with two projects: the list of the user's projects (with one, home is its overview)."),
    Page("02-overview-24h.png", "dashboard:overview",
         "A project's overview for the last 24 hours: KPIs, tokens per hour by component, top tools, dead weight."),
    Page("03-overview-7d.png", "dashboard:overview",
         "The same overview over the last 7 days (still by hour: charts go daily past 7 days)."),
    Page("04-tools.png", "dashboard:tools", "The tools table: calls, errors, output tokens, duplicates, schema cost."),
    Page("05-tool.png", "dashboard:tool",
         f"One tool (`{TOOL}`): its calls over time, output sizes, per-tool settings and its definition."),
    Page("06-sessions.png", "dashboard:sessions", "The sessions list with its filters, newest first."),
    Page("07-sessions-near-window.png", "dashboard:sessions",
         "The sessions list filtered to sessions near the context window (over 80%)."),
    Page("08-session.png", "dashboard:session",
         "An ordinary session: budget per turn, timeline, the turn-by-turn trace."),
    Page("09-session-near-window.png", "dashboard:session",
         "A long session that pages through a huge module until its context nears the 200,000-token window."),
    Page("10-policy-draft.png", "dashboard:policy",
         "The draft policy editor: mode, always-on tools, groups, context rules, output rules."),
    Page("11-policy-test.png", "dashboard:policy_test",
         "Test a message: the tools the draft would send for one user message, and why."),
    Page("12-policy-errors.png", "dashboard:policy_errors", "Error patterns: the texts that count a call as failed."),
    Page("13-simulate.png", "dashboard:policy_simulations", "Simulate: the form, recommendations and recent runs."),
    Page("14-simulation.png", "dashboard:policy_simulation",
         "A finished simulation of the draft on the last 14 days: tokens saved, misses per tool and per day."),
    Page("15-recommendation.png", "dashboard:policy_recommendation",
         "A finished recommendation (30 days): candidates' savings against misses, the recommended one marked."),
    Page("16-recommendation-apply.png", "dashboard:policy_recommendation_apply",
         "Applying the recommended candidate: what would change in the draft, to confirm."),
    Page("17-runs.png", "dashboard:policy_runs", "The Runs tab: every simulation and recommendation, who started it."),
    Page("18-publish.png", "dashboard:policy_publish",
         "Publish: the draft's diff against the label's version, its simulations, the agents polling it."),
    Page("19-versions.png", "dashboard:policy_versions", "Versions: every published version, its labels, a diff."),
    Page("20-label-move.png", "dashboard:policy_label_move",
         "Moving `staging` back to v1: what changes for the agents polling it (a rollback), to confirm."),
    Page("21-draft-reset.png", "dashboard:policy_draft_reset",
         "Resetting the draft to v1: what changes in the draft, to confirm."),
    Page("22-keys.png", "dashboard:keys", "API keys: scopes, last use, revoke; the form for a new key."),
    Page("23-key-created.png", "dashboard:key_create",
         "A new key, shown once (a throwaway database's key)."),
    Page("24-admin.png", "admin:index", "The Django admin's index."),
    Page("25-api-docs.png", "api:docs", "The API's OpenAPI documentation (Swagger UI) at /api/v1/docs."),
]

# Routes of dashboard/urls.py with no screenshot of their own, and why.
EXCLUDED: dict[str, str] = {
    "dashboard:logout": "POST only: logs out and redirects to the login page",
    "dashboard:kpis_csv": "CSV download",
    "dashboard:tokens_csv": "CSV download",
    "dashboard:top_tools_csv": "CSV download",
    "dashboard:dead_weight_csv": "CSV download",
    "dashboard:tools_csv": "CSV download",
    "dashboard:tool_calls_csv": "CSV download",
    "dashboard:tool_sample_csv": "CSV download",
    "dashboard:tool_settings": "POST only: saves a tool's settings from the tool page (05-tool.png shows the form)",
    "dashboard:sessions_csv": "CSV download",
    "dashboard:session_turns_csv": "CSV download",
    "dashboard:session_calls_csv": "CSV download",
    "dashboard:session_call_text": "plain text: one call's whole output",
    "dashboard:keys_csv": "CSV download",
    "dashboard:key_revoke": "POST only: revokes a key and redirects to the keys page",
    "dashboard:policy_draft_undo": "POST only: undoes the draft's last change and redirects to the draft",
    "dashboard:policy_recommendation_status": "JSON polled by the recommendation page's progress bar",
    "dashboard:policy_recommendation_start": "POST only: starts a run and redirects to its page (15)",
    "dashboard:policy_simulation_status": "JSON polled by the simulation page's progress bar",
    "dashboard:policy_simulation_cancel": "POST only: cancels a run and redirects to its page",
    "dashboard:policy_simulation_csv": "CSV download",
    "dashboard:policy_simulation_sessions_csv": "CSV download",
    "dashboard:policy_simulation_turns_csv": "CSV download",
}


# --- the server (a child process) ------------------------------------------------------------------

def serve(port: int, workdir: Path) -> None:
    """Migrate and seed the throwaway database, write the admin's password, then serve it, with the
    clock starting at CLOCK_START."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolscope.settings")
    from django.utils import timezone

    real_now = timezone.now
    offset = CLOCK_START - real_now()
    # Before django.setup(): models' `default=timezone.now` and every `timezone.now()` get this one.
    timezone.now = lambda: real_now() + offset

    import django

    django.setup()
    from django.core.management import call_command

    from toolscope.telemetry.demo.seed import demo_seed
    from toolscope.telemetry.services.projects import project_create

    call_command("migrate", interactive=False, verbosity=0)
    started = time.monotonic()
    result = demo_seed(sessions=SESSIONS, seed=SEED, anchor=ANCHOR)
    project_create(slug=OTHER_SLUG, name="Support bot", owner="admin")
    print(f"seeded in {time.monotonic() - started:.1f}s", flush=True)
    (workdir / "password").write_text(result.admin_password, encoding="utf-8")
    call_command("runserver", f"127.0.0.1:{port}", use_reloader=False, use_threading=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _server_env(workdir: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in {
        "DATABASE_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "CACHE_URL", "TOOLSCOPE_ENV", "DEBUG",
        "SECRET_KEY", "ALLOWED_HOSTS"}}
    env["TOOLSCOPE_SQLITE_PATH"] = str(workdir / "screenshots.sqlite3")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _wait_until_serving(child: subprocess.Popen, base_url: str, workdir: Path, log: Path) -> str:
    deadline = time.monotonic() + 600
    password_file = workdir / "password"
    while time.monotonic() < deadline:
        if child.poll() is not None:
            sys.exit(f"The server stopped (exit {child.returncode}):\n{log.read_text(encoding='utf-8')}")
        if password_file.exists():
            try:
                with urllib.request.urlopen(base_url + "/healthz", timeout=2):  # noqa: S310 - http://127.0.0.1
                    return password_file.read_text(encoding="utf-8")
            except urllib.error.HTTPError as exc:
                sys.exit(f"/healthz answered {exc.code}:\n{log.read_text(encoding='utf-8')}")
            except OSError:
                pass
        time.sleep(0.5)
    sys.exit(f"The server did not answer in 10 minutes:\n{log.read_text(encoding='utf-8')}")


# --- the browser -----------------------------------------------------------------------------------

CHARTS_DRAWN = """() => [...document.querySelectorAll('[data-chart]')]
    .filter(element => document.getElementById(element.dataset.chart))
    .every(element => element.querySelector('.main-svg'))"""


class Shooter:
    def __init__(self, page, base_url: str) -> None:
        self.page = page
        self.base_url = base_url
        self.clipped: dict[str, int] = {}  # file -> full height
        self.problems: list[str] = []
        self.taken: list[str] = []

    def open(self, path: str) -> None:
        response = self.page.goto(self.base_url + path)
        if response is None or not response.ok:
            raise SystemExit(f"GET {path}: {response.status if response else 'no response'}")

    def shot(self, file: str) -> None:
        page = self.page
        page.wait_for_load_state("networkidle")
        try:
            page.wait_for_function(CHARTS_DRAWN, timeout=30_000)
        except Exception:  # said in the output; the shot is taken anyway
            self.problems.append(f"{file}: a chart was not drawn in 30 s")
        page.evaluate("document.fonts.ready")
        height = page.evaluate("Math.ceil(document.documentElement.scrollHeight)")
        # The window is made as tall as the page (up to MAX_HEIGHT) rather than the page captured
        # beyond it: a sticky bar (the draft's "Save draft") then sits where it belongs, not over
        # the rows that happened to be at the bottom of a 900 px window.
        shown = min(height, MAX_HEIGHT)
        if shown > VIEWPORT["height"]:
            page.set_viewport_size({"width": VIEWPORT["width"], "height": shown})
            page.wait_for_timeout(300)
            page.wait_for_function(CHARTS_DRAWN, timeout=30_000)
        page.screenshot(path=str(OUT / file), type="png")
        page.set_viewport_size(VIEWPORT)
        if height > MAX_HEIGHT:
            self.clipped[file] = height
        print(f"  {file} ({height} px{', clipped' if height > MAX_HEIGHT else ''})", flush=True)
        self.taken.append(file)

    def visit(self, file: str, path: str) -> None:
        self.open(path)
        self.shot(file)

    def follow(self, selector: str) -> None:
        with self.page.expect_navigation():
            self.page.click(selector)


def shoot(base_url: str, password: str) -> Shooter:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        sys.exit("Chromium is missing: install it (sudo apt-get install chromium).")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1, locale="en-US", timezone_id="UTC")
        page = context.new_page()
        page.set_default_timeout(30_000)
        shooter = Shooter(page, base_url)
        page.on("pageerror", lambda error: shooter.problems.append(f"{page.url}: {error}"))
        page.on("console", lambda message: message.type == "error" and shooter.problems.append(
            f"{page.url}: console: {message.text}"))
        page.on("response", lambda response: response.status >= 400 and shooter.problems.append(
            f"{page.url}: {response.status} for {response.url}"))
        _tour(shooter, password)
        context.close()
        browser.close()
    return shooter


def _tour(s: Shooter, password: str) -> None:
    page = s.page
    s.visit("00-login.png", "/login/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", password)
    s.follow("button[type=submit]")
    if "/login/" in page.url:
        sys.exit("The login form refused the demo's admin.")
    s.visit("01-projects.png", "/")
    s.visit("02-overview-24h.png", f"{P}/?range=24h")
    s.visit("03-overview-7d.png", f"{P}/?range=7d")
    s.visit("04-tools.png", f"{P}/tools/?range=7d")
    s.visit("05-tool.png", f"{P}/tools/{TOOL}/?range=7d")
    s.visit("06-sessions.png", f"{P}/sessions/?range=7d")
    first = page.locator("table tbody tr a[href*='/sessions/']").first.get_attribute("href")
    s.visit("07-sessions-near-window.png", f"{P}/sessions/?range=30d&near_window=on")
    long = page.locator("table tbody tr a[href*='/sessions/']").first.get_attribute("href")
    s.visit("08-session.png", first)
    s.visit("09-session-near-window.png", long)
    s.visit("10-policy-draft.png", f"{P}/policy/")
    s.open(f"{P}/policy/test/")
    page.fill("[name=message]", MESSAGE)
    s.follow("form.message-test button[type=submit]")
    s.shot("11-policy-test.png")
    s.visit("12-policy-errors.png", f"{P}/policy/errors/")
    s.visit("13-simulate.png", f"{P}/policy/simulations/")
    page.select_option("#id_policy", "draft")
    page.select_option("#id_days", "14")
    s.follow("[data-simulate]")
    page.wait_for_selector("[data-saved-share]", timeout=RUN_TIMEOUT_MS)
    s.shot("14-simulation.png")
    s.open(f"{P}/policy/simulations/")
    page.select_option("#id_recommend-days", "30")
    s.follow("[data-recommend]")
    page.wait_for_function("document.querySelector('[data-chart=chart-curve] .main-svg') !== null",
                           timeout=RUN_TIMEOUT_MS)
    s.shot("15-recommendation.png")
    s.follow("tr.recommended [data-apply]")
    s.shot("16-recommendation-apply.png")
    s.visit("17-runs.png", f"{P}/policy/runs/")
    s.visit("18-publish.png", f"{P}/policy/publish/")
    s.visit("19-versions.png", f"{P}/policy/versions/")
    s.visit("20-label-move.png", f"{P}/policy/versions/1/label/?label=staging")
    s.visit("21-draft-reset.png", f"{P}/policy/versions/1/reset/")
    s.visit("22-keys.png", f"{P}/keys/")
    page.fill("#id_name", "ci-runner")
    s.follow("form[action*='/keys/new/'] button[type=submit]")
    s.shot("23-key-created.png")
    s.visit("24-admin.png", "/admin/")
    s.open("/api/v1/docs")
    page.wait_for_selector(".swagger-ui .opblock", timeout=30_000)
    s.shot("25-api-docs.png")


# --- the index -------------------------------------------------------------------------------------

def index_text(clipped: dict[str, int]) -> str:
    lines = [
        "# Screenshots",
        "",
        ("Every page of the dashboard, on the demo project (`manage.py seed_demo`: 300 sessions, seed "
        f"{SEED}, the sessions ending before {ANCHOR:%Y-%m-%d %H:%M} UTC), logged in as its admin, in "
        f"Chromium at {VIEWPORT['width']}x{VIEWPORT['height']}, full page (PNG). Written by "
        "`./scripts/screenshots` (scripts/screenshots.py), which builds the demo in a throwaway SQLite "
        "database and serves it with the clock at the anchor; run it again after changing a page. A "
        "second, empty project (`support-bot`) is added so that home lists projects."),
        f"Pages taller than {MAX_HEIGHT:,} px are clipped at {MAX_HEIGHT:,} px (marked below).",
        "",
        "| file | what it shows |",
        "| --- | --- |",
    ]
    for page in PAGES:
        note = f" *Clipped: the page is {clipped[page.file]:,} px tall.*" if page.file in clipped else ""
        lines.append(f"| [{page.file}]({page.file}) | {page.caption}{note} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serve", nargs=2, metavar=("PORT", "WORKDIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(int(args.serve[0]), Path(args.serve[1]))
        return
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="toolscope-screenshots-") as tmp:
        workdir = Path(tmp)
        port = _free_port()
        base_url = f"http://127.0.0.1:{port}"
        log = workdir / "server.log"
        print(f"Seeding the demo in {workdir} and serving it at {base_url}", flush=True)
        with log.open("w", encoding="utf-8") as output:
            command = [sys.executable, __file__, "--serve", str(port), str(workdir)]
            child = subprocess.Popen(command, cwd=ROOT, env=_server_env(workdir),  # noqa: S603 - this script
                                     stdout=output, stderr=subprocess.STDOUT)
        try:
            password = _wait_until_serving(child, base_url, workdir, log)
            print(f"Serving after {time.monotonic() - started:.0f}s; taking the screenshots", flush=True)
            OUT.mkdir(parents=True, exist_ok=True)
            for old in OUT.glob("*.png"):
                old.unlink()
            shooter = shoot(base_url, password)
        finally:
            child.terminate()
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
    missing = [page.file for page in PAGES if page.file not in shooter.taken]
    if missing:
        sys.exit(f"Not taken: {', '.join(missing)}")
    (OUT / "README.md").write_text(index_text(shooter.clipped), encoding="utf-8")
    size = sum(path.stat().st_size for path in OUT.glob("*.png"))
    print(f"{len(PAGES)} screenshots, {size / 1e6:.1f} MB, in {time.monotonic() - started:.0f}s: {OUT}")
    for problem in shooter.problems:
        print(f"warning: {problem}", file=sys.stderr)


if __name__ == "__main__":
    main()
