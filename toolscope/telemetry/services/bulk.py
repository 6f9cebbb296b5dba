"""Bulk updates that scale: one `UPDATE … FROM unnest(arrays)` statement on PostgreSQL.

Django's bulk_update builds a CASE WHEN per row and field; for the few hundred rows a batch
touches, building that SQL was ~40% of a worker's time. Other databases keep bulk_update.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection, models

from toolscope.telemetry import partitions
from toolscope.telemetry.retention import Days


def rows_update(model: type[models.Model], fields: Sequence[str], rows: Sequence[models.Model],
                days: Days | None = None) -> None:
    """Write `fields` of `rows` (instances carrying their pk and the new values). `days`: the
    expiry days the rows lie in, for a partitioned table (retention.py: days_within)."""
    if not rows:
        return
    if connection.vendor != "postgresql":
        model._default_manager.bulk_update(rows, list(fields), batch_size=500)
        return
    meta = model._meta
    targets = [meta.get_field(name) for name in fields]
    pk = meta.pk
    arrays = [[pk.get_db_prep_value(row.pk, connection) for row in rows]]
    arrays += [[field.get_db_prep_save(getattr(row, field.attname), connection) for row in rows]
               for field in targets]
    casts = [_array_type(pk), *(_array_type(field) for field in targets)]
    columns = ["pk", *(field.column for field in targets)]
    assignments = ", ".join(f'"{field.column}" = v."{field.column}"' for field in targets)
    unnest = ", ".join(f"%s::{cast}" for cast in casts)
    aliases = ", ".join(f'"{column}"' for column in columns)
    # Table and column names come from the model's metadata, never from input; values are parameters.
    sql = (f'UPDATE "{meta.db_table}" AS t SET {assignments} FROM unnest({unnest}) AS v({aliases}) '  # noqa: S608
           f'WHERE t."{pk.column}" = v."pk"')
    params: list[Any] = arrays
    if days is not None:
        sql += f' AND t."{partitions.KEY}" BETWEEN %s AND %s'
        params = [*arrays, *days]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _array_type(field: Any) -> str:
    return f"{field.rel_db_type(connection) if field.is_relation else field.cast_db_type(connection)}[]"


def ids_allocate(model: type[models.Model], count: int) -> list[int]:
    """`count` fresh primary keys for `model`, taken before its rows are inserted, so that rows
    of one batch can point at each other (a duplicate at its first occurrence) in one insert.

    PostgreSQL draws them from the identity sequence (gaps are harmless); SQLite bumps its
    AUTOINCREMENT counter with one UPDATE, which takes the database's write lock at once, so two
    writers never get the same ids."""
    if count <= 0:
        return []
    table, column = model._meta.db_table, model._meta.pk.column
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
                           [table, column, count])
            return [row[0] for row in cursor.fetchall()]
        cursor.execute("UPDATE sqlite_sequence SET seq = seq + %s WHERE name = %s RETURNING seq", [count, table])
        row = cursor.fetchone()
        if row is None:  # nothing ever inserted: the counter row does not exist yet
            cursor.execute(f'SELECT coalesce(max("{column}"), 0) FROM "{table}"')  # noqa: S608 - model metadata
            start = cursor.fetchone()[0]
            cursor.execute("INSERT INTO sqlite_sequence (name, seq) VALUES (%s, %s)", [table, start + count])
            row = (start + count,)
    return list(range(row[0] - count + 1, row[0] + 1))


def rows_insert(model: type[models.Model], rows: Sequence[dict[str, Any]]) -> None:
    """Insert `rows` (dicts of field attnames to values, every row the same keys) as they are:
    no conflict handling, so a duplicate key raises IntegrityError.

    On PostgreSQL one COPY: several times cheaper than a multi-row INSERT for the server to parse
    and for Django to build (no model instances, no SQL text). Elsewhere bulk_create."""
    if not rows:
        return
    names = list(rows[0])
    if connection.vendor != "postgresql":
        model._default_manager.bulk_create([model(**row) for row in rows], batch_size=500)
        return
    meta = model._meta
    by_attname = {field.attname: field for field in meta.concrete_fields}
    fields = [by_attname[name] for name in names]
    # Values that psycopg adapts natively go as they are; the rest (JSON) through the field.
    prepare = [(i, field) for i, field in enumerate(fields) if isinstance(field, models.JSONField)]
    columns = ", ".join(f'"{field.column}"' for field in fields)
    # The driver's cursor does the COPY; wrap_database_errors turns its errors into Django's
    # (IntegrityError and so on), as for any query.
    with connection.cursor() as cursor, connection.wrap_database_errors, cursor.cursor.copy(
        f'COPY "{meta.db_table}" ({columns}) FROM STDIN'
    ) as copy:
        for row in rows:
            values = [row[name] for name in names]
            for i, field in prepare:
                values[i] = field.get_db_prep_save(values[i], connection)
            copy.write_row(values)
