"""Issue 28, items 3, 4, 5, 6 and 10 in a real browser: an OpenTelemetry session whose tools were
inferred says so; a key without a scope is told where to make one, and the key made there reads;
the policy pages say whose definitions they count and count a picked agent's; sessions are
searched, sorted and arrive without a reload; the overview is filtered by agent and model; no page
overflows to the right and the KPI grid leaves no card alone on a row."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

import pytest
from django.utils import timezone

from dashboard.forms import time_range_parse
from tests.e2e.browser.conftest import CHROMIUM
from tests.factories import make_key
from toolscope.telemetry.models import Project, Session
from toolscope.telemetry.services.ingest import ingest_events
from toolscope.telemetry.services.processing import batch_process

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium); "
                                                "the browser tests drive Debian's Chromium through Playwright."),
]


def _ingest(slug: str, sid: str, agent: str, task: str, **turn) -> None:
    project = Project.objects.get(slug=slug)
    now = timezone.now().isoformat()
    outcome = ingest_events(api_key=make_key(project).api_key, raw_events=[
        {"type": "session", "id": f"{sid}-start", "session_id": sid, "action": "start", "agent_name": agent,
         "metadata": {"source": "otlp", "conventions": "gen_ai", "content_captured": True}, "timestamp": now},
        {"type": "turn", "id": f"{sid}-t0", "session_id": sid, "index": 0, "timestamp": now, "model": "gpt-4o",
         "task_message": task, "usage": {"input_tokens": 4000, "output_tokens": 50}, **turn}])
    assert outcome.counts["rejected"] == 0, outcome.results
    batch_process(batch_id=outcome.batch_id)


def test_an_opentelemetry_session_without_definitions_says_whose_tools_it_counts(browsing, demo):
    agent = Session.objects.filter(project__slug=demo.slug).exclude(agent_name="").values_list(
        "agent_name", flat=True).first()
    _ingest(demo.slug, "otel-no-definitions", agent, "Why does the build fail?", tools_known=False)
    browsing.log_in(demo)
    browsing.open(f"/p/{demo.slug}/sessions/otel-no-definitions")
    notice = browsing.page.locator("[data-inferred]")
    assert notice.is_visible()
    assert f"the set {agent} last advertised" in notice.inner_text()
    assert browsing.page.locator("td[title='Inferred: agent']").first.text_content().strip().endswith("*")
    browsing.shot("session-inferred-tools")
    assert browsing.errors == []


def _api_get(base_url: str, path: str, secret: str) -> tuple[int, str]:
    request = urllib.request.Request(base_url + path,  # noqa: S310 (the test's own http server)
                                     headers={"Authorization": f"Bearer {secret}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (the test's own server)
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_a_key_without_read_is_told_where_to_make_one_and_that_key_reads(browsing, demo):
    ingest_only = make_key(Project.objects.get(slug=demo.slug), scopes=["ingest"]).secret
    status, body = _api_get(browsing.base_url, "/api/v1/sessions", ingest_only)
    assert status == 403 and "lacks the 'read' scope" in body
    keys_page = re.search(r"\((/p/[^)]+/keys/)\)", json.loads(body)["detail"]).group(1)
    browsing.log_in(demo)
    browsing.open(keys_page)
    browsing.page.fill("input[name=name]", "notebook")
    browsing.page.check("input[name=scopes][value=read]")
    with browsing.page.expect_navigation():
        browsing.page.click("button:has-text('Create key')")
    secret = browsing.page.locator("#secret").inner_text().strip()
    status, body = _api_get(browsing.base_url, "/api/v1/sessions", secret)
    assert status == 200 and json.loads(body)["results"]
    assert browsing.errors == []


def test_the_draft_and_test_pages_say_whose_definitions_and_count_a_picked_agents(browsing, demo):
    browsing.log_in(demo)
    browsing.open(f"/p/{demo.slug}/policy/")
    whose = browsing.page.locator("[data-whose-text]")
    assert "most recently seen" in whose.inner_text()
    agent = browsing.page.locator("#id_agent option").nth(1).get_attribute("value")
    browsing.page.select_option("#id_agent", agent)
    with browsing.page.expect_navigation():
        browsing.page.click("[data-whose] button")
    assert f"agent={agent}" in browsing.page.url
    assert browsing.page.locator("[data-whose-text]").inner_text().startswith(f"{agent}'s last advertised set")
    browsing.shot("policy-draft-agent-definitions")
    browsing.open(f"/p/{demo.slug}/policy/test/?message=run+the+tests&agent={agent}")
    assert browsing.page.locator("[data-whose-text]").inner_text().startswith(f"{agent}'s last advertised set")
    assert browsing.errors == []


def test_sessions_are_searched_sorted_and_arrive_without_a_reload(browsing, demo):
    _ingest(demo.slug, "needle-session", "coder-cli", "Rotate the staging certificates")
    browsing.log_in(demo)
    browsing.open(f"/p/{demo.slug}/sessions/?range=7d")
    browsing.page.fill("input[name=q]", "staging certificates")
    with browsing.page.expect_navigation():
        browsing.page.click("form.filters button[type=submit]")
    rows = browsing.page.locator("#session-rows tr")
    assert rows.count() == 1 and "needle-session" in rows.first.inner_text()

    browsing.open(f"/p/{demo.slug}/sessions/?range=7d")
    with browsing.page.expect_navigation():
        browsing.page.click("th a:has-text('Tokens')")
    assert browsing.page.locator("[data-sorted=tokens]").is_visible()
    tokens = browsing.page.eval_on_selector_all(
        "#session-rows tr td:nth-child(8)", "cells => cells.map(cell => Number(cell.innerText.replace(/,/g, '')))")
    assert len(tokens) > 1 and tokens == sorted(tokens, reverse=True)
    browsing.shot("sessions-sorted-by-tokens")

    browsing.open(f"/p/{demo.slug}/sessions/?range=24h")
    assert browsing.page.locator("[data-live-note]").is_visible()
    assert browsing.page.locator("text=arrived-while-open").count() == 0
    _ingest(demo.slug, "arrived-while-open", "coder-cli", "A new task")
    # The page fetches itself every 10 s: the row comes without a reload (nothing navigates).
    url = browsing.page.url
    browsing.page.wait_for_selector("#session-rows >> text=arrived-while-open", timeout=30_000)
    assert browsing.page.url == url
    assert browsing.errors == []


def _kpi(page, label: str) -> str:
    return page.locator(f".kpi:has(.kpi-label:text-is('{label}')) .kpi-value").inner_text()


def test_the_overview_is_filtered_by_agent_and_model(browsing, demo):
    sessions = Session.objects.filter(project__slug=demo.slug).exclude(agent_name="")
    agent = sessions.values_list("agent_name", flat=True).order_by("agent_name").first()
    browsing.log_in(demo)
    browsing.open(f"/p/{demo.slug}/?range=7d")
    everything = int(_kpi(browsing.page, "Sessions").replace(",", ""))
    browsing.page.select_option("select[name=agent]", agent)
    with browsing.page.expect_navigation():
        browsing.page.click("form.slice-filter button[type=submit]")
    assert f"agent={agent}" in browsing.page.url and "range=7d" in browsing.page.url
    assert browsing.page.locator("[data-sliced]").inner_text().startswith(f"Showing agent {agent} only")
    shown = int(_kpi(browsing.page, "Sessions").replace(",", ""))
    start = time_range_parse({"range": "7d"}, now=timezone.now())[0].start
    assert shown == sessions.filter(agent_name=agent, started_at__gte=start).count()
    assert 0 < shown < everything
    model = browsing.page.locator("select[name=model] option").nth(1).inner_text()
    browsing.page.select_option("select[name=model]", model)
    with browsing.page.expect_navigation():
        browsing.page.click("form.slice-filter button[type=submit]")
    assert f"model <strong>{model}</strong>" in browsing.page.locator("[data-sliced]").inner_html()
    # The range picker keeps the filter.
    browsing.page.select_option("#id_range", "24h")
    with browsing.page.expect_navigation():
        browsing.page.click(".range-form button[type=submit]")
    assert "range=24h" in browsing.page.url and f"agent={agent}" in browsing.page.url
    assert browsing.page.locator("[data-sliced]").is_visible()
    browsing.shot("overview-filtered-by-agent-and-model")
    assert browsing.errors == []


def _overflow(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")


def _table_overflow(page) -> int:
    return page.evaluate("Math.max(0, ...[...document.querySelectorAll('.table-wrap')].map("
                         "wrap => wrap.scrollWidth - wrap.clientWidth))")


def _cards_per_row(page) -> list[int]:
    return page.evaluate("""() => {
        const rows = {};
        for (const card of document.querySelectorAll('.kpis-even .kpi')) {
            const top = Math.round(card.getBoundingClientRect().top);
            rows[top] = (rows[top] || 0) + 1;
        }
        return Object.keys(rows).map(Number).sort((a, b) => a - b).map(top => rows[top]);
    }""")


@pytest.mark.parametrize("width", [1366, 1000, 600])
def test_no_page_overflows_and_no_kpi_card_is_alone_on_a_row(browsing, demo, width):
    browsing.page.set_viewport_size({"width": width, "height": 900})
    browsing.log_in(demo)
    for path in (f"/p/{demo.slug}/?range=24h", f"/p/{demo.slug}/tools/?range=24h", f"/p/{demo.slug}/sessions/",
                 f"/p/{demo.slug}/policy/"):
        browsing.open(path)
        assert _overflow(browsing.page) <= 0, (path, width)
        if width >= 1366:  # and on a laptop's screen no table scrolls sideways inside the page either
            assert _table_overflow(browsing.page) <= 0, (path, width)
    browsing.open(f"/p/{demo.slug}/?range=7d")
    rows = _cards_per_row(browsing.page)
    assert sum(rows) > 8 and (len(rows) == 1 or 2 * rows[-1] >= rows[0]), rows
    browsing.shot(f"overview-kpis-{width}")
    assert browsing.errors == []
