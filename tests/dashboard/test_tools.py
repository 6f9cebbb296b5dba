"""The tools table (server-side sorting and filtering) and a tool's page."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.urls import reverse

from dashboard.forms import TOOL_SORTS
from tests.admin.builders import make_tool
from tests.dashboard.builders import recent
from toolscope.policies.models import SearchHistory, Tool, ToolVersion
from toolscope.telemetry.models import ToolHourly
from toolscope.telemetry.services.hourly_deltas import daily_bins_add
from toolscope.telemetry.services.rollups import hour_floor
from toolscope.telemetry.sketches import bins_of

HOUR = hour_floor(recent(3))


def _hourly(project, tool_name, hour=HOUR, **figures):
    """A ToolHourly row, and its durations in its day's ToolDaily bins too, as processing adds
    them: a range reads a whole day's durations from ToolDaily (selectors.duration_quantiles), so
    an hour that falls on a whole day of the range (from midnight UTC to 3 a.m.) needs them."""
    row = ToolHourly.objects.create(project=project, hour=hour, tool_name=tool_name, **figures)
    if figures.get("duration_bins"):
        daily_bins_add(project.pk, {(hour.date(), tool_name): figures["duration_bins"]})
    return row


@pytest.fixture
def table(project):
    """alpha: busy, erring; beta: as many calls as alpha, none failing; gamma: advertised only;
    mystery: called, not in the catalog; delta: in the catalog, used 20 days ago only."""
    for name, tokens in (("alpha", 300), ("beta", 100), ("gamma", 500), ("delta", 50)):
        make_tool(project, name, schema_tokens=tokens)
    _hourly(project, "alpha", calls=1, errors=1, duration_bins=bins_of([10]), output_tokens=100,
            times_advertised=5, times_called=1)
    _hourly(project, "alpha", HOUR - timedelta(hours=1), calls=3, duration_bins=bins_of([20, 40, 80]),
            output_tokens=300, duplicates=2, times_advertised=5, times_called=3)
    _hourly(project, "beta", calls=4, output_tokens=40, times_advertised=10, times_called=4)
    _hourly(project, "gamma", times_advertised=10, schema_tokens=5000)
    _hourly(project, "mystery", calls=2, errors=2)
    _hourly(project, "delta", HOUR - timedelta(days=20), calls=7)
    return project


def _rows(client, project, **params):
    response = client.get(reverse("dashboard:tools", args=[project.slug]), params)
    assert response.status_code == 200
    return response.context["rows"]


def _names(client, project, **params):
    return [row["name"] for row in _rows(client, project, **params)]


@pytest.mark.django_db
def test_default_order_is_calls_descending_ties_by_name(viewer_client, table):
    assert _names(viewer_client, table) == ["alpha", "beta", "mystery", "delta", "gamma"]


@pytest.mark.django_db
def test_sort_by_name_both_ways(viewer_client, table):
    assert _names(viewer_client, table, sort="name") == ["alpha", "beta", "delta", "gamma", "mystery"]
    assert _names(viewer_client, table, sort="name", dir="desc") == ["mystery", "gamma", "delta", "beta", "alpha"]


@pytest.mark.django_db
def test_sort_by_error_rate_keeps_empty_values_last_and_ties_stable(viewer_client, table):
    assert _names(viewer_client, table, sort="error_rate", dir="desc") == ["mystery", "alpha", "beta", "delta", "gamma"]
    assert _names(viewer_client, table, sort="error_rate", dir="asc") == ["beta", "alpha", "mystery", "delta", "gamma"]


@pytest.mark.django_db
def test_sort_by_catalog_schema_tokens(viewer_client, table):
    assert _names(viewer_client, table, sort="catalog_schema_tokens") == ["gamma", "alpha", "beta", "delta", "mystery"]


@pytest.mark.django_db
def test_every_sort_key_is_accepted(viewer_client, table):
    for key, _ in TOOL_SORTS:
        assert len(_names(viewer_client, table, sort=key)) == 5, key


@pytest.mark.django_db
def test_an_unknown_sort_falls_back_to_calls(viewer_client, table):
    assert _names(viewer_client, table, sort="secret_hash")[0] == "alpha"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"q": "ALP"}, ["alpha"]),
        ({"show": "called"}, ["alpha", "beta", "mystery"]),
        ({"show": "unused"}, ["gamma"]),
        ({"show": "errors"}, ["alpha", "mystery"]),
        ({"show": "unknown"}, ["mystery"]),
        ({"q": "a", "show": "errors"}, ["alpha"]),
    ],
)
def test_filters(viewer_client, table, params, expected):
    assert _names(viewer_client, table, **params) == expected


@pytest.mark.django_db
def test_figures_of_a_row(viewer_client, table):
    alpha = next(row for row in _rows(viewer_client, table) if row["name"] == "alpha")
    assert (alpha["calls"], alpha["errors"], alpha["error_rate"]) == (4, 1, 0.25)
    # The two hours' sketches merged: 10, 20, 40, 80 ms, ranks floor(q * 3) are 20 and 40 ms (within 1%).
    assert (alpha["p50_ms"], alpha["p95_ms"]) == (pytest.approx(20, rel=0.01), pytest.approx(40, rel=0.01))
    assert (alpha["mean_output_tokens"], alpha["duplicate_rate"]) == (100, 0.5)
    assert (alpha["times_advertised"], alpha["times_called"], alpha["catalog_schema_tokens"]) == (10, 4, 300)
    assert alpha["last_used"] == HOUR


@pytest.mark.django_db
def test_last_used_looks_beyond_the_range_for_catalog_tools(viewer_client, table):
    delta = next(row for row in _rows(viewer_client, table) if row["name"] == "delta")
    assert (delta["calls"], delta["last_used"]) == (0, HOUR - timedelta(days=20))


@pytest.mark.django_db
def test_sort_links_flip_the_direction_and_keep_the_filters(viewer_client, table):
    html = viewer_client.get(reverse("dashboard:tools", args=[table.slug]), {"q": "a", "range": "30d"}).content.decode()
    assert "?q=a&amp;range=30d&amp;sort=calls&amp;dir=asc" in html
    assert "?q=a&amp;range=30d&amp;sort=name&amp;dir=asc" in html


@pytest.mark.django_db
def test_the_csv_follows_the_filter_and_order(viewer_client, table):
    response = viewer_client.get(reverse("dashboard:tools_csv", args=[table.slug]), {"sort": "name", "show": "called"})
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows[0][:4] == ["name", "in_catalog", "source", "calls"]
    assert [row[0] for row in rows[1:]] == ["alpha", "beta", "mystery"]


@pytest.mark.django_db
def test_tool_page_shows_versions_with_a_diff_and_token_change(viewer_client, project):
    tool = make_tool(project, "read_file", schema_tokens=120)
    old = ToolVersion.objects.create(tool=tool, schema_hash="old", input_schema={"type": "object"}, schema_tokens=90)
    ToolVersion.objects.filter(pk=old.pk).update(first_seen_at=old.first_seen_at - timedelta(days=1))
    ToolVersion.objects.create(tool=tool, schema_hash=tool.schema_hash, input_schema=tool.input_schema,
                               schema_tokens=120)
    response = viewer_client.get(reverse("dashboard:tool", args=[project.slug, "read_file"]))
    newest, oldest = response.context["versions"]
    assert (newest.schema_hash, newest.token_change, oldest.diff) == (tool.schema_hash, 30, [])
    assert any(line.startswith("+") and '"path"' in line for line in newest.diff)
    assert "diff-add" in response.content.decode()


@pytest.mark.django_db
def test_tool_page_of_a_tool_outside_the_catalog(viewer_client, table):
    response = viewer_client.get(reverse("dashboard:tool", args=[table.slug, "mystery"]))
    assert response.status_code == 200
    assert response.context["tool"] is None
    assert response.context["totals"]["calls"] == 2


@pytest.mark.django_db
def test_tool_page_of_a_name_never_seen_is_404(viewer_client, table):
    assert viewer_client.get(reverse("dashboard:tool", args=[table.slug, "nope"])).status_code == 404


@pytest.mark.django_db
def test_tool_page_lists_recent_errors_with_links_to_the_call(viewer_client, activity):
    response = viewer_client.get(reverse("dashboard:tool", args=[activity.project.slug, "read_file"]))
    (error,) = response.context["errors"]
    session = activity.sessions[0]
    assert error["session__client_id"] == session.client_id
    assert f"/p/acme/sessions/{session.client_id}/?range=7d#call-{error['id']}" in response.content.decode()


@pytest.mark.django_db
def test_tool_names_with_a_slash_have_pages(viewer_client, project):
    make_tool(project, "github/create_issue")
    response = viewer_client.get(reverse("dashboard:tool", args=[project.slug, "github/create_issue"]))
    assert response.status_code == 200
    assert response.context["name"] == "github/create_issue"
    csv_url = reverse("dashboard:tool_calls_csv", args=[project.slug, "github/create_issue"])
    assert viewer_client.get(csv_url).status_code == 200


@pytest.mark.django_db
def test_a_never_called_tool_says_so_instead_of_drawing_empty_axes(viewer_client, activity):
    response = viewer_client.get(reverse("dashboard:tool", args=[activity.project.slug, "grep"]))
    html = response.content.decode()
    assert response.context["totals"]["calls"] == 0
    assert response.context["charts"] == {}
    assert "data-chart" not in html
    assert "No calls in this range" in html


@pytest.mark.django_db
def test_a_called_tool_gets_its_calls_chart_and_both_histograms(viewer_client, activity):
    response = viewer_client.get(reverse("dashboard:tool", args=[activity.project.slug, "read_file"]))
    assert set(response.context["charts"]) == {"calls", "durations", "outputs"}
    assert "No calls in this range" not in response.content.decode()


@pytest.mark.django_db
def test_the_table_says_what_calls_and_turns_calling_count(viewer_client, table):
    html = viewer_client.get(reverse("dashboard:tools", args=[table.slug])).content.decode()
    labels = dict(TOOL_SORTS)
    assert (labels["calls"], labels["times_called"], labels["times_advertised"]) == (
        "Calls", "Turns calling", "Turns advertised")
    assert 'title="Tool calls: every call counts' in html
    assert 'title="Turns that called the tool at least once' in html


@pytest.fixture
def two_bashes(project):
    """bash from two sources with different schemas, read_file from one."""
    make_tool(project, "bash", source="local", description="The demo's bash.")
    make_tool(project, "bash", source="test-agent", description="Run it.")
    make_tool(project, "read_file", source="local")
    return project


@pytest.mark.django_db
def test_the_table_flags_a_name_several_sources_define(viewer_client, two_bashes):
    rows = {row["name"]: row for row in _rows(viewer_client, two_bashes)}

    assert (rows["bash"]["definitions"], rows["bash"]["definition_sources"]) == (2, ["local", "test-agent"])
    assert rows["bash"]["schemas_differ"] is True
    assert rows["read_file"]["definitions"] == 1
    page = viewer_client.get(reverse("dashboard:tools", args=[two_bashes.slug])).content.decode()
    assert page.count('data-flag="definitions"') == 1
    assert "2 definitions" in page


@pytest.mark.django_db
def test_tool_page_lists_every_sources_definition_and_shows_the_one_asked_for(viewer_client, two_bashes):
    url = reverse("dashboard:tool", args=[two_bashes.slug, "bash"])
    Tool.objects.filter(project=two_bashes, source="test-agent").update(last_seen_at=recent(1))
    Tool.objects.filter(project=two_bashes, source="local").update(last_seen_at=recent(2))

    latest = viewer_client.get(url)
    chosen = viewer_client.get(url, {"source": "local"})

    assert [tool.source for tool in latest.context["definitions"]] == ["test-agent", "local"]
    assert latest.context["tool"].description == "Run it."
    assert chosen.context["tool"].description == "The demo's bash."
    assert 'data-flag="definitions"' in chosen.content.decode()


@pytest.mark.django_db
def test_error_text_nothing_flagged_is_counted_beside_the_error_rate(viewer_client, table):
    """Issue 12: a server that answers "Error: ..." without a flag; the call's status stays as
    reported, and the tools page shows how many such calls each tool had."""
    ToolHourly.objects.filter(project=table, tool_name="beta").update(unflagged_errors=3)
    rows = {row["name"]: row for row in _rows(viewer_client, table)}
    assert (rows["beta"]["errors"], rows["beta"]["unflagged_errors"]) == (0, 3)
    assert rows["alpha"]["unflagged_errors"] == 0
    page = viewer_client.get(reverse("dashboard:tools", args=[table.slug])).content.decode()
    assert page.count('data-flag="unflagged"') == 1 and "+3 error text, not flagged" in page


@pytest.mark.django_db
def test_tool_page_shows_what_agents_asked_before_calling_it(viewer_client, project, other_project):
    make_tool(project, "read_file")
    texts = ["Fix the <b>login</b> bug", "open the config"]
    SearchHistory.objects.create(project=project, tools={"read_file": texts, "bash": ["run it"]}, revision="r",
                                 refreshed_at=recent(1))
    SearchHistory.objects.create(project=other_project, tools={"read_file": ["another tenant's words"]},
                                 revision="s", refreshed_at=recent(1))
    response = viewer_client.get(reverse("dashboard:tool", args=[project.slug, "read_file"]))
    assert response.context["search"]["texts"] == texts
    content = response.content.decode()
    assert "Fix the &lt;b&gt;login&lt;/b&gt; bug" in content and "run it" not in content
    assert "another tenant" not in content


@pytest.mark.django_db
def test_tool_page_says_when_nothing_was_learned(viewer_client, project):
    make_tool(project, "read_file")
    response = viewer_client.get(reverse("dashboard:tool", args=[project.slug, "read_file"]))
    assert response.context["search"] == {"texts": [], "refreshed_at": None}
    assert "Nothing learned yet" in response.content.decode()
