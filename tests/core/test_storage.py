"""How the big columns are stored on PostgreSQL."""

from django.db import connection

from toolscope.telemetry.models import IngestBatch


def column_facts(table: str, column: str) -> tuple[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT format_type(atttypid, atttypmod), attcompression FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attname = %s",
            [table, column],
        )
        return cursor.fetchone()


def test_raw_batches_are_text_compressed_with_lz4(db):
    assert column_facts("telemetry_ingestbatch", "payload") == ("text", "l")
    assert column_facts("telemetry_toolcall", "output") == ("text", "l")


def test_a_batch_payload_round_trips_as_json(project):
    payload = {"events": [{"type": "session", "id": "s1", "metadata": {"emoji": "✓", "n": 1.5}}]}
    batch = IngestBatch.objects.create(project=project, payload=payload, event_count=1)
    assert IngestBatch.objects.get(pk=batch.pk).payload == payload
