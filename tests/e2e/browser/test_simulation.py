"""A simulation in a real browser, with a real worker: an editor simulates the draft on the demo's
recorded sessions, watches it finish, sees its charts drawn, finds the result beside the diff on
the publish page, and publishes."""

from __future__ import annotations

import pytest

from tests.e2e.browser.conftest import CHROMIUM
from tests.e2e.browser.test_dashboard import _charts_drawn, _publish
from tests.e2e.conftest import ingest_queue, worker  # noqa: F401 -- fixtures

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium); "
                                                "the browser tests drive Debian's Chromium through Playwright."),
]


def test_the_draft_is_simulated_seen_beside_the_diff_and_published(browsing, demo, worker):  # noqa: F811
    page = browsing.page
    browsing.log_in(demo)
    browsing.open(f"/p/{demo.slug}/policy/")
    with page.expect_navigation():
        page.click("nav.tabs >> text=Simulate")
    page.select_option("#id_policy", "draft")
    page.select_option("#id_days", "14")
    with page.expect_navigation():
        page.click("[data-simulate]")
    # The page polls the worker's progress and reloads with the result.
    page.wait_for_selector("[data-saved-share]", timeout=60_000)
    saved = page.locator("[data-saved-share]").inner_text()
    assert saved.endswith("%") and page.locator("[data-miss-rate]").inner_text().endswith("%")
    page.wait_for_function("document.querySelectorAll('[data-chart] .main-svg').length >= 1")
    drawn = {chart["id"]: chart for chart in _charts_drawn(page)}
    assert drawn["chart-days"]["svg"] and drawn["chart-days"]["drawn"] == 2
    browsing.shot("policy-simulation-done")

    with page.expect_navigation():
        page.click("nav.tabs >> text=Publish")
    line = page.locator("[data-simulation-line]").first.inner_text()
    assert line.startswith(f"Saves {saved} of schema tokens")
    browsing.shot("policy-publish-with-simulation")
    _publish(browsing, "simulated first", "policy-publish-simulated")
    assert browsing.errors == []
