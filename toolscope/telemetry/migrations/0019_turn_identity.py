# A turn is its event id; two turns of one session may share an index (issue 24, item 4).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('telemetry', '0018_session_first_expiry'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='turn',
            name='turn_session_index_unique',
        ),
        migrations.AddIndex(
            model_name='turn',
            index=models.Index(fields=['session', 'index'], name='turn_session_index'),
        ),
    ]
