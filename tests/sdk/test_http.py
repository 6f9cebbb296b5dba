"""Retry timing rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from toolscope_agent._http import RetryPolicy, parse_retry_after


@pytest.mark.parametrize(
    ("header", "expected"),
    [(None, None), ("", None), ("2", 2.0), ("0.5", 0.5), ("-3", 0.0), ("600", 60.0), ("soon", None), ("nan", None)],
)
def test_retry_after_seconds(header, expected):
    assert parse_retry_after(header, cap=60.0) == expected


def test_retry_after_http_date():
    when = datetime.now(UTC) + timedelta(seconds=30)
    assert 25 <= parse_retry_after(format_datetime(when, usegmt=True), cap=60.0) <= 30


def test_full_jitter_stays_under_the_exponential_cap():
    policy = RetryPolicy(backoff_base=0.5, backoff_max=4.0)
    for retry, cap in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (10, 4.0)]:
        delays = [policy.backoff(retry) for _ in range(200)]
        assert all(0 <= d <= cap for d in delays)
        assert max(delays) > cap / 2, "the whole range is used"
