"""Retention: keep each project's data as long as it asks, and no longer (telemetry/retention.py).

- **Raw rows** (tool calls, turns, artifacts, ingest batches) expire on the day stored with them.
  On PostgreSQL a day is one partition per table: `retention_expire` detaches and drops the
  partitions of every day before today, whole (telemetry/partitions.py); on SQLite it deletes
  the rows. `partitions_ensure` makes the days ahead: through the longest retention any project
  has, plus AHEAD_DAYS.
- **Sessions** (one row per agent run, far fewer) go once their project's retention has passed
  since they started and no turn or call of theirs is left; **quarantined events** after the
  retention too. Both are deleted by rows, in chunks: small tables.
- **Rollups** (ToolHourly, ProjectHourly, ToolDaily) are kept `rollup_retention_days` per
  project and deleted by rows (a few dozen rows per project and hour).

Beat runs `retention_maintain` hourly (workers.tasks.retention_maintain): every step is
idempotent, so a missed run is caught up by the next.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import TypeVar

from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, Max, OuterRef

from toolscope.telemetry import partitions
from toolscope.telemetry.models import (
    Artifact,
    IngestBatch,
    Project,
    ProjectHourly,
    QuarantinedEvent,
    Session,
    ToolCall,
    ToolDaily,
    ToolHourly,
    Turn,
)
from toolscope.telemetry.retention import DEFAULT_RETENTION_DAYS, today

logger = logging.getLogger(__name__)

AHEAD_DAYS = 7
DELETE_CHUNK = 5000
T = TypeVar("T")


@dataclass
class RetentionReport:
    partitions_made: int = 0
    partitions_dropped: list[str] = field(default_factory=list)
    raw_rows_deleted: int = 0  # SQLite only: PostgreSQL drops partitions
    sessions_deleted: int = 0
    quarantined_deleted: int = 0
    rollup_rows_deleted: int = 0

    def summary(self) -> dict[str, int]:
        """The counts, for a log line or a task's result."""
        return {"partitions_made": self.partitions_made, "partitions_dropped": len(self.partitions_dropped),
                "raw_rows_deleted": self.raw_rows_deleted, "sessions_deleted": self.sessions_deleted,
                "quarantined_deleted": self.quarantined_deleted, "rollup_rows_deleted": self.rollup_rows_deleted}


def longest_retention() -> int:
    return Project.objects.aggregate(longest=Max("retention_days"))["longest"] or DEFAULT_RETENTION_DAYS


def partitions_ensure(*, on: date | None = None, retention_days: int | None = None) -> int:
    """Make the partitions of today through the longest retention (or `retention_days`, when a
    project is about to keep longer) plus AHEAD_DAYS. Returns how many were made."""
    if not partitions.enabled():
        return 0
    current = on or today()
    span = max(longest_retention(), retention_days or 0) + AHEAD_DAYS
    made = partitions.partitions_create(current + timedelta(days=offset) for offset in range(span + 1))
    warning = lock_headroom(partitions.lock_demand())
    if warning:
        logger.warning("retention: %s", warning)
    return made


# Queries over a whole partitioned table the lock table should hold at once (dashboard pages,
# reports) before PostgreSQL fails every statement with "out of shared memory".
WHOLE_TABLE_QUERIES = 8


def lock_headroom(demand: partitions.LockDemand) -> str | None:
    """A warning when PostgreSQL's lock table holds fewer than WHOLE_TABLE_QUERIES queries over a
    whole partitioned table at once, with the setting that fixes it."""
    if demand.whole_table == 0 or demand.slots >= WHOLE_TABLE_QUERIES * demand.whole_table:
        return None
    wanted = -(-WHOLE_TABLE_QUERIES * demand.whole_table // demand.connections)  # rounded up
    return (f"PostgreSQL's lock table ({demand.slots:,} slots) holds {demand.slots // demand.whole_table} queries "
            f"over a whole partitioned table ({demand.whole_table:,} locks each: its day partitions and their "
            "indexes) before every statement fails with 'out of shared memory'; set max_locks_per_transaction "
            f"to {wanted:,} or more (docker-compose.yml sets 1024)")


def retention_expire(*, on: date | None = None, concurrently: bool = True) -> RetentionReport:
    """Drop what has expired by `on` (today). `concurrently=False` detaches inside the caller's
    transaction (tests; an operator's shell)."""
    current = on or today()
    report = RetentionReport()
    if partitions.enabled():
        if not concurrently:
            # Deferred foreign key checks of this transaction's inserts fire now: a table with
            # pending trigger events cannot be dropped.
            with connection.cursor() as cursor:
                cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        for partition in partitions.partitions_list(sizes=False):
            if partition.day < current:
                partitions.partition_drop(partition, concurrently=concurrently)
                report.partitions_dropped.append(partition.name)
                logger.info("retention: dropped %s (%s rows estimated)", partition.name, partition.rows)
    else:
        for model in (ToolCall, Artifact, Turn, IngestBatch):
            report.raw_rows_deleted += _delete_chunked(model, model.objects.filter(expires_on__lt=current))
    for project_id, days, rollup_days in Project.objects.values_list("pk", "retention_days", "rollup_retention_days"):
        raw_cutoff = datetime.combine(current - timedelta(days=days), time.min, tzinfo=UTC)
        rollup_cutoff = datetime.combine(current - timedelta(days=rollup_days), time.min, tzinfo=UTC)
        report.sessions_deleted += _sessions_delete(project_id=project_id, on=current, cutoff=raw_cutoff)
        report.quarantined_deleted += _delete_chunked(QuarantinedEvent, QuarantinedEvent.objects.filter(
            project_id=project_id, created_at__lt=raw_cutoff))
        for model in (ToolHourly, ProjectHourly):
            report.rollup_rows_deleted += _delete_chunked(model, model.objects.filter(
                project_id=project_id, hour__lt=rollup_cutoff))
        report.rollup_rows_deleted += _delete_chunked(ToolDaily, ToolDaily.objects.filter(
            project_id=project_id, day__lt=rollup_cutoff.date()))
    return report


def _sessions_delete(*, project_id: int, on: date, cutoff: datetime) -> int:
    """Sessions whose last turn or call expired before `on`: their rows went with their day
    partitions, so nothing points at them and one plain DELETE does it (Django's collector would
    look for turns and calls in every day partition). A session processing never summarised
    (made by hand) goes once it started before `cutoff` and nothing of it is left."""
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {Session._meta.db_table} WHERE project_id = %s AND expires_on < %s",  # noqa: S608
                       [project_id, on])
        deleted = cursor.rowcount
    unsummarised = Session.objects.filter(project_id=project_id, expires_on__isnull=True, started_at__lt=cutoff)
    if not unsummarised.exists():  # the usual case: spares planning a probe of every partition
        return deleted
    return deleted + _delete_chunked(Session, unsummarised.exclude(
        Exists(Turn.objects.filter(session_id=OuterRef("pk")))).exclude(
        Exists(ToolCall.objects.filter(session_id=OuterRef("pk")))))


def _delete_chunked(model: type, queryset: object) -> int:
    """Delete in chunks of primary keys, each its own short transaction. Returns the rows of
    `model` deleted (Django's collector also clears ORM-level links to them)."""
    deleted = 0
    while True:
        with transaction.atomic():
            ids = list(queryset.values_list("pk", flat=True)[:DELETE_CHUNK])  # type: ignore[attr-defined]
            if not ids:
                return deleted
            _, per_model = model.objects.filter(pk__in=ids).delete()
            deleted += per_model.get(model._meta.label, 0)


def with_partitions(insert: Callable[[], T]) -> T:
    """Run `insert` (which stores expiring rows) in a savepoint; if a row's day has no partition
    yet (beat has not run since a project was made to keep longer, or for days), make the days
    ahead and run it again. The safety net behind beat: ingest never fails for a missing day."""
    try:
        with transaction.atomic():
            return insert()
    except IntegrityError as exc:
        if not partitions.missing(exc):
            raise
    logger.warning("retention: a row's day had no partition; making the days ahead now")
    partitions_ensure()
    with transaction.atomic():
        return insert()


@dataclass(frozen=True)
class RetentionOverview:
    partitions: list[partitions.Partition] | None  # None: not partitioned (SQLite)
    next_expiry: date

    @property
    def days(self) -> int:
        return len({partition.day for partition in self.partitions or ()})

    @property
    def first(self) -> date | None:
        return min((partition.day for partition in self.partitions or ()), default=None)

    @property
    def last(self) -> date | None:
        return max((partition.day for partition in self.partitions or ()), default=None)

    @property
    def bytes(self) -> int:
        return sum(partition.bytes for partition in self.partitions or ())

    @property
    def rows(self) -> int:
        return sum(max(partition.rows, 0) for partition in self.partitions or ())


def retention_overview() -> RetentionOverview:
    """The stored days, for the admin: a day's rows go the day after it (its partitions whole)."""
    current = today()
    found = partitions.partitions_list() if partitions.enabled() else None
    first = min((partition.day for partition in found or ()), default=current)
    return RetentionOverview(partitions=found, next_expiry=max(first, current) + timedelta(days=1))


def retention_maintain() -> RetentionReport:
    """Beat's hourly step: partitions ahead, then expiry."""
    made = partitions_ensure()
    report = retention_expire()
    report.partitions_made = made
    return report
