"""Issue 28, item 7: a long session's page reads like a trace. Each turn is a collapsible row
whose summary line gives its latency, tokens and cost; outputs are previews with the whole text
a link away; a 1,000-call session's pages stay under 1 MB and cost the same queries as a short
session's. Sessions come through the real ingest path (tests/trace_session.py)."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from dashboard import charts
from dashboard.templatetags.dashboard_tags import ms, num, usd
from dashboard.views.sessions import OPEN_TURNS, PREVIEW_CHARS
from tests.factories import make_project
from tests.trace_session import trace_session
from toolscope.telemetry.models import ToolCall, Turn

pytestmark = pytest.mark.django_db
# session + user + project/membership + the page's selectors (tests/dashboard/test_query_counts.py).
SESSION_PAGE_QUERIES = 9


def _url(session) -> str:
    return reverse("dashboard:session", args=[session.project.slug, session.client_id])


def _summaries(html: str) -> dict[int, str]:
    """Each turn's summary line as text, by turn index."""
    found = re.findall(r'<details class="turn[^"]*" id="turn-(\d+)"[^>]*>\s*<summary class="turn-head">(.*?)</summary>',
                       html, re.S)
    return {int(index): unescape(re.sub(r"<[^>]+>", " ", body)) for index, body in found}


@pytest.fixture
def short(project):
    return trace_session(project, calls=60, session_id="short")


@pytest.fixture
def long(project):
    return trace_session(project, calls=1_000, session_id="long")


def test_each_turns_summary_gives_its_latency_tokens_and_cost(viewer_client, short):
    page = viewer_client.get(_url(short))
    summaries = _summaries(page.content.decode())
    turns = {turn["index"]: turn for turn in page.context["transcript"]}
    assert summaries.keys() == turns.keys() == set(Turn.objects.values_list("index", flat=True))
    for turn in Turn.objects.all():
        line = summaries[turn.index]
        assert ms(turn.latency_ms) in line
        assert f"out {num(turn.output_tokens)}" in line and f"cached {num(turn.cached_tokens)}" in line
        assert f"in {num(turn.input_tokens)}" in line
        assert turns[turn.index]["usd"] is not None and usd(turns[turn.index]["usd"]) in line
        calls = ToolCall.objects.filter(turn_index=turn.index).count()
        assert f"{calls} call" in line


def test_only_the_first_turns_are_open(viewer_client, short):
    html = viewer_client.get(_url(short)).content.decode()
    opened = re.findall(r'<details class="turn[^"]*" id="turn-(\d+)" data-turn="\d+" open>', html)
    assert opened == [str(index) for index in range(OPEN_TURNS)]
    assert len(_summaries(html)) > OPEN_TURNS


def test_a_turns_errors_are_counted_on_its_summary(viewer_client, short):
    failed = ToolCall.objects.filter(status="error").first()
    assert failed is not None
    line = _summaries(viewer_client.get(_url(short)).content.decode())[failed.turn_index]
    assert "1 not ok" in line


def test_a_long_output_is_a_preview_with_a_link_to_the_whole_text(viewer_client, short):
    call = max(ToolCall.objects.all(), key=lambda c: len(c.output))
    assert len(call.output) > PREVIEW_CHARS
    html = viewer_client.get(_url(short)).content.decode()
    link = f"/p/{short.project.slug}/sessions/{short.client_id}/calls/{call.pk}.txt"
    assert f'href="{link}"' in html
    assert f"({num(len(call.output) - PREVIEW_CHARS)} more characters)" in html
    whole = viewer_client.get(link)
    assert whole.status_code == 200 and whole["Content-Type"].startswith("text/plain")
    assert whole.content.decode() == call.output


def test_the_whole_output_is_the_sessions_own(viewer_client, outsider_client, short):
    other = trace_session(make_project("other"), calls=3, session_id="short")
    foreign = ToolCall.objects.filter(session=other).first()
    own = ToolCall.objects.filter(session=short).first()
    base = f"/p/{short.project.slug}/sessions/{short.client_id}/calls"
    assert viewer_client.get(f"{base}/{foreign.pk}.txt").status_code == 404
    assert viewer_client.get(f"{base}/{own.pk}.txt?original=1").status_code == 404  # nothing was compacted
    assert outsider_client.get(f"{base}/{own.pk}.txt").status_code in (403, 404)


def test_every_page_of_a_1000_call_session_is_under_1_mb(viewer_client, long):
    assert long.tool_call_count == 1_000
    url, pages, seen = _url(long), 0, 0
    params: dict[str, str] = {}
    while True:
        page = viewer_client.get(url, params)
        assert page.status_code == 200
        assert len(page.content) < 1_000_000, (pages, len(page.content))
        pages, seen = pages + 1, seen + page.context["paging"]["calls"]
        if not page.context["paging"]["next"]:
            break
        params = {"after": page.context["paging"]["next"]}
    assert seen == 1_000 and pages > 1


def _queries(client, url: str, **params: str) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url, params).status_code == 200
    return [query["sql"][:80] for query in queries.captured_queries]


def test_a_session_page_costs_the_same_queries_for_60_calls_as_for_1000(viewer_client, short, long):
    assert len(_queries(viewer_client, _url(short))) == SESSION_PAGE_QUERIES
    assert len(_queries(viewer_client, _url(long))) == SESSION_PAGE_QUERIES
    # A later page reads one more: the first occurrences, on earlier pages, of its repeats.
    assert len(_queries(viewer_client, _url(long), turn="300")) == SESSION_PAGE_QUERIES + 1


def test_the_timeline_of_1000_calls_has_a_row_per_tool_and_no_label_per_call():
    calls = [{"turn_index": n // 2, "tool_name": f"tool_{n % 25}", "status": "ok", "duration_ms": 20,
              "offset_s": n * 0.5} for n in range(1_000)]
    figure = charts.session_timeline(calls)
    rows = list(figure.layout.yaxis.categoryarray)
    assert len(rows) == charts.TIMELINE_ROWS and rows[-1] == charts.OTHER_TOOLS
    assert len(figure.data) == 1 and figure.data[0].text is None
    assert set(figure.data[0].y) == set(rows) and len(figure.data[0].base) == 1_000
    assert figure.layout.height < 500


def test_the_budget_charts_buttons_are_above_the_plot_and_its_legend_below():
    turns = [{"index": i, "system_prompt_tokens": 100, "schema_tokens": 100, "message_tokens": 0,
              "call_tokens": 0, "tool_output_tokens": 10, "estimated_input_tokens": 210, "input_tokens": 250,
              "unattributed_tokens": 40} for i in range(3)]
    figure = charts.session_budget(turns, components=charts_components(), context_window=200_000)
    assert figure.layout.legend.y < 0 and figure.layout.legend.yanchor == "top"
    (menu,) = figure.layout.updatemenus
    assert menu.y > 1 and menu.yanchor == "bottom"


def charts_components() -> list[tuple[str, str]]:
    from dashboard.selectors import COMPONENTS

    return list(COMPONENTS)
