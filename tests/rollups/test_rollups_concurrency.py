"""Refreshers and markers at once, on real connections: nothing rebuilt twice, no mark lost."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection

from tests import factories
from tests.rollups.dataset import H0
from toolscope.telemetry.models import DirtyHour
from toolscope.telemetry.services import rollups

pytestmark = pytest.mark.django_db(transaction=True)


class Other(threading.Thread):
    """Runs `call` on its own database connection, as another worker would."""

    def __init__(self, call, **kwargs):
        super().__init__(daemon=True)
        self.call, self.kwargs, self.result = call, kwargs, None

    def run(self):
        try:
            self.result = self.call(**self.kwargs)
        finally:
            connection.close()


@pytest.fixture
def during_rebuild(monkeypatch):
    """Runs a function inside the first rebuild of a refresh, while its claim is open."""
    real_rebuild = rollups.rollups_rebuild
    hooks = []

    def rebuild(**kwargs):
        if hooks:
            hooks.pop()()
        real_rebuild(**kwargs)

    monkeypatch.setattr(rollups, "rollups_rebuild", rebuild)
    return hooks.append


def test_a_mark_made_while_its_hour_is_being_rebuilt_survives_the_rebuild(during_rebuild):
    project = factories.make_project()
    rollups.dirty_hours_mark(project_id=project.pk, timestamps=[H0])
    marker = Other(rollups.dirty_hours_mark, project_id=project.pk, timestamps=[H0])

    def mark_meanwhile():
        marker.start()
        marker.join(timeout=1)
        assert marker.is_alive(), "the mark should wait for the claim to commit"

    during_rebuild(mark_meanwhile)
    assert rollups.rollups_refresh() == 1
    marker.join(timeout=10)
    assert list(DirtyHour.objects.values_list("hour", flat=True)) == [H0]


def test_a_second_refresher_skips_the_claimed_hours(during_rebuild):
    project = factories.make_project()
    later = H0 + timedelta(hours=1)
    rollups.dirty_hours_mark(project_id=project.pk, timestamps=[H0])
    rollups.dirty_hours_mark(project_id=project.pk, timestamps=[later])
    second = Other(rollups.rollups_refresh)

    def refresh_meanwhile():
        second.start()
        second.join(timeout=10)
        assert not second.is_alive(), "the second refresher should skip locked marks, not wait"

    during_rebuild(refresh_meanwhile)
    assert rollups.rollups_refresh(limit=1) == 1
    assert second.result == 1
    assert not DirtyHour.objects.exists()
