"""Time ranges of queries: what a client may ask for, held to what Python and the rows can hold."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.utils import timezone

# No row is outside; a range's previous period (as long, just before: the overview) stays a date
# Python can hold.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(3000, 1, 1, tzinfo=UTC)


def time_range(start: datetime | None, end: datetime | None, default: timedelta) -> tuple[datetime, datetime]:
    """[start, end) within EPOCH..LATEST: `end` defaults to now, `start` to `default` before the
    end, computed once the end is held in range (an end in year 1 has no day before it)."""
    end = _clamp(end or timezone.now())
    return _clamp(start or end - default), end


def _clamp(moment: datetime) -> datetime:
    return min(max(moment, EPOCH), LATEST)
