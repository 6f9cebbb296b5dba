"""A simulation in a real browser, with a real worker: an editor simulates the draft on the demo's
recorded sessions, watches it finish, sees its charts drawn, asks for a recommendation, applies
the recommended point to the draft, finds the simulation beside the diff on the publish page, and
publishes."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.utils import timezone

from tests.e2e.browser.conftest import CHROMIUM, Demo
from tests.e2e.browser.test_dashboard import _charts_drawn, _publish
from tests.e2e.conftest import ingest_queue, worker  # noqa: F401 -- fixtures

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium); "
                                                "the browser tests drive Debian's Chromium through Playwright."),
]


@pytest.fixture
def demo(live_server) -> Demo:
    """The demo with enough sessions to learn a recommendation from (the module default has 6)."""
    from toolscope.telemetry.demo.seed import ADMIN_USERNAME, DEMO_SLUG, demo_anchor, demo_seed

    cache.clear()
    result = demo_seed(sessions=40, seed=1, anchor=demo_anchor(timezone.now()))
    return Demo(slug=DEMO_SLUG, username=ADMIN_USERNAME, password=result.admin_password)


def test_the_draft_is_simulated_a_recommendation_applied_and_published(browsing, demo, worker):  # noqa: F811
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
        page.click("nav.tabs >> text=Simulate")
    page.select_option("#id_recommend-days", "30")
    with page.expect_navigation():
        page.click("[data-recommend]")
    assert page.locator("#id_recommend-days").input_value() == "30"
    # Computed by the worker: the page polls its progress and reloads with the curve.
    page.wait_for_function("document.querySelector('[data-chart=chart-curve] .main-svg') !== null", timeout=60_000)
    browsing.shot("policy-recommendations")
    recommended = page.locator("tr.recommended [data-apply]")
    name = recommended.get_attribute("data-apply")
    with page.expect_navigation():
        recommended.click()
    # Applying shows what changes in the draft first; nothing is written until it is confirmed.
    assert page.locator("[data-changes] li").count() > 0
    browsing.shot("policy-recommendation-apply-preview")
    with page.expect_navigation():
        page.click("[data-confirm-button]")
    assert f"Applied “{name}” to the draft" in page.locator(".messages").inner_text()
    assert page.locator("[data-undo]").is_visible()

    with page.expect_navigation():
        page.click("nav.tabs >> text=Publish")
    # The draft changed since it was simulated: the publish page says so for it, and shows the
    # simulation of the draft as it was under no label.
    assert "Not simulated yet" in page.locator("[data-simulations]").inner_text()
    browsing.shot("policy-publish-with-simulation")
    _publish(browsing, "simulated first", "policy-publish-simulated")
    assert browsing.errors == []
