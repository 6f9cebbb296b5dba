"""Duration percentiles from DDSketch bins stay within the stated error of the exact percentiles.

The data: tool-call durations measured against real MCP servers (mcp-server-git, mcp-server-time;
tests/fixtures/durations/capture.py), each tool's own and all of them together, plus shapes real
traffic adds to them (whole-millisecond timers with many ties, instant answers of 0 ms, a slow tail
of timeouts). The claim (telemetry/sketches.py, README): the sketch's q-quantile is within a
relative RELATIVE_ACCURACY of the exact value of rank floor(q * (n - 1)), and PostgreSQL's
percentile_cont interpolates between that value and the next; merging hours changes nothing.
"""

from __future__ import annotations

import json
import math
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.db import connection
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.factories import make_key
from toolscope.telemetry.models import ToolCall, ToolDaily, ToolHourly
from toolscope.telemetry.selectors import duration_quantiles
from toolscope.telemetry.services.ingest import ingest_events
from toolscope.telemetry.services.processing import batch_process
from toolscope.telemetry.services.rollups import rollups_rebuild
from toolscope.telemetry.sketches import FRACTIONS, RELATIVE_ACCURACY, ZERO, bins_add, bins_of, quantiles

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "durations" / "mcp_servers.json"
REAL = json.loads(FIXTURE.read_text())["durations"]
# A float's rounding on top of the sketch's bound (log and pow in double precision).
SLACK = 1e-9


def shapes() -> dict[str, list[float]]:
    rng = random.Random(17)
    everything = [value for values in REAL.values() for value in values]
    return {
        **{f"real {tool}": values for tool, values in REAL.items()},
        "real, all tools": everything,
        "real, whole milliseconds (ties)": [float(round(value)) for value in everything],
        "real, with instant answers (0 ms)": everything + [0.0] * (len(everything) // 5),
        "real, with a timeout tail": everything + [rng.uniform(30_000, 120_000) for _ in range(len(everything) // 40)],
        "real, one call": everything[:1],
    }


def exact_lower(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[math.floor(fraction * (len(ordered) - 1))]


def assert_within_bound(values: list[float], estimates: tuple[float | None, ...]) -> None:
    for fraction, estimate in zip(FRACTIONS, estimates, strict=True):
        exact = exact_lower(values, fraction)
        assert estimate is not None
        assert abs(estimate - exact) <= RELATIVE_ACCURACY * exact + SLACK, (fraction, estimate, exact)


@pytest.mark.parametrize("name", list(shapes()))
def test_sketch_percentiles_are_within_the_stated_error_on_real_durations(name):
    values = shapes()[name]
    assert_within_bound(values, quantiles(bins_of(values)))


def postgres_percentile_cont(values: list[float], fraction: float) -> float:
    with connection.cursor() as cursor:
        cursor.execute("SELECT percentile_cont(%s) WITHIN GROUP (ORDER BY v) FROM unnest(%s::float8[]) AS v",
                       [fraction, values])
        return cursor.fetchone()[0]


@pytest.mark.skipif("connection.vendor != 'postgresql'")
@pytest.mark.parametrize("name", [name for name in shapes() if "one call" not in name])
def test_on_real_durations_the_sketch_is_within_the_error_of_postgresqls_percentile_cont_too(db, name):
    """What the pages showed before (percentile_cont, interpolated) and what they show now differ by
    no more than the stated error plus the gap between two neighbouring durations, which on a few
    hundred real calls is itself under 1%."""
    values = shapes()[name]
    for fraction, estimate in zip(FRACTIONS, quantiles(bins_of(values)), strict=True):
        ordered = sorted(values)
        rank = fraction * (len(ordered) - 1)
        below, above = ordered[math.floor(rank)], ordered[math.ceil(rank)]
        exact = postgres_percentile_cont(values, fraction)
        assert below <= exact <= above
        assert abs(estimate - exact) <= RELATIVE_ACCURACY * exact + (above - below) + SLACK


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.just(0.0), st.floats(min_value=0.001, max_value=2_147_483_647)), min_size=1,
                max_size=300))
def test_the_bound_holds_for_any_durations(values):
    assert_within_bound(values, quantiles(bins_of(values)))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.floats(min_value=0, max_value=1e6), max_size=50), min_size=1, max_size=8))
def test_merging_sketches_is_adding_bins_and_taking_back_restores_them(parts):
    merged: dict[str, int] = {}
    for part in parts:
        merged = bins_add(merged, bins_of(part))
    assert merged == bins_of([value for part in parts for value in part])
    for part in parts:
        merged = bins_add(merged, {key: -count for key, count in bins_of(part).items()})
    assert merged == {}


def test_an_empty_sketch_has_no_percentiles_and_zero_counts_apart():
    assert quantiles({}) == (None, None)
    assert bins_of([0.0, 0.0, 3.0]) == {ZERO: 2, bins_of([3.0]).popitem()[0]: 1}
    assert quantiles(bins_of([0.0, 0.0, 3.0])) == (0, 0)


DAY = datetime(2026, 11, 23, tzinfo=UTC)


def test_a_day_of_real_durations_through_processing_merges_to_the_whole_days_sketch(project):
    """Real durations sent as events over 24 hours: processing keeps each hour's bins, the pages'
    query adds them up in the database, and the result is the sketch of the whole day (exactly),
    so within the stated error of the day's exact percentiles. A rebuild gives the same bins."""
    rng = random.Random(5)
    events, sent = [], {tool: [] for tool in REAL}
    for tool, values in REAL.items():
        for number, value in enumerate(values):
            at = DAY + timedelta(seconds=rng.randrange(24 * 3600))
            events.append({"type": "tool_call", "id": f"{tool}-{number}", "session_id": f"s{number % 40}",
                           "turn_index": number // 40, "tool_name": tool, "output": "ok", "duration_ms": value,
                           "timestamp": at.isoformat()})
            sent[tool].append(value)
    rng.shuffle(events)
    key = make_key(project).api_key
    for start in range(0, len(events), 500):
        outcome = ingest_events(api_key=key, raw_events=events[start:start + 500])
        batch_process(batch_id=outcome.batch_id)
    assert ToolHourly.objects.filter(project=project).values("hour").distinct().count() == 24

    day = duration_quantiles(project_id=project.pk, start=DAY, end=DAY + timedelta(days=1))
    assert set(day) == set(REAL)
    for tool, values in sent.items():
        assert day[tool] == quantiles(bins_of(values))
        assert_within_bound(values, day[tool])
    two_tools = duration_quantiles(project_id=project.pk, start=DAY, end=DAY + timedelta(days=1),
                                   tool_names=["git_log", "convert_time"])
    assert two_tools == {tool: day[tool] for tool in ("git_log", "convert_time")}

    # A range that is not whole days: the hours at either end, the whole day between from ToolDaily.
    ragged = duration_quantiles(project_id=project.pk, start=DAY + timedelta(hours=5), end=DAY + timedelta(hours=53))
    assert ragged.keys() == REAL.keys()
    assert ToolDaily.objects.filter(project=project).count() == len(REAL)
    assert duration_quantiles(project_id=project.pk, start=DAY + timedelta(days=1), end=DAY + timedelta(days=3)) == {}
    hours = duration_quantiles(project_id=project.pk, start=DAY + timedelta(hours=5), end=DAY + timedelta(hours=9))
    timed_hours = list(ToolCall.objects.filter(project=project, started_at__gte=DAY + timedelta(hours=5),
                                               started_at__lt=DAY + timedelta(hours=9), tool_name="git_log")
                       .values_list("duration_ms", flat=True))
    assert hours["git_log"] == quantiles(bins_of(timed_hours))
    early = list(ToolCall.objects.filter(project=project, started_at__gte=DAY + timedelta(hours=5), tool_name="git_log")
                 .values_list("duration_ms", flat=True))
    assert ragged["git_log"] == quantiles(bins_of(early))  # hours 5-23 of DAY from ToolHourly

    kept = list(ToolHourly.objects.order_by("hour", "tool_name").values_list("duration_bins", "duration_p95_ms"))
    rollups_rebuild(project_id=project.pk, hours=[DAY + timedelta(hours=n) for n in range(24)])
    assert list(ToolHourly.objects.order_by("hour", "tool_name").values_list(
        "duration_bins", "duration_p95_ms")) == kept
