"""How PostgreSQL stores the large texts (migration telemetry 0005)."""

from __future__ import annotations

import pytest
from django.db import connection


@pytest.mark.parametrize(("table", "column"), [
    ("telemetry_toolcall", "output"), ("telemetry_artifact", "original"), ("telemetry_artifact", "compacted"),
])
def test_outputs_and_artifacts_are_compressed_with_lz4(db, table, column):
    with connection.cursor() as cursor:
        cursor.execute("SELECT attcompression FROM pg_attribute WHERE attrelid = %s::regclass AND attname = %s",
                       [table, column])
        assert cursor.fetchone()[0] == "l"
