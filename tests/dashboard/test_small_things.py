"""Issue 28, item 10: the small things a first user tripped on."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.urls import reverse

from dashboard import charts
from dashboard.forms import TimeRangeForm
from dashboard.selectors.overview import Kpi
from dashboard.templatetags.dashboard_tags import kpi_change
from dashboard.views.overview import kpi_columns
from tests.admin.builders import make_policy, make_tool
from toolscope.policies.models import PolicyAuditEntry, Tool


def test_outputs_of_one_size_draw_a_bar_of_their_own():
    (only,), log = charts.histogram_bins([512, 512, 512])
    assert (only.count, log) == (3, False) and only.low < 512 < only.high
    bar = charts.histogram([512, 512, 512], title="Output size", unit="tokens").data[0]
    assert bar.width[0] > 0 and list(bar.y) == [3]
    (zero,), _ = charts.histogram_bins([0, 0])
    assert zero.low < 0 < zero.high


@pytest.mark.parametrize(("current", "previous", "shown", "verdict"), [
    (1004, 1000, "0%", ""),  # +0.4%: printed as no change, so not coloured
    (1006, 1000, "+1%", "bad"),
    (994, 1000, "-1%", "good"),
])
def test_a_change_shown_as_zero_is_not_coloured(current, previous, shown, verdict):
    kpi = Kpi("errors", "Errors", "count", "down", current, previous)
    assert (kpi_change(kpi), kpi.verdict) == (shown, verdict)
    share = Kpi("error_rate", "Error rate", "share", "down", 0.1002, 0.1)
    assert (kpi_change(share), share.verdict) == ("0.0\N{NO-BREAK SPACE}pp", "")


def test_the_kpi_grid_never_leaves_a_card_alone_on_a_row():
    assert kpi_columns(13) == {"wide": 8, "medium": 5}  # 8 + 5, or 5 + 5 + 3
    assert kpi_columns(21) == {"wide": 8, "medium": 3}  # 8 + 8 + 5, or 3 x 7
    for count in range(1, 40):
        for columns in kpi_columns(count).values():
            last = count % columns
            assert last == 0 or 2 * last >= columns, (count, columns)


def test_a_preset_range_says_it_counts_its_last_hour_whole():
    time_range = TimeRangeForm({"range": "24h"}).time_range(now=datetime(2026, 11, 20, 10, 54, tzinfo=UTC))
    assert time_range.label == "2026-11-19 11:00 to 2026-11-20 10:59 UTC"
    custom = TimeRangeForm({"range": "custom", "start": "2026-11-01", "end": "2026-11-07"}).time_range(
        now=datetime(2026, 11, 20, tzinfo=UTC))
    assert custom.label == "2026-11-01 to 2026-11-07 UTC"


@pytest.fixture
def bash(project):
    tool = make_tool(project, "bash")
    make_tool(project, "bash", source="other-agent")
    make_policy(project, always_on=[tool])
    return tool


def _settings(**values):
    return {"scope": "write", "requires_approval": "on", "redact": "password, token",
            "max_result_tokens": "800", "on_schema_error": "return_error", "retry_policy": "{}", **values}


def test_an_editor_sets_a_tools_settings_on_the_dashboard_for_every_source(editor_client, project, bash, editor):
    url = reverse("dashboard:tool_settings", args=[project.slug, "bash"])
    response = editor_client.post(url, _settings())
    assert response.status_code == 302 and response["Location"].endswith("/tools/bash/#settings")
    rows = Tool.objects.filter(project=project, name="bash")
    assert {(t.scope, t.requires_approval, tuple(t.redact), t.max_result_tokens) for t in rows} == {
        ("write", True, ("password", "token"), 800)}
    entry = PolicyAuditEntry.objects.get()
    assert entry.user == editor and "bash" in entry.summary and "before" in entry.detail  # undoable
    page = editor_client.get(reverse("dashboard:tool", args=[project.slug, "bash"]))
    assert b"data-tool-settings" in page.content and b'value="password, token"' in page.content


def test_bad_settings_are_refused_naming_the_field(editor_client, project, bash):
    url = reverse("dashboard:tool_settings", args=[project.slug, "bash"])
    response = editor_client.post(url, _settings(max_result_tokens="-5"), follow=True)
    assert "Not saved: Max result tokens:" in response.content.decode()
    assert Tool.objects.get(pk=bash.pk).max_result_tokens is None


def test_viewers_read_the_settings_and_only_editors_change_them(viewer_client, outsider_client, project, bash):
    url = reverse("dashboard:tool_settings", args=[project.slug, "bash"])
    assert viewer_client.post(url, _settings()).status_code == 403
    assert outsider_client.post(url, _settings()).status_code == 404
    page = viewer_client.get(reverse("dashboard:tool", args=[project.slug, "bash"])).content.decode()
    assert "data-tool-settings" in page and "Save settings" not in page
    assert Tool.objects.get(pk=bash.pk).scope != "write"
