"""dirty_hours_mark and rollups_refresh: marked hours are claimed, rebuilt and cleared."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from tests import factories
from tests.rollups.dataset import H0, H1, at
from toolscope.telemetry.models import DirtyHour, ProjectHourly, ToolHourly
from toolscope.telemetry.services.rollups import dirty_hours_mark, rollups_rebuild, rollups_refresh


def marked(project) -> set[datetime]:
    return set(DirtyHour.objects.filter(project=project).values_list("hour", flat=True))


def test_marks_one_row_per_utc_hour_whatever_the_timestamps(project):
    two_hours_east = timezone(timedelta(hours=2))
    moments = [at(H0, 5), at(H0, 59), datetime(2026, 11, 20, 12, 30, tzinfo=two_hours_east), at(H1, 1)]
    dirty_hours_mark(project_id=project.pk, timestamps=moments)
    assert marked(project) == {H0, H1}


def test_marking_an_hour_again_bumps_its_mark(project):
    dirty_hours_mark(project_id=project.pk, timestamps=[H0])
    first = DirtyHour.objects.get(project=project).marked_at
    dirty_hours_mark(project_id=project.pk, timestamps=[at(H0, 10)])
    assert DirtyHour.objects.get(project=project).marked_at > first


def test_refresh_rebuilds_the_marked_hours_and_clears_their_marks(dataset):
    dirty_hours_mark(project_id=dataset.pk, timestamps=[at(H0, 5), at(H1, 5)])
    assert rollups_refresh() == 2
    assert set(ProjectHourly.objects.values_list("hour", flat=True)) == {H0, H1}
    assert not DirtyHour.objects.exists()


def test_refresh_claims_at_most_limit_marks_oldest_first(project):
    for hour in (H1, H0, H0 + timedelta(hours=5)):
        dirty_hours_mark(project_id=project.pk, timestamps=[hour])
    assert rollups_refresh(limit=2) == 2
    assert marked(project) == {H0 + timedelta(hours=5)}


def test_refresh_with_nothing_marked_rebuilds_nothing(db):
    assert rollups_refresh() == 0


def test_late_data_changes_its_hour_and_leaves_the_others_untouched(dataset):
    rollups_rebuild(project_id=dataset.pk, hours=[H0, H1])
    untouched = list(ToolHourly.objects.filter(hour=H1).order_by("pk").values())
    turn = dataset.sessions.get(started_at=at(H0, 1)).turns.get(index=0)
    late = factories.make_tool_call(turn, "read_file", started_at=at(H0, 59), duration_ms=50)
    dirty_hours_mark(project_id=dataset.pk, timestamps=[late.started_at])
    rollups_refresh()
    assert ToolHourly.objects.get(hour=H0, tool_name="read_file").calls == 5
    assert list(ToolHourly.objects.filter(hour=H1).order_by("pk").values()) == untouched


def test_refresh_rebuilds_each_projects_marks_for_that_project(dataset, other_project):
    session = factories.make_session(other_project, started_at=at(H1, 1))
    dirty_hours_mark(project_id=dataset.pk, timestamps=[H0])
    dirty_hours_mark(project_id=other_project.pk, timestamps=[session.started_at])
    assert rollups_refresh() == 2
    assert list(ProjectHourly.objects.filter(project=dataset).values_list("hour", flat=True)) == [H0]
    assert ProjectHourly.objects.get(project=other_project).hour == H1
