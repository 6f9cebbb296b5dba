"""When a raw row expires: the day its time partition is dropped (services/retention.py).

Every high-volume row (tool calls, turns, artifacts, ingest batches) carries `expires_on`, the
day its project's retention ends for it, fixed when it is stored. On PostgreSQL these tables are
partitioned by that day, one partition a day shared by every project whatever its retention, so
that expiring a day is dropping one partition per table. On SQLite (the embedded default) the
same column drives a plain delete.

A row from day D of a project keeping raw data R days expires on D + R: it is kept through that
day and dropped the day after. The day is clamped to [today, today + R]: a row that arrives
already past its retention (an old transcript) is kept until the next expiry, and one dated in
the future expires as if it happened today, so every row falls in a partition that exists.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

DEFAULT_RETENTION_DAYS = 30
MAX_RETENTION_DAYS = 400
DEFAULT_ROLLUP_RETENTION_DAYS = 400
MAX_ROLLUP_RETENTION_DAYS = 3650


def today() -> date:
    return timezone.now().astimezone(UTC).date()


def expiry_day(*, retention_days: int, moment: datetime | date | None, on: date | None = None) -> date:
    """The day a row of `moment` expires for a project keeping raw data `retention_days` days."""
    current = on or today()
    if moment is None:
        day = current
    elif isinstance(moment, datetime):
        day = (moment if timezone.is_aware(moment) else moment.replace(tzinfo=UTC)).astimezone(UTC).date()
    else:
        day = moment
    keep = timedelta(days=retention_days)
    return min(max(day + keep, current), current + keep)


def migration_expiry() -> date:
    """The day rows stored before retention existed expire on (migration 0016): the default
    retention from the upgrade on."""
    return today() + timedelta(days=DEFAULT_RETENTION_DAYS)


Days = tuple[date, date]


def event_days(events: Iterable[dict[str, Any]], *, retention_days: int, on: date | None = None) -> set[date]:
    """The days the rows of these (validated) events would expire on, stored `on` (today)."""
    current = on or today()
    return {expiry_day(retention_days=retention_days, moment=datetime.fromisoformat(event["timestamp"]), on=current)
            for event in events}


def days_of(sessions: Iterable[Any], *, more: Iterable[date] = ()) -> Days | None:
    """The first and last expiry day of the rows of `sessions` (Session.first_expires_on and
    expires_on) and of `more` days (rows about to be stored): the day partitions where all of them
    lie. None when a session's days are not known: then every day may hold its rows."""
    days = list(more)
    for session in sessions:
        if session.first_expires_on is None or session.expires_on is None:
            return None
        days += [session.first_expires_on, session.expires_on]
    if not days:
        return None
    return min(days), max(days)


def days_within(days: Days | None) -> Q:
    """A filter keeping a query of partitioned rows to `days`, so that PostgreSQL plans and probes
    those day partitions alone rather than every one (a few milliseconds each at 400); no filter
    when they are not known."""
    return Q() if days is None else Q(expires_on__range=days)
