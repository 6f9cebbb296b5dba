"""The Python percentile used on SQLite gives PostgreSQL's percentile_cont numbers."""

from __future__ import annotations

import pytest
from django.db import connection

from toolscope.telemetry.services.rollups import PercentileCont, percentile_cont

LISTS = [[10, 20, 30, 40], [7], [5, 1, 3], [0.5, 100, 2.25, 2.25, 80, 13], list(range(1, 101))]


def postgres_percentile(values: list[float], fraction: float) -> float:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT percentile_cont(%s) WITHIN GROUP (ORDER BY v) FROM unnest(%s::float8[]) AS v",
            [fraction, [float(value) for value in values]],
        )
        return cursor.fetchone()[0]


def test_known_values():
    assert (percentile_cont([10, 20, 30, 40], 0.5), percentile_cont([10, 20, 30, 40], 0.95)) == (25, 38.5)


def test_no_values_give_none_like_sql_null():
    assert percentile_cont([], 0.5) is None


@pytest.mark.parametrize("values", LISTS)
@pytest.mark.parametrize("fraction", [0, 0.5, 0.95, 1])
def test_matches_postgresql_percentile_cont(db, values, fraction):
    assert percentile_cont(values, fraction) == pytest.approx(postgres_percentile(values, fraction))


def test_the_aggregate_refuses_a_fraction_outside_0_to_1():
    with pytest.raises(ValueError, match="between 0 and 1"):
        PercentileCont("duration_ms", fraction=1.5)
