"""Retention (issue 17): each high-volume row carries the day it expires, projects say how long raw
data and rollups are kept, and on PostgreSQL the tables of tool calls, turns, artifacts and ingest
batches become partitioned by that day (telemetry/partitions.py), their rows copied once.

Rows stored before this migration expire together, DEFAULT_RETENTION_DAYS after it. Links into the
partitioned tables lose their database constraint (PostgreSQL cannot reference a partitioned table
by `id` alone); the ORM keeps them. Not reversible."""

from datetime import timedelta

import django.core.validators
import django.db.models.deletion
from django.db import migrations, models

import toolscope.telemetry.retention
from toolscope.telemetry import partitions, retention

EXPIRING = ("ingestbatch", "turn", "toolcall", "artifact")
# Partitions made with the tables: yesterday to a week past the default retention. Beat keeps
# them ahead from then on (services/retention.py).
AHEAD_DAYS = 7


def partition_tables(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    today = retention.today()
    days = [today + timedelta(days=offset) for offset in range(-1, retention.DEFAULT_RETENTION_DAYS + AHEAD_DAYS)]
    for name in EXPIRING:
        partitions.table_partition(schema_editor, apps.get_model("telemetry", name), days=days)


class Migration(migrations.Migration):

    dependencies = [
        ("telemetry", "0015_duration_sketches"),
    ]

    operations = [
        migrations.AddField(
            model_name="project",
            name="retention_days",
            field=models.PositiveSmallIntegerField(
                db_default=30, default=30,
                help_text="Days raw data (tool calls, turns, artifacts, ingest batches, sessions) is kept. A change "
                "applies to data stored from then on; stored rows keep the day they expire on.",
                validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(400)],
            ),
        ),
        migrations.AddField(
            model_name="project",
            name="rollup_retention_days",
            field=models.PositiveSmallIntegerField(
                db_default=400, default=400,
                help_text="Days the hourly rollups (what the dashboard charts) are kept; at least the raw data's.",
                validators=[django.core.validators.MinValueValidator(1),
                            django.core.validators.MaxValueValidator(3650)],
            ),
        ),
        *(
            migrations.AddField(
                model_name=name,
                name="expires_on",
                field=models.DateField(default=toolscope.telemetry.retention.migration_expiry, editable=False),
                preserve_default=False,
            )
            for name in EXPIRING
        ),
        migrations.AlterField(
            model_name="quarantinedevent",
            name="batch",
            field=models.ForeignKey(blank=True, db_constraint=False, null=True,
                                    on_delete=django.db.models.deletion.SET_NULL, related_name="quarantined",
                                    to="telemetry.ingestbatch"),
        ),
        migrations.AlterField(
            model_name="toolcall",
            name="artifact",
            field=models.OneToOneField(blank=True, db_constraint=False, null=True,
                                       on_delete=django.db.models.deletion.SET_NULL, related_name="tool_call",
                                       to="telemetry.artifact"),
        ),
        migrations.AlterField(
            model_name="toolcall",
            name="duplicate_of",
            field=models.ForeignKey(blank=True, db_constraint=False, null=True,
                                    on_delete=django.db.models.deletion.SET_NULL, related_name="duplicates",
                                    to="telemetry.toolcall"),
        ),
        migrations.AlterField(
            model_name="toolcall",
            name="turn",
            field=models.ForeignKey(blank=True, db_constraint=False, null=True,
                                    on_delete=django.db.models.deletion.SET_NULL, related_name="tool_calls",
                                    to="telemetry.turn"),
        ),
        migrations.RunPython(partition_tables, elidable=False),
    ]
