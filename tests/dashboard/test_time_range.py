"""The time range every page reads from its query parameters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.http import QueryDict

from dashboard.forms import time_range_parse

NOW = datetime(2026, 11, 22, 5, 17, tzinfo=UTC)


def _parse(query: str):
    return time_range_parse(QueryDict(query), now=NOW)[0]


def test_the_default_is_the_last_7_days_ending_with_the_current_hour():
    time_range = _parse("")
    assert (time_range.key, time_range.start, time_range.end) == (
        "7d", datetime(2026, 11, 15, 6, tzinfo=UTC), datetime(2026, 11, 22, 6, tzinfo=UTC))
    assert time_range.previous_start == datetime(2026, 11, 8, 6, tzinfo=UTC)
    assert time_range.bucket == "hour"


@pytest.mark.parametrize(("key", "hours", "bucket"), [("24h", 24, "hour"), ("7d", 168, "hour"), ("30d", 720, "day")])
def test_presets(key, hours, bucket):
    time_range = _parse(f"range={key}")
    assert (time_range.length, time_range.bucket, time_range.query) == (timedelta(hours=hours), bucket, f"range={key}")


def test_a_custom_range_is_whole_utc_days_end_included():
    time_range = _parse("range=custom&start=2026-11-01&end=2026-11-03")
    assert (time_range.start, time_range.end) == (datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 4, tzinfo=UTC))
    assert time_range.query == "range=custom&start=2026-11-01&end=2026-11-03"
    assert time_range.bucket == "hour"


@pytest.mark.parametrize(
    "query",
    ["range=custom", "range=custom&start=2026-11-03&end=2026-11-01", "range=custom&start=2020-01-01&end=2026-01-01",
     "range=century", "range=custom&start=yesterday&end=today"],
)
def test_invalid_parameters_give_the_default_range_and_a_bound_form(query):
    time_range, form = time_range_parse(QueryDict(query), now=NOW)
    assert time_range.key == "7d"
    assert not form.is_valid()
