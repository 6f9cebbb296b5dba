"""Browser tests: Debian's Chromium driven by Playwright (sync API) against pytest-django's live
server. One browser per module, a fresh context (cookies, storage) per test; every page visited is
saved as a full-page screenshot under test-output/screenshots/ at the repository root."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from django.core.cache import cache
from django.utils import timezone

CHROMIUM = shutil.which("chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
SCREENSHOTS = Path(__file__).resolve().parents[3] / "test-output" / "screenshots"
VIEWPORT = {"width": 1366, "height": 900}
# Small enough to seed in about a second per test: the transactional live-server tests flush
# the database after each test, so every test seeds its own.
DEMO_SESSIONS = 6


@dataclass
class Demo:
    slug: str
    username: str
    password: str


@dataclass
class Browsing:
    """A page in a fresh browser context, with what its pages logged as errors."""

    page: object
    base_url: str
    errors: list[str] = field(default_factory=list)

    def open(self, path: str) -> None:
        response = self.page.goto(self.base_url + path)
        assert response is not None and response.ok, f"GET {path}: {response.status if response else 'no response'}"

    def shot(self, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{re.sub(r'[^a-z0-9-]+', '-', name.lower())}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def log_in(self, demo: Demo) -> None:
        """Through the login form, as a person would."""
        self.open("/login/")
        self.page.fill("#id_username", demo.username)
        self.page.fill("#id_password", demo.password)
        with self.page.expect_navigation():
            self.page.click("button[type=submit]")
        assert "/login/" not in self.page.url, "the login form was refused"


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    # The sync API keeps an asyncio loop on this thread, which Django's ORM takes for async code;
    # the tests' own ORM calls (seeding, keys) are synchronous, so the guard is lifted meanwhile.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            yield chromium
            chromium.close()


@pytest.fixture
def demo(live_server) -> Demo:
    """The demo project (catalog, draft policy, sessions processed and rolled up) and its admin."""
    from toolscope.telemetry.demo.seed import ADMIN_USERNAME, DEMO_SLUG, demo_anchor, demo_seed

    # The served-policy cache outlives the flushed database; project ids repeat between runs.
    cache.clear()
    result = demo_seed(sessions=DEMO_SESSIONS, seed=1, anchor=demo_anchor(timezone.now()))
    return Demo(slug=DEMO_SLUG, username=ADMIN_USERNAME, password=result.admin_password)


@pytest.fixture
def browsing(browser, live_server) -> Iterator[Browsing]:
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(15_000)
    browsing = Browsing(page=page, base_url=live_server.url)
    page.on("console", lambda message: message.type == "error" and browsing.errors.append(
        f"console: {message.text} ({message.location.get('url', '')})"))
    page.on("pageerror", lambda error: browsing.errors.append(f"pageerror: {error}"))
    yield browsing
    context.close()
