"""A recommendation in a real browser on the embedded default's way of running tasks (no broker:
in-process, issue 28, item 8): the editor's Recommend answers at once with the run's page and its
progress bar while the run is held, the page follows it to its result, and the run is found again
on the Runs page, with who started it and what it recommends, and opens from there."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.utils import timezone

from tests.dashboard.test_runs_background import Held
from tests.e2e.browser.conftest import CHROMIUM, Demo
from toolscope.policies.models import Recommendation
from toolscope.policies.services import recommendations

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium); "
                                                "the browser tests drive Debian's Chromium through Playwright."),
]


@pytest.fixture
def demo(live_server, settings) -> Demo:
    """The demo with enough sessions to learn a recommendation from, tasks run in-process."""
    from toolscope.telemetry.demo.seed import ADMIN_USERNAME, DEMO_SLUG, demo_anchor, demo_seed

    settings.CELERY_TASK_ALWAYS_EAGER = True  # as in the embedded default: no broker, no worker
    cache.clear()
    result = demo_seed(sessions=40, seed=1, anchor=demo_anchor(timezone.now()))
    return Demo(slug=DEMO_SLUG, username=ADMIN_USERNAME, password=result.admin_password)


def test_a_recommendation_runs_in_the_background_and_is_found_again_on_the_runs_page(browsing, demo, monkeypatch):
    held = Held()
    monkeypatch.setattr(recommendations, "_compute", held)
    page = browsing.page
    browsing.log_in(demo)
    browsing.open(f"/p/{demo.slug}/policy/simulations/")
    page.select_option("#id_recommend-days", "30")
    with page.expect_navigation():
        page.click("[data-recommend]")
    # The answer came while the run is held: its own page, with the progress bar.
    run = Recommendation.objects.get()
    assert page.url.endswith(f"/p/{demo.slug}/policy/recommendations/{run.pk}/")
    assert not held.release.is_set() and page.locator("[data-progress]").is_visible()
    assert held.entered.wait(30) and held.threads == ["toolscope-background"]
    browsing.shot("recommendation-running")
    held.release.set()
    # The page polls the run's progress and reloads with its candidates.
    page.wait_for_function("document.querySelector('[data-chart=chart-curve] .main-svg') !== null", timeout=90_000)
    recommended = page.locator("tr.recommended [data-apply]").get_attribute("data-apply")
    browsing.shot("recommendation-done")

    with page.expect_navigation():
        page.click("nav.tabs >> text=Runs")
    row = page.locator(f"[data-run=recommendation-{run.pk}]")
    assert row.locator("[data-status]").inner_text() == "done"
    assert row.locator("[data-started-by]").inner_text() == demo.username
    assert recommended in row.locator("[data-headline]").inner_text()
    browsing.shot("policy-runs")
    with page.expect_navigation():
        row.locator("[data-open-run]").click()
    assert page.url.endswith(f"/policy/recommendations/{run.pk}/")
    page.wait_for_function("document.querySelector('[data-chart=chart-curve] .main-svg') !== null")
    assert page.locator("tr.recommended [data-apply]").get_attribute("data-apply") == recommended
    assert browsing.errors == []
