"""rollups_rebuild: an hour's ToolHourly and ProjectHourly rows, recomputed whole from raw rows."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests import factories
from tests.rollups.dataset import H0, H1, at, build_dataset
from toolscope.telemetry.models import ProjectHourly, ToolCall, ToolHourly, Turn
from toolscope.telemetry.services.rollups import rollups_rebuild
from toolscope.telemetry.sketches import RELATIVE_ACCURACY, bins_of

ROLLUP_FIELDS = ("calls", "errors", "duration_bins", "duration_p50_ms", "duration_p95_ms", "output_tokens",
                 "duplicates", "duplicate_tokens", "compactions", "compaction_savings", "times_advertised",
                 "times_called", "schema_tokens")
PROJECT_FIELDS = ("sessions", "turns", "tool_calls", "errors", "near_window_turns", "system_prompt_tokens",
                  "schema_tokens", "message_tokens", "tool_output_tokens", "estimated_input_tokens",
                  "provider_input_tokens", "provider_output_tokens", "duplicate_tokens", "compaction_savings")


def tool_rows(project, hour) -> dict[str, dict]:
    rows = ToolHourly.objects.filter(project=project, hour=hour).values("tool_name", *ROLLUP_FIELDS)
    return {row.pop("tool_name"): row for row in rows}


def project_row(project, hour) -> dict | None:
    return ProjectHourly.objects.filter(project=project, hour=hour).values(*PROJECT_FIELDS).first()


def snapshot(project) -> list[tuple]:
    tools = ToolHourly.objects.filter(project=project).order_by("hour", "tool_name")
    hours = ProjectHourly.objects.filter(project=project).order_by("hour")
    return [*tools.values_list("hour", "tool_name", *ROLLUP_FIELDS), *hours.values_list("hour", *PROJECT_FIELDS)]


@pytest.fixture
def rebuilt(dataset):
    rollups_rebuild(project_id=dataset.pk, hours=[H0 - timedelta(hours=1), H0, H1])
    return dataset


def test_counts_calls_errors_and_output_tokens_per_tool(rebuilt):
    read_file = tool_rows(rebuilt, H0)["read_file"]
    assert (read_file["calls"], read_file["errors"], read_file["output_tokens"]) == (4, 1, 600)


def test_duration_percentiles_come_from_the_sketch_of_the_hours_durations(rebuilt):
    rows = tool_rows(rebuilt, H0)
    # read_file took 10, 20, 30 and 40 ms: ranks floor(q * 3) are 20 ms (p50) and 30 ms (p95).
    assert rows["read_file"]["duration_bins"] == bins_of([10, 20, 30, 40])
    assert (rows["read_file"]["duration_p50_ms"], rows["read_file"]["duration_p95_ms"]) == (
        pytest.approx(20, rel=RELATIVE_ACCURACY), pytest.approx(30, rel=RELATIVE_ACCURACY))
    assert (rows["bash"]["duration_p50_ms"], rows["bash"]["duration_p95_ms"]) == (
        pytest.approx(7, rel=RELATIVE_ACCURACY), pytest.approx(7, rel=RELATIVE_ACCURACY))
    assert rows["web_search"]["duration_p50_ms"] is None


def test_counts_duplicates_and_compaction_savings(rebuilt):
    read_file = tool_rows(rebuilt, H0)["read_file"]
    assert (read_file["duplicates"], read_file["duplicate_tokens"]) == (1, 100)
    assert (read_file["compactions"], read_file["compaction_savings"]) == (1, 1000 - 200)


def test_times_advertised_counts_turns_and_times_called_counts_distinct_turns(rebuilt):
    rows = tool_rows(rebuilt, H0)
    assert (rows["read_file"]["times_advertised"], rows["read_file"]["times_called"]) == (3, 1)
    assert (rows["bash"]["times_advertised"], rows["bash"]["times_called"]) == (3, 2)


def test_a_tool_advertised_but_never_called_gets_a_row_with_no_calls(rebuilt):
    grep = tool_rows(rebuilt, H0)["grep"]
    assert (grep["calls"], grep["times_advertised"], grep["times_called"]) == (0, 2, 0)


def test_a_tool_called_but_never_advertised_counts_its_calls_only(rebuilt):
    web_search = tool_rows(rebuilt, H0)["web_search"]
    assert (web_search["calls"], web_search["errors"], web_search["times_advertised"]) == (1, 1, 0)


def test_schema_tokens_use_the_advertised_version_then_the_tool_then_zero(rebuilt):
    rows = tool_rows(rebuilt, H0)
    assert rows["read_file"]["schema_tokens"] == 3 * 120
    assert rows["bash"]["schema_tokens"] == 3 * 50
    assert rows["grep"]["schema_tokens"] == 0


def test_project_hourly_sums_turn_budgets_and_the_hours_calls(rebuilt):
    assert project_row(rebuilt, H0) == {
        "sessions": 1, "turns": 3, "tool_calls": 7, "errors": 3, "near_window_turns": 1,
        "system_prompt_tokens": 300, "schema_tokens": 800, "message_tokens": 30, "tool_output_tokens": 130,
        "estimated_input_tokens": 1260, "provider_input_tokens": 790, "provider_output_tokens": 90,
        "duplicate_tokens": 100, "compaction_savings": 800,
    }


def test_sessions_count_in_the_hour_they_started(rebuilt):
    assert project_row(rebuilt, H0 - timedelta(hours=1))["sessions"] == 1
    assert project_row(rebuilt, H1)["sessions"] == 0


def test_each_hour_is_rolled_up_apart(rebuilt):
    rows = tool_rows(rebuilt, H1)
    assert (rows["read_file"]["calls"], rows["read_file"]["schema_tokens"]) == (1, 120)
    assert (rows["bash"]["calls"], rows["bash"]["times_advertised"]) == (0, 1)
    assert project_row(rebuilt, H1)["estimated_input_tokens"] == 500


def test_rebuilding_twice_gives_identical_rows(rebuilt):
    before = snapshot(rebuilt)
    rollups_rebuild(project_id=rebuilt.pk, hours=[H0, H1])
    assert snapshot(rebuilt) == before


def test_rebuilds_only_the_hours_asked_for(dataset):
    rollups_rebuild(project_id=dataset.pk, hours=[at(H0, 30)])
    assert set(ProjectHourly.objects.values_list("hour", flat=True)) == {H0}


def test_an_hour_whose_rows_are_all_deleted_ends_with_no_rows(rebuilt):
    ToolCall.objects.filter(started_at__gte=H1).delete()
    Turn.objects.filter(started_at__gte=H1).delete()
    rollups_rebuild(project_id=rebuilt.pk, hours=[H1])
    assert not ToolHourly.objects.filter(hour=H1).exists()
    assert project_row(rebuilt, H1) is None


def test_rebuilding_a_project_never_touches_another_projects_rollups(rebuilt, other_project):
    build_dataset(other_project)
    rollups_rebuild(project_id=other_project.pk, hours=[H0])
    others = snapshot(other_project)
    ToolCall.objects.filter(project=rebuilt).delete()
    rollups_rebuild(project_id=rebuilt.pk, hours=[H0, H1])
    assert snapshot(other_project) == others
    assert tool_rows(rebuilt, H0)["read_file"]["calls"] == 0


def test_rollups_read_only_the_projects_own_raw_rows(rebuilt, other_project):
    build_dataset(other_project)
    rollups_rebuild(project_id=rebuilt.pk, hours=[H0])
    assert tool_rows(rebuilt, H0)["read_file"]["calls"] == 4


def _queries_to_rebuild(calls: int) -> int:
    project = factories.make_project()
    session = factories.make_session(project, started_at=H0)
    turns = [factories.make_turn(session, index, started_at=at(H0, index)) for index in range(3)]
    for number in range(calls):
        factories.make_tool_call(turns[number % 3], ("read_file", "bash")[number % 2], started_at=at(H0, 5),
                                 duration_ms=number, output_tokens=number)
    with CaptureQueriesContext(connection) as captured:
        rollups_rebuild(project_id=project.pk, hours=[H0])
    return len(captured)


def test_the_number_of_queries_does_not_grow_with_the_number_of_rows(db):
    assert _queries_to_rebuild(200) == _queries_to_rebuild(10) <= 16
