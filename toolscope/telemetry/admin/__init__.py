"""The Django admin of telemetry: projects, members, API keys and the rows agents send."""

from django.contrib import admin

from toolscope.telemetry.admin import api_keys, batches, projects, quarantine, records  # noqa: F401  (registers the admins)

admin.site.site_header = "toolscope admin"
admin.site.site_title = "toolscope admin"
admin.site.index_title = "Projects, telemetry and policies"
