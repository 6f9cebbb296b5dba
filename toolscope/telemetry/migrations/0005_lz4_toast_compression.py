"""Tool outputs and artifacts compressed with lz4 instead of pglz when PostgreSQL stores them out
of line (TOAST). Outputs of about 2 KB sit at the compression threshold, so nearly every one is
compressed on insert; lz4 does that several times faster, which the worker waits for on every
batch. PostgreSQL 14+ built with lz4 only; elsewhere nothing changes. Existing values keep their
compression until rewritten."""

from django.db import migrations

COLUMNS = (("telemetry_toolcall", "output"), ("telemetry_artifact", "original"), ("telemetry_artifact", "compacted"))


def _set_compression(method: str):
    def apply(apps, schema_editor):
        connection = schema_editor.connection
        if connection.vendor != "postgresql" or connection.pg_version < 140000:
            return
        with connection.cursor() as cursor:
            cursor.execute("SELECT %s = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'",
                           [method])
            if not cursor.fetchone()[0]:  # a server built without lz4
                return
            for table, column in COLUMNS:
                cursor.execute(f'ALTER TABLE "{table}" ALTER COLUMN "{column}" SET COMPRESSION {method}')

    return apply


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0004_session_summary")]

    operations = [migrations.RunPython(_set_compression("lz4"), _set_compression("pglz"))]
