"""The dashboard in a real browser: logging in, charts drawn by plotly.js without a console error,
sorting the tools table, a session's budget chart, and a policy edited, published and served."""

from __future__ import annotations

import re

import httpx
import pytest

from dashboard.selectors.overview import KPI_SPECS
from tests.e2e.browser.conftest import CHROMIUM

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium); "
                                                "the browser tests drive Debian's Chromium through Playwright."),
]


def _charts_drawn(page) -> list[dict]:
    """Per chart container: whether plotly drew its SVG, and how many traces it holds."""
    return page.eval_on_selector_all("[data-chart]", """elements => elements.map(element => ({
        id: element.dataset.chart,
        svg: element.querySelector(".main-svg") !== null,
        traces: (element.data || []).length,
        drawn: element.querySelectorAll(".trace").length,
    }))""")


def _column(page, index: int) -> list[str]:
    return page.eval_on_selector_all(
        f"table tbody tr td:nth-child({index})", "cells => cells.map(cell => cell.innerText.trim())")


def _count(text: str) -> float:
    return float(text.replace(",", "")) if re.fullmatch(r"[\d,.]+", text) else -1.0


def test_logging_in_shows_the_overview_with_its_charts_and_no_console_error(browsing, demo):
    browsing.open("/login/")
    browsing.shot("login")
    browsing.log_in(demo)
    # With one project, home is that project's overview.
    assert browsing.page.url.endswith(f"/p/{demo.slug}/")

    browsing.open(f"/p/{demo.slug}/")
    browsing.page.wait_for_selector("[data-chart] .main-svg")
    browsing.page.wait_for_function(
        "[...document.querySelectorAll('[data-chart]')].every(e => e.querySelector('.main-svg'))")
    charts = _charts_drawn(browsing.page)
    browsing.shot("overview")
    assert len(charts) >= 3
    for chart in charts:
        assert chart["svg"], chart
        assert chart["traces"] > 0 and chart["drawn"] > 0, chart
    assert browsing.errors == []


# Every number followed by its unit (7 d, 24 h, +1.5 pp, 12.3%, 1.2k) in the KPI cards whose
# text is laid out on more than one line: a Range over text that wraps has a rect per line.
_SPLIT_AMOUNTS = r"""() => {
    const amount = /[+\u2212-]?[\d.,]+[\s\u00a0]?(?:pp|%|d|h|k|M|B)(?![\w])/g;
    const split = [];
    for (const card of document.querySelectorAll(".kpi")) {
        const walker = document.createTreeWalker(card, NodeFilter.SHOW_TEXT);
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            for (const match of node.data.matchAll(amount)) {
                const range = document.createRange();
                range.setStart(node, match.index);
                range.setEnd(node, match.index + match[0].length);
                const lines = new Set([...range.getClientRects()].map(rect => Math.round(rect.top)));
                if (lines.size > 1) split.push(match[0]);
            }
        }
    }
    return split;
}"""


@pytest.mark.parametrize("width", [390, 820, 1180, 1366])
def test_kpi_cards_never_split_a_value_from_its_unit(browsing, demo, width):
    browsing.page.set_viewport_size({"width": width, "height": 900})
    browsing.log_in(demo)
    for range_key in ("24h", "7d", "30d"):
        browsing.open(f"/p/{demo.slug}/?range={range_key}")
        assert browsing.page.locator(".kpi").count() == len(KPI_SPECS)
        assert browsing.page.evaluate(_SPLIT_AMOUNTS) == [], (width, range_key)
    browsing.shot(f"kpis-{width}")
    assert browsing.errors == []


def test_clicking_a_column_header_sorts_the_tools_table(browsing, demo):
    browsing.log_in(demo)
    browsing.open(f"/p/{demo.slug}/tools/")
    calls = [_count(text) for text in _column(browsing.page, 2)]
    assert calls == sorted(calls, reverse=True), "the table opens sorted by calls, most first"
    browsing.shot("tools-by-calls")

    header = browsing.page.locator("table thead th a", has_text=re.compile(r"^Name"))
    with browsing.page.expect_navigation():
        header.click()
    names = [text.split()[0] for text in _column(browsing.page, 1)]
    assert "sort=name" in browsing.page.url and "dir=asc" in browsing.page.url
    assert len(names) > 10 and names == sorted(names)
    browsing.shot("tools-by-name")

    with browsing.page.expect_navigation():
        browsing.page.locator("table thead th a", has_text=re.compile(r"^Name")).click()
    assert [text.split()[0] for text in _column(browsing.page, 1)] == sorted(names, reverse=True)
    assert browsing.errors == []


def test_a_session_opened_from_the_list_shows_its_budget_chart(browsing, demo):
    browsing.log_in(demo)
    browsing.open(f"/p/{demo.slug}/sessions/")
    browsing.shot("sessions")
    link = browsing.page.locator("table tbody tr td a.mono").first
    client_id = link.inner_text()
    with browsing.page.expect_navigation():
        link.click()
    assert "/sessions/" in browsing.page.url
    assert browsing.page.locator("h1").inner_text().startswith(client_id.rstrip("…"))
    browsing.page.wait_for_selector('[data-chart="chart-budget"] .main-svg')
    budget = next(chart for chart in _charts_drawn(browsing.page) if chart["id"] == "chart-budget")
    browsing.shot("session")
    assert budget["svg"] and budget["traces"] > 0 and budget["drawn"] > 0
    assert browsing.errors == []


def _cost(page) -> int:
    return int(page.locator("[data-token-sum=always_on]").inner_text().replace(",", ""))


def _tokens(page, tool: str) -> int:
    return int(page.get_attribute(f"input[aria-label='{tool} always on']", "data-tokens"))


def _publish(browsing, comment: str, shot: str) -> None:
    page = browsing.page
    with page.expect_navigation():
        page.click("nav.tabs >> text=Publish")
    page.fill("#id_comment", comment)
    browsing.shot(shot)
    with page.expect_navigation():
        page.click("form button:has-text('Publish')")
    assert "/policy/versions/" in page.url


def test_the_always_on_set_is_edited_published_and_served_to_agents(browsing, demo, live_server):
    from tests.factories import make_key
    from toolscope.telemetry.models import Project

    page = browsing.page
    browsing.log_in(demo)
    browsing.open(f"/p/{demo.slug}/policy/")
    page.fill("#id_test_message", "the tests are failing after the last commit")
    with page.expect_navigation():
        page.click("form.test-inline button")
    assert int(page.locator("[data-sent-count]").inner_text()) > 0
    browsing.shot("policy-test-a-message")
    # The demo serves v1 to production and v2 to staging; its draft differs from both.
    _publish(browsing, "the demo's draft as it came", "policy-publish-first")
    assert "production" in page.locator("tr#v3").inner_text()

    with page.expect_navigation():
        page.click("nav.tabs >> text=Draft")
    before = _cost(page)
    page.uncheck("input[aria-label='bash always on']")
    page.check("input[aria-label='git_diff always on']")
    # Summed in the page as the boxes change: no request was made.
    assert _cost(page) == before - _tokens(page, "bash") + _tokens(page, "git_diff")
    browsing.shot("policy-draft-edited")
    with page.expect_navigation():
        page.click("text=Save draft")
    assert page.locator(".messages").inner_text().startswith("Saved. draft: selection.always_on: + git_diff, - bash")
    assert page.is_checked("input[aria-label='git_diff always on']")
    assert not page.is_checked("input[aria-label='bash always on']")
    browsing.shot("policy-draft-saved")

    _publish(browsing, "git_diff always on, bash on demand", "policy-publish-diff")
    row = page.locator("tr#v4")
    assert "git_diff always on, bash on demand" in row.inner_text() and "production" in row.inner_text()
    assert page.locator("[data-changes]").inner_text() == "selection.always_on: + git_diff, - bash"
    browsing.shot("policy-versions")
    assert browsing.errors == []

    key = make_key(Project.objects.get(slug=demo.slug), scopes=["policy:read"], name="browser test")
    served = httpx.get(f"{live_server.url}/api/v1/policy", params={"label": "production"},
                       headers={"Authorization": f"Bearer {key.secret}"}, timeout=10)
    assert served.status_code == 200
    document = served.json()
    assert (document["version"], document["label"]) == (4, "production")
    assert "git_diff" in document["selection"]["always_on"] and "bash" not in document["selection"]["always_on"]


def test_an_edit_is_undone_and_a_label_moves_only_once_confirmed(browsing, demo):
    """Issue 28, items 1 and 2, as a person clicks them."""
    page = browsing.page
    browsing.log_in(demo)
    browsing.open(f"/p/{demo.slug}/policy/")
    page.uncheck("input[aria-label='bash always on']")
    with page.expect_navigation():
        page.click("text=Save draft")
    assert not page.is_checked("input[aria-label='bash always on']")
    assert "selection.always_on: - bash" in page.locator("[data-undo]").inner_text()
    with page.expect_navigation():
        page.click("[data-undo] button")
    assert page.locator(".messages").inner_text().startswith("Undone")
    assert page.is_checked("input[aria-label='bash always on']")
    browsing.shot("policy-draft-undone")

    # The demo serves v1 to production and v2 to staging. No label is preselected to move.
    with page.expect_navigation():
        page.click("nav.tabs >> text=Versions")
    select = page.locator("tr#v1 select[name=label]")
    assert select.input_value() == ""
    select.select_option("staging")
    with page.expect_navigation():
        page.click("tr#v1 .move-form button")
    assert "This is a rollback." in page.locator("[data-confirm]").inner_text()
    assert page.locator("[data-changes] li").count() > 0
    browsing.shot("policy-label-move-confirm")
    with page.expect_navigation():
        page.click("[data-confirm-button]")
    assert page.locator(".messages").inner_text() == "staging now serves v1."
    assert "staging" in page.locator("tr#v1").inner_text()

    # Publishing to a label that does not exist yet is asked for by name.
    with page.expect_navigation():
        page.click("nav.tabs >> text=Publish")
    page.select_option("#id_label", "__new__")
    page.fill("#id_new_label", "canary")
    with page.expect_navigation():
        page.click("[data-publish-label] button")
    assert page.locator("[data-publish]").inner_text() == "Publish to canary (a new label)"
    with page.expect_navigation():
        page.click("[data-publish]")
    assert "canary" in page.locator("tr#v3").inner_text()
    assert browsing.errors == []
