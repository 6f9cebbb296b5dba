"""A tool is identified by (project, name, source), no longer by (project, name).

No row changes: rows unique per (project, name) are unique per (project, name, source), so the
new constraint is added before the old one goes and the catalog is never without one. A schema
another source silently replaced before this migration stays in that row's ToolVersion history;
versions record no source, so it cannot be split back out.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('policies', '0002_lifecycle_allowed_audit'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='tool',
            options={'ordering': ['name', 'source']},
        ),
        migrations.AddConstraint(
            model_name='tool',
            constraint=models.UniqueConstraint(
                fields=('project', 'name', 'source'), name='tool_project_name_source_unique'
            ),
        ),
        migrations.RemoveConstraint(
            model_name='tool',
            name='tool_project_name_unique',
        ),
    ]
