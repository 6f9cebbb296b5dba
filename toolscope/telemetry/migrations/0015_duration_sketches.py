"""Duration percentiles from DDSketch bins kept per (project, hour, tool) (telemetry/sketches.py).

Hours stored before this migration have percentiles and no bins: each such hour is marked for a
rebuild, which the rollup task (beat, every minute) does from the raw rows. CallDuration, the
narrow copy of timed calls the percentile refresh scanned, and DirtyHour.full (percentile-only
marks) go away."""

from django.db import migrations, models
from django.utils import timezone


def mark_timed_hours(apps, schema_editor):
    ToolHourly = apps.get_model("telemetry", "ToolHourly")
    DirtyHour = apps.get_model("telemetry", "DirtyHour")
    now = timezone.now()
    hours = (ToolHourly.objects.filter(duration_p50_ms__isnull=False).order_by()
             .values_list("project_id", "hour").distinct())
    marks = [DirtyHour(project_id=project_id, hour=hour, marked_at=now) for project_id, hour in hours]
    DirtyHour.objects.bulk_create(marks, batch_size=2000, ignore_conflicts=True)


class Migration(migrations.Migration):

    dependencies = [
        ("telemetry", "0014_batch_kind_otlp"),
    ]

    operations = [
        # Every mark is a rebuild mark from here on, percentile-only ones included.
        migrations.RemoveField(
            model_name="dirtyhour",
            name="full",
        ),
        migrations.AddField(
            model_name="toolhourly",
            name="duration_bins",
            field=models.JSONField(blank=True, db_default={}, default=dict),
        ),
        migrations.RunPython(mark_timed_hours, migrations.RunPython.noop, elidable=True),
        migrations.DeleteModel(
            name="CallDuration",
        ),
    ]
