"""Stored dollars follow the prices (issue 26, item 1): a project price saved after its sessions
were processed prices them again (services/repricing.py), in a worker when the admin saves it and
with `manage.py reprice`; the rollups follow. References as tests/dashboard/test_session_cost.py's
(Claude Sonnet 4.5's rules; the negotiated price $1 input, $5 output, $0.10 read, $1.25 write)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from tests.dashboard.test_session_cost import million, post, rollup_rows, session_events
from toolscope.telemetry.models import ModelPrice, Turn
from toolscope.telemetry.services.costs import nanos
from toolscope.telemetry.services.repricing import Repriced, sessions_reprice
from toolscope.telemetry.services.rollups import rollups_refresh

pytestmark = pytest.mark.django_db(transaction=True)
NEGOTIATED = {"model": "claude-sonnet-4-5", "input_mtok": Decimal("1"), "output_mtok": Decimal("5"),
              "cache_read_mtok": Decimal("0.1"), "cache_write_mtok": Decimal("1.25")}


@pytest.fixture
def processed(project):
    post(project, session_events(timezone.now().replace(microsecond=0) - timedelta(hours=1)))
    return list(Turn.objects.filter(project=project).order_by("index").values_list("cost_nanos", flat=True))


def stored(project):
    return list(Turn.objects.filter(project=project).order_by("index").values_list("cost_nanos", flat=True))


def test_a_price_added_later_prices_the_stored_requests_again_and_the_rollups_follow(project, processed):
    assert sessions_reprice(project=project) == Repriced(sessions=1, turns=3, changed=0)  # nothing new
    ModelPrice.objects.create(project=project, valid_from=timezone.now() - timedelta(days=1), note="negotiated",
                              **NEGOTIATED)
    assert sessions_reprice(project=project) == Repriced(sessions=1, turns=3, changed=3)
    now = stored(project)
    assert now[0] == nanos(million((100, "1"), (2900, "1.25"), (100, "5")))  # as reported, at the new price
    assert all(after < before for after, before in zip(now, processed, strict=True))
    rollups_refresh()
    assert sum(row["cost_nanos"] for row in rollup_rows(project)) == sum(now)
    assert sessions_reprice(project=project).changed == 0  # priced as they are: nothing written
    # Another model's sessions, or sessions started after this one, are left alone.
    assert sessions_reprice(project=project, model="gpt-4.1") == Repriced(sessions=0, turns=0, changed=0)
    assert sessions_reprice(project=project, since=timezone.now()).sessions == 0


def test_the_command_says_what_it_priced_and_refuses_what_it_cannot_read(project, processed):
    ModelPrice.objects.create(project=project, valid_from=timezone.now() - timedelta(days=1), **NEGOTIATED)
    out = StringIO()
    call_command("reprice", project=project.slug, since="2020-01-01", stdout=out)
    assert "1/1 sessions" in out.getvalue() and "Priced 1 sessions (3 requests) again" in out.getvalue()
    assert "3 requests changed" in out.getvalue()
    with pytest.raises(CommandError, match="No project"):
        call_command("reprice", project="nope")
    with pytest.raises(CommandError, match="not a date"):
        call_command("reprice", project=project.slug, since="2026-02-30")
