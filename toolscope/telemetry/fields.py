"""Model fields."""

from __future__ import annotations

from typing import Any

import orjson
from django.db import models


class JSONTextField(models.TextField):
    """JSON kept as text: PostgreSQL stores it without parsing it into jsonb.

    For write-once blobs that are only ever read back whole (raw ingest batches), jsonb's parse on
    insert costs more than everything else on the request path and buys nothing: nothing queries
    inside them.
    """

    description = "JSON stored as text"

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> Any:
        return None if value is None else orjson.loads(value)

    def to_python(self, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return orjson.loads(value)
            except orjson.JSONDecodeError:
                return value
        return value

    def get_prep_value(self, value: Any) -> str | None:
        # orjson: ten times faster than json.dumps on megabyte batches, same compact output.
        return None if value is None else orjson.dumps(value).decode()

    def value_to_string(self, obj: models.Model) -> str:
        return self.get_prep_value(self.value_from_object(obj)) or ""
