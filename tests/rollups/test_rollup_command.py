"""manage.py rollup: refreshes dirty hours, or with --all rebuilds every hour with data."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.rollups.dataset import H0, H1, build_dataset
from toolscope.telemetry.models import DirtyHour, ProjectHourly
from toolscope.telemetry.services.rollups import dirty_hours_mark


def rollup(*args: str) -> str:
    out = StringIO()
    call_command("rollup", *args, stdout=out)
    return out.getvalue()


def test_without_all_refreshes_the_dirty_hours(dataset):
    dirty_hours_mark(project_id=dataset.pk, timestamps=[H0, H1])
    assert "Refreshed 2 dirty hours" in rollup("--limit", "1")
    assert not DirtyHour.objects.exists()
    assert ProjectHourly.objects.count() == 2


def test_all_rebuilds_every_project_and_says_so(dataset, other_project):
    build_dataset(other_project)
    output = rollup("--all")
    assert "acme: rebuilt 24 hours" in output
    assert "globex: rebuilt 24 hours" in output
    assert "Rebuilt 48 hours" in output


def test_all_with_a_project_rebuilds_only_that_project(dataset, other_project):
    build_dataset(other_project)
    rollup("--all", "--project", "globex")
    assert set(ProjectHourly.objects.values_list("project__slug", flat=True)) == {"globex"}


def test_an_unknown_project_is_an_error(db):
    with pytest.raises(CommandError, match="No project"):
        rollup("--all", "--project", "nope")


def test_a_project_without_all_is_an_error(db):
    with pytest.raises(CommandError, match="--project needs --all"):
        rollup("--project", "acme")
