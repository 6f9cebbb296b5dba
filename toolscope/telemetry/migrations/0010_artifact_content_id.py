"""Artifacts get the content id their compacted text names (engine/compaction.py artifact_id).

Rows stored before it get theirs computed from their original, in chunks, so the ids agents see
from now on and the ones of older rows follow one rule."""

from django.db import migrations, models
from toolscope_agent.engine.compaction import artifact_id

CHUNK = 500


def content_ids_fill(apps, schema_editor):
    Artifact = apps.get_model("telemetry", "Artifact")
    while True:
        rows = list(Artifact.objects.filter(content_id="").values_list("pk", "original")[:CHUNK])
        if not rows:
            return
        Artifact.objects.bulk_update(
            [Artifact(pk=pk, content_id=artifact_id(original)) for pk, original in rows], ["content_id"])


class Migration(migrations.Migration):

    dependencies = [
        ('telemetry', '0009_quarantine_altered'),
    ]

    operations = [
        migrations.AddField(
            model_name='artifact',
            name='content_id',
            field=models.CharField(default='', editable=False, max_length=64),
            preserve_default=False,
        ),
        migrations.RunPython(content_ids_fill, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name='artifact',
            index=models.Index(fields=['project', 'content_id'], name='artifact_project_content'),
        ),
    ]
