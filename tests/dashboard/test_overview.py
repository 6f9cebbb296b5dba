"""The overview: KPIs against the previous period, tokens by component, top tools, dead weight."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.urls import reverse

from tests.dashboard.builders import recent
from toolscope.telemetry.models import ProjectHourly, ToolHourly
from toolscope.telemetry.services.rollups import hour_floor

NOW_HOUR = hour_floor(recent(2))


def _project_hour(project, hour, **figures):
    return ProjectHourly.objects.create(project=project, hour=hour, **figures)


@pytest.fixture
def hours(project):
    """Two hours in the last 24 h, one 3 days ago, and one 8 days ago (the previous 7 days)."""
    # 8 of its 10 turns have provider counts: 1,000 reported, against those turns' 900 estimated.
    _project_hour(project, NOW_HOUR, sessions=2, turns=10, tool_calls=20, errors=2, provider_input_tokens=1000,
                  schema_tokens=300, estimated_input_tokens=1000, system_prompt_tokens=500, message_tokens=100,
                  tool_output_tokens=100, duplicate_tokens=50, compaction_savings=70, reported_turns=8,
                  reported_schema_tokens=200, reported_estimated_tokens=900)
    _project_hour(project, NOW_HOUR - timedelta(hours=1), sessions=1, turns=5, tool_calls=5, errors=0,
                  schema_tokens=100, estimated_input_tokens=1000)
    _project_hour(project, NOW_HOUR - timedelta(days=3), sessions=1, turns=5, tool_calls=5, errors=3)
    _project_hour(project, NOW_HOUR - timedelta(days=8), sessions=2, turns=4, tool_calls=10, errors=1,
                  schema_tokens=100, estimated_input_tokens=1000, duplicate_tokens=100)
    return project


def _kpis(client, project, **params):
    response = client.get(reverse("dashboard:overview", args=[project.slug]), params)
    assert response.status_code == 200
    return {kpi.key: kpi for kpi in response.context["kpis"]}


@pytest.mark.django_db
def test_kpis_over_the_default_range_beside_the_previous_week(viewer_client, hours):
    kpis = _kpis(viewer_client, hours)
    assert {key: kpi.current for key, kpi in kpis.items()} == {
        "sessions": 4, "turns": 20, "tool_calls": 30, "provider_input_tokens": 1000, "schema_share": 0.2,
        "unattributed_share": 0.1, "duplicate_tokens": 50, "compaction_savings": 70, "error_rate": 5 / 30,
        # No request priced: no dollars, never $0 (tests/dashboard/test_session_cost.py prices some).
        "cost": None, "month_cost": None, "schema_cost_share": None, "cache_breaks": 0,
    }
    # Each share names what it divides: the provider's count where the provider reported.
    assert kpis["schema_share"].label == "Tool schemas, of provider-reported input"
    assert kpis["error_rate"].label == "Tool call errors, of calls"
    assert kpis["sessions"].previous == 2
    assert kpis["sessions"].change == 1.0
    assert kpis["duplicate_tokens"].change == -0.5
    assert kpis["duplicate_tokens"].verdict == "good"
    assert kpis["schema_share"].change == pytest.approx(10.0)  # points: 20% against 10%
    assert kpis["schema_share"].verdict == "bad"
    assert kpis["compaction_savings"].change is None  # nothing to compare with


@pytest.mark.django_db
def test_the_schema_share_divides_the_reported_turns_schemas_by_the_providers_count(viewer_client, hours):
    """Not the estimate of all turns: 300 of the hour's 1,000 estimated tokens are schemas (30%), but
    of the 1,000 tokens the provider billed for the 8 reported turns, 200 are (20%)."""
    assert _kpis(viewer_client, hours)["schema_share"].current == 0.2


@pytest.mark.django_db
def test_without_provider_counts_the_schema_share_says_it_divides_the_estimate(viewer_client, project):
    _project_hour(project, NOW_HOUR, turns=5, schema_tokens=100, estimated_input_tokens=400)
    kpis = _kpis(viewer_client, project)
    assert kpis["schema_share"].current == 0.25
    assert kpis["schema_share"].label == "Tool schemas, of estimated input (no provider counts)"
    assert kpis["unattributed_share"].current is None


@pytest.mark.django_db
def test_the_kpi_csv_keeps_ratios_and_percentage_points_in_separate_columns(viewer_client, hours):
    response = viewer_client.get(reverse("dashboard:kpis_csv", args=[hours.slug]))
    rows = {row[0]: row for row in csv.reader(io.StringIO(b"".join(response.streaming_content).decode()))}
    assert rows["key"] == ["key", "label", "unit", "current", "previous", "change_ratio", "change_points"]
    assert rows["sessions"][2:] == ["count", "4", "2", "1.0", ""]  # +100%: a ratio
    assert rows["schema_share"][2:] == ["ratio", "0.2", "0.1", "", "10.0"]  # 20% against 10%: +10 points


@pytest.mark.django_db
def test_kpi_cards_keep_each_value_with_its_unit(viewer_client, hours):
    html = viewer_client.get(reverse("dashboard:overview", args=[hours.slug])).content.decode()
    assert "vs previous 7\N{NO-BREAK SPACE}d" in html
    assert "+10.0\N{NO-BREAK SPACE}pp" in html
    assert '<span class="muted nowrap">vs previous' in html


@pytest.mark.django_db
@pytest.mark.parametrize(("range_key", "adjective"), [("24h", "hourly"), ("7d", "hourly"), ("30d", "daily")])
def test_the_range_bar_names_the_chart_interval(viewer_client, hours, range_key, adjective):
    html = viewer_client.get(reverse("dashboard:overview", args=[hours.slug]), {"range": range_key}).content.decode()
    assert f"· {adjective}</span>" in html
    assert "dayly" not in html


@pytest.mark.django_db
def test_the_time_range_changes_the_numbers(viewer_client, hours):
    assert _kpis(viewer_client, hours, range="24h")["tool_calls"].current == 25
    assert _kpis(viewer_client, hours, range="7d")["tool_calls"].current == 30
    assert _kpis(viewer_client, hours, range="30d")["tool_calls"].current == 40
    day = NOW_HOUR - timedelta(days=3)
    custom = {"range": "custom", "start": day.date().isoformat(), "end": day.date().isoformat()}
    assert _kpis(viewer_client, hours, **custom)["tool_calls"].current == 5


@pytest.mark.django_db
def test_tokens_are_hourly_up_to_a_week_and_daily_beyond(viewer_client, hours):
    response = viewer_client.get(reverse("dashboard:overview", args=[hours.slug]))
    series = response.context["series"]
    assert len(series) == 7 * 24
    by_bucket = {row["bucket"]: row for row in series}
    assert by_bucket[NOW_HOUR]["schema_tokens"] == 300
    assert by_bucket[NOW_HOUR - timedelta(hours=2)]["schema_tokens"] == 0  # filled
    daily = viewer_client.get(reverse("dashboard:overview", args=[hours.slug]), {"range": "30d"}).context["series"]
    assert len(daily) in (30, 31)  # the first day may be partial
    assert sum(row["schema_tokens"] for row in daily) == 500


@pytest.mark.django_db
def test_top_tools_and_dead_weight(viewer_client, project):
    hour = NOW_HOUR
    for name, calls, advertised, schema in (("busy", 9, 5, 500), ("idle", 0, 5, 900), ("cheap_idle", 0, 5, 10),
                                            ("quiet", 1, 5, 100)):
        ToolHourly.objects.create(project=project, hour=hour, tool_name=name, calls=calls,
                                  times_advertised=advertised, schema_tokens=schema)
    context = viewer_client.get(reverse("dashboard:overview", args=[project.slug])).context
    assert [row["name"] for row in context["by_calls"]] == ["busy", "quiet"]
    assert [row["name"] for row in context["by_schema"]] == ["idle", "busy", "quiet", "cheap_idle"]
    assert [row["name"] for row in context["dead"]] == ["idle", "cheap_idle"]
    assert context["dead_tokens"] == 910


@pytest.mark.django_db
def test_an_invalid_custom_range_falls_back_and_says_why(viewer_client, hours):
    response = viewer_client.get(reverse("dashboard:overview", args=[hours.slug]),
                                 {"range": "custom", "start": "2026-01-10", "end": "2026-01-01"})
    assert response.status_code == 200
    assert response.context["range"].key == "7d"
    assert "The end date is before the start date." in response.content.decode()


@pytest.mark.django_db
def test_links_carry_the_range(viewer_client, hours):
    html = viewer_client.get(reverse("dashboard:overview", args=[hours.slug]), {"range": "30d"}).content.decode()
    for path in ("/p/acme/tools/?range=30d", "/p/acme/sessions/?range=30d", "/p/acme/tokens.csv?range=30d",
                 "/p/acme/kpis.csv?range=30d", "/p/acme/dead-weight.csv?range=30d"):
        assert path in html, path
