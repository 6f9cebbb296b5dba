"""Sessions keep the day their first turn or call expires: with expires_on, the day partitions their
rows lie in, so their queries look in those alone. Not filled in for sessions stored before:
processing sets it at a session's next batch, and until then its queries look in every day."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('telemetry', '0017_session_expiry_tool_daily'),
    ]

    operations = [
        migrations.AddField(
            model_name='session',
            name='first_expires_on',
            field=models.DateField(blank=True, editable=False, null=True),
        ),
    ]
