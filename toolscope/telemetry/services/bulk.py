"""Bulk updates that scale: one `UPDATE … FROM unnest(arrays)` statement on PostgreSQL.

Django's bulk_update builds a CASE WHEN per row and field; for the few hundred rows a batch
touches, building that SQL was ~40% of a worker's time. Other databases keep bulk_update.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection, models


def rows_update(model: type[models.Model], fields: Sequence[str], rows: Sequence[models.Model]) -> None:
    """Write `fields` of `rows` (instances carrying their pk and the new values)."""
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
    with connection.cursor() as cursor:
        cursor.execute(sql, arrays)


def _array_type(field: Any) -> str:
    return f"{field.rel_db_type(connection) if field.is_relation else field.cast_db_type(connection)}[]"
