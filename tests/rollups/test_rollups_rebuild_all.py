"""rollups_rebuild_all: every hour of every day with data, a day per transaction."""

from __future__ import annotations

from datetime import timedelta

from tests.rollups.dataset import H0, H1, build_dataset
from toolscope.telemetry.models import ProjectHourly, ToolHourly
from toolscope.telemetry.services.rollups import rollups_rebuild_all


def test_rebuilds_every_hour_that_has_raw_rows(dataset):
    assert rollups_rebuild_all(project_id=dataset.pk) == 24
    assert set(ProjectHourly.objects.values_list("hour", flat=True)) == {H0 - timedelta(hours=1), H0, H1}
    assert ToolHourly.objects.get(hour=H0, tool_name="read_file").calls == 4


def test_clears_rollups_of_days_whose_raw_rows_are_gone(dataset):
    stale = H0 - timedelta(days=3)
    ProjectHourly.objects.create(project=dataset, hour=stale, turns=9)
    rollups_rebuild_all(project_id=dataset.pk)
    assert not ProjectHourly.objects.filter(hour=stale).exists()


def test_rebuilds_only_the_project_asked_for(dataset, other_project):
    build_dataset(other_project)
    rollups_rebuild_all(project_id=dataset.pk)
    assert not ProjectHourly.objects.filter(project=other_project).exists()


def test_without_a_project_rebuilds_every_project(dataset, other_project):
    build_dataset(other_project)
    assert rollups_rebuild_all() == 48
    assert ProjectHourly.objects.filter(project=other_project).count() == 3
