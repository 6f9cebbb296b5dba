"""Issue 28, item 7 in Chromium: a 1,000-call session's page reads like a trace. A closed turn
opens on a click and shows its calls; a link to a call in a closed turn opens that turn; the
timeline's labels never overlap; the budget chart's Whole window / Fit buttons cover no legend
entry."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from tests.e2e.browser.conftest import CHROMIUM, Demo
from tests.factories import make_project
from tests.trace_session import trace_session
from toolscope.telemetry.models import ToolCall

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium); "
                                                "the browser tests drive Debian's Chromium through Playwright."),
]
BOXES = """elements => elements.map(element => {
    const box = element.getBoundingClientRect();
    return {text: element.textContent, left: box.left, right: box.right, top: box.top, bottom: box.bottom};
})"""


@pytest.fixture
def long_session(live_server) -> Demo:
    project = make_project("trace")
    trace_session(project, calls=1_000, session_id="long")
    get_user_model().objects.create_superuser("tracer", "tracer@example.com", "tracer-password-1")
    return Demo(slug=project.slug, username="tracer", password="tracer-password-1")


def _overlap(a: dict, b: dict) -> bool:
    return a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]


def _open(browsing, demo: Demo, fragment: str = "") -> None:
    browsing.open(f"/p/{demo.slug}/sessions/long/{fragment}")
    browsing.page.wait_for_function(
        "[...document.querySelectorAll('[data-chart]')].every(e => e.querySelector('.main-svg'))")


def test_a_closed_turn_opens_on_a_click_and_shows_its_calls(browsing, long_session):
    browsing.log_in(long_session)
    _open(browsing, long_session)
    browsing.shot("session-trace")
    turn = browsing.page.locator("#turn-10")
    assert turn.get_attribute("open") is None
    calls = turn.locator(".call")
    assert calls.count() == ToolCall.objects.filter(turn_index=10).count() > 0
    assert not calls.first.is_visible()
    assert "not ok" in browsing.page.locator("details.turn.has-errors > summary").first.inner_text()
    turn.locator("summary.turn-head").click()
    assert turn.get_attribute("open") is not None
    assert calls.first.is_visible() and calls.nth(calls.count() - 1).is_visible()
    assert browsing.errors == []


def test_a_link_to_a_call_of_a_closed_turn_opens_that_turn(browsing, long_session):
    call = ToolCall.objects.filter(turn_index=20).order_by("started_at").first()
    browsing.log_in(long_session)
    _open(browsing, long_session, f"#call-{call.pk}")
    assert browsing.page.locator("#turn-20").get_attribute("open") is not None
    assert browsing.page.locator(f"#call-{call.pk}").is_visible()


def test_the_timeline_labels_never_overlap(browsing, long_session):
    browsing.log_in(long_session)
    _open(browsing, long_session)
    timeline = browsing.page.locator("[data-chart=chart-timeline]")
    timeline.scroll_into_view_if_needed()
    browsing.shot("session-timeline")
    labels = timeline.locator(".main-svg text").evaluate_all(BOXES)
    labels = [label for label in labels if label["text"].strip() and label["right"] > label["left"]]
    # Title, axis title, ticks of both axes: a row per tool (at most 12), never one per call.
    assert 0 < len(labels) <= 40, [label["text"] for label in labels]
    clashes = [(a["text"], b["text"]) for i, a in enumerate(labels) for b in labels[i + 1:] if _overlap(a, b)]
    assert clashes == []


def test_the_budget_charts_buttons_cover_no_legend_entry(browsing, long_session):
    browsing.log_in(long_session)
    _open(browsing, long_session)
    budget = browsing.page.locator("[data-chart=chart-budget]")
    buttons = budget.locator(".updatemenu-button").evaluate_all(BOXES)
    entries = budget.locator(".legend .traces").evaluate_all(BOXES)
    assert {button["text"] for button in buttons} == {"Whole window", "Fit the turns"}
    assert len(entries) >= 5
    assert [(b["text"], e["text"]) for b in buttons for e in entries if _overlap(b, e)] == []
    # At a phone's width, too, where the legend wraps onto several lines.
    browsing.page.set_viewport_size({"width": 420, "height": 900})
    _open(browsing, long_session)
    buttons = budget.locator(".updatemenu-button").evaluate_all(BOXES)
    entries = budget.locator(".legend .traces, .gtitle").evaluate_all(BOXES)
    browsing.shot("session-budget-narrow")
    assert [(b["text"], e["text"]) for b in buttons for e in entries if _overlap(b, e)] == []
    assert browsing.errors == []
