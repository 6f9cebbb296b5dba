"""Daily time partitions of the high-volume tables, on PostgreSQL (telemetry/retention.py).

Each table in PARTITIONED is `PARTITION BY RANGE (expires_on)`, one partition per day named
`<table>_p<YYYYMMDD>`, and no default partition (every row's day is clamped into the days that
have one, and DETACH ... CONCURRENTLY refuses a parent with a default partition). Keys:
PostgreSQL requires the partition key in every primary key and unique constraint, so on these
tables the primary key is (id, expires_on) and each unique constraint Django declares gets
expires_on appended; nothing can reference them by foreign key (their links are ORM-only,
`db_constraint=False`). Ingest stays idempotent: processing looks stored events up by client id
under the session's lock before inserting (services/processing.py), and a resent event has the same
timestamp, so the same day, and the constraint still catches a race.

How days come and go without blocking ingest (measured in bench/retention.py, and by the spike
whose figures bench/RESULTS.md quotes):

- **Ahead**: a partition is made as a plain table (LIKE the parent), given the CHECK its bound
  implies, then ATTACHed. ATTACH takes SHARE UPDATE EXCLUSIVE on the parent, which inserts do not
  conflict with; `CREATE TABLE ... PARTITION OF` would take ACCESS EXCLUSIVE and, queued behind a
  long dashboard query, stall every insert behind it.
- **Expiry**: `DETACH PARTITION ... CONCURRENTLY` then `DROP TABLE`: metadata and a file unlink,
  whatever the day holds; CONCURRENTLY waits for running queries instead of locking the parent.
  It cannot run in a transaction: `partitions_drop` must be called outside one (the beat task is).

Names come from the models' metadata and dates, never from input.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from django.db import connection, models

KEY = "expires_on"
NAME = re.compile(r"_p(\d{8})$")


def partitioned_models() -> list[type[models.Model]]:
    from toolscope.telemetry.models import Artifact, IngestBatch, ToolCall, Turn

    return [IngestBatch, Turn, ToolCall, Artifact]


def enabled() -> bool:
    return connection.vendor == "postgresql"


def partition_name(table: str, day: date) -> str:
    return f"{table}_p{day:%Y%m%d}"


@dataclass(frozen=True)
class Partition:
    table: str
    name: str
    day: date
    rows: int  # the planner's estimate (reltuples), -1 before the first ANALYZE
    bytes: int


def partitions_list(table: str | None = None, *, sizes: bool = True) -> list[Partition]:
    """The day partitions of one partitioned table, or of all, oldest first. Found by name, so a
    day detached and not yet dropped (a worker killed in between) is still listed, and dropped.
    `sizes=False` skips asking each one's size on disk (0 then), a third of a second at 400."""
    tables = [table] if table else [model._meta.db_table for model in partitioned_models()]
    found = []
    size = "pg_total_relation_size(oid)" if sizes else "0"
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT relname, reltuples::bigint, {size} FROM pg_class
            WHERE relkind = 'r' AND relnamespace = current_schema()::regnamespace
              AND relname ~ ('^(' || array_to_string(%s::text[], '|') || ')_p[0-9]{{8}}$')
            """,  # noqa: S608 -- `size` is one of two constants
            [tables],
        )
        for name, rows, size in cursor.fetchall():
            digits = NAME.search(name)[1]  # type: ignore[index]
            day = date(int(digits[:4]), int(digits[4:6]), int(digits[6:]))
            found.append(Partition(name[: -len("_p00000000")], name, day, int(rows), int(size)))
    return sorted(found, key=lambda partition: (partition.day, partition.table))


def _quote(name: str) -> str:
    return connection.ops.quote_name(name)


def partition_create(cursor: Any, table: str, day: date) -> bool:
    """Make and attach `table`'s partition for `day` unless it exists. True if it was made."""
    name = partition_name(table, day)
    cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [name])
    if cursor.fetchone()[0]:
        return False
    following = day + timedelta(days=1)
    bound = f"FOR VALUES FROM ('{day.isoformat()}') TO ('{following.isoformat()}')"
    cursor.execute(f"CREATE TABLE {_quote(name)} (LIKE {_quote(table)} INCLUDING DEFAULTS INCLUDING CONSTRAINTS "
                   "INCLUDING STORAGE INCLUDING COMPRESSION)")
    # The CHECK lets ATTACH skip scanning the (empty) table; it is redundant once attached.
    check = _quote(f"{name}_bound")
    cursor.execute(f"ALTER TABLE {_quote(name)} ADD CONSTRAINT {check} CHECK ({KEY} IS NOT NULL AND "
                   f"{KEY} >= '{day.isoformat()}' AND {KEY} < '{following.isoformat()}')")
    cursor.execute(f"ALTER TABLE {_quote(table)} ATTACH PARTITION {_quote(name)} {bound}")
    cursor.execute(f"ALTER TABLE {_quote(name)} DROP CONSTRAINT {check}")
    return True


def partitions_create(days: Iterable[date]) -> int:
    """Every partitioned table's partitions for `days`; returns how many were made."""
    made = 0
    wanted = sorted(set(days))
    with connection.cursor() as cursor:
        for model in partitioned_models():
            for day in wanted:
                made += partition_create(cursor, model._meta.db_table, day)
    return made


@dataclass(frozen=True)
class LockDemand:
    per_transaction: int  # max_locks_per_transaction
    connections: int  # max_connections + max_prepared_transactions
    whole_table: int  # locks one query over a whole partitioned table takes

    @property
    def slots(self) -> int:
        """The shared lock table's size."""
        return self.per_transaction * self.connections


def lock_demand() -> LockDemand:
    """PostgreSQL's lock table, and the locks one query over a whole partitioned table takes: one
    on each of its partitions and of their indexes, for the table that has most. A query that
    cannot name its days (a tool's calls over a time range, a report) holds them all until it
    ends; when the table is full, every statement of every client fails with "out of shared
    memory"."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('max_locks_per_transaction')::int,"
            " current_setting('max_connections')::int + current_setting('max_prepared_transactions')::int")
        per_transaction, connections = cursor.fetchone()
        cursor.execute(
            """
            SELECT COALESCE(MAX(n), 0) FROM (
                SELECT COUNT(*) + SUM((SELECT COUNT(*) FROM pg_index WHERE indrelid = i.inhrelid)) AS n
                FROM pg_inherits AS i WHERE i.inhparent = ANY(%s::regclass[]) GROUP BY i.inhparent) AS tables
            """,
            [[model._meta.db_table for model in partitioned_models()]],
        )
        return LockDemand(per_transaction, connections, int(cursor.fetchone()[0]))


def missing(exc: BaseException) -> bool:
    """Whether an insert failed for want of a partition for its day (SQLSTATE 23514, "no partition
    of relation ... found for row")."""
    cause = exc.__cause__ or exc
    return getattr(cause, "sqlstate", None) == "23514" and "no partition of relation" in str(cause)


def partition_drop(partition: Partition, *, concurrently: bool = True) -> None:
    """Detach and drop one partition. CONCURRENTLY (the default) must run outside a transaction.
    A concurrent detach interrupted half way (a killed worker) is finished first: until it is,
    PostgreSQL refuses every other detach of the table."""
    mode = " CONCURRENTLY" if concurrently else ""
    with connection.cursor() as cursor:
        cursor.execute("SELECT inhdetachpending FROM pg_inherits WHERE inhrelid = %s::regclass", [partition.name])
        pending = cursor.fetchone()
        if pending and pending[0]:
            mode = " FINALIZE"
        if pending:
            cursor.execute(f"ALTER TABLE {_quote(partition.table)} DETACH PARTITION {_quote(partition.name)}{mode}")
        cursor.execute(f"DROP TABLE {_quote(partition.name)}")


# --- converting a table (migration 0016) ---------------------------------------------------------


def table_partition(schema_editor: Any, model: type[models.Model], *, days: Iterable[date]) -> None:
    """Turn `model`'s table into one partitioned by day on KEY, rows kept: the columns, defaults,
    checks, indexes, foreign keys and unique constraints it had (KEY appended to the primary key
    and to each unique constraint), its identity continuing where it was, partitions for `days`
    and for every day its rows hold. The rows are copied once (INSERT ... SELECT)."""
    table = model._meta.db_table
    old = f"{table}_unpartitioned"
    cursor = schema_editor.connection.cursor()
    cursor.execute(
        "SELECT conname, contype, pg_get_constraintdef(oid), "
        "ARRAY(SELECT attname FROM unnest(conkey) WITH ORDINALITY AS k(num, ord) "
        "      JOIN pg_attribute ON attrelid = conrelid AND attnum = k.num ORDER BY ord) "
        "FROM pg_constraint WHERE conrelid = %s::regclass AND contype IN ('p', 'u', 'f')",
        [table],
    )
    constraints = cursor.fetchall()
    cursor.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = %s "
        "AND indexname NOT IN (SELECT conname FROM pg_constraint WHERE conrelid = %s::regclass)",
        [table, table],
    )
    indexes = cursor.fetchall()
    cursor.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attidentity <> '' AND NOT attisdropped",
        [table],
    )
    identity = [row[0] for row in cursor.fetchall()]
    if any(definition.upper().startswith("CREATE UNIQUE") for _, definition in indexes):
        raise RuntimeError(f"{table}: a unique index outside a constraint cannot be carried over")

    for name, _, _, _ in constraints:
        cursor.execute(f"ALTER TABLE {_quote(table)} DROP CONSTRAINT {_quote(name)}")
    for name, _ in indexes:
        cursor.execute(f"DROP INDEX {_quote(name)}")
    cursor.execute(f"ALTER TABLE {_quote(table)} RENAME TO {_quote(old)}")
    cursor.execute(f"CREATE TABLE {_quote(table)} (LIKE {_quote(old)} INCLUDING DEFAULTS INCLUDING CONSTRAINTS "
                   f"INCLUDING STORAGE INCLUDING COMPRESSION INCLUDING COMMENTS) PARTITION BY RANGE ({KEY})")
    for column in identity:
        cursor.execute(f"SELECT COALESCE(MAX({_quote(column)}), 0) + 1 FROM {_quote(old)}")  # noqa: S608 -- names from metadata
        start = cursor.fetchone()[0]
        cursor.execute(f"ALTER TABLE {_quote(table)} ALTER COLUMN {_quote(column)} "
                       f"ADD GENERATED BY DEFAULT AS IDENTITY (START WITH {int(start)})")
    cursor.execute(f"SELECT DISTINCT {KEY} FROM {_quote(old)}")  # noqa: S608 -- names from metadata
    stored = {row[0] for row in cursor.fetchall()}
    for day in sorted(stored | set(days)):
        partition_create(cursor, table, day)
    cursor.execute(f"INSERT INTO {_quote(table)} SELECT * FROM {_quote(old)}")  # noqa: S608 -- names from metadata
    cursor.execute(f"DROP TABLE {_quote(old)}")

    for name, kind, definition, columns in constraints:
        if kind == "f":
            cursor.execute(f"ALTER TABLE {_quote(table)} ADD CONSTRAINT {_quote(name)} {definition}")
            continue
        keyed = ", ".join(_quote(column) for column in [*columns, *([KEY] if KEY not in columns else [])])
        clause = "PRIMARY KEY" if kind == "p" else "UNIQUE"
        cursor.execute(f"ALTER TABLE {_quote(table)} ADD CONSTRAINT {_quote(name)} {clause} ({keyed})")
    for _, definition in indexes:
        cursor.execute(definition)
