"""Raw ingest batches: the request bodies as accepted, kept for processing and for inspection.

Read-only: a batch is evidence of what an agent sent, and processing reads it again on retry.
"""

from __future__ import annotations

from django.contrib import admin
from django.utils.safestring import SafeString

from toolscope.telemetry.admin.common import ListDeferMixin, ReadOnlyAdminMixin, pretty_json
from toolscope.telemetry.models import IngestBatch


@admin.register(IngestBatch)
class IngestBatchAdmin(ReadOnlyAdminMixin, ListDeferMixin, admin.ModelAdmin):
    list_display = ["id", "project", "kind", "status", "event_count", "attempts", "received_at"]
    list_filter = ["status", "kind", "project"]
    list_select_related = ["project"]
    list_defer = ("payload", "error")
    date_hierarchy = "received_at"
    show_full_result_count = False
    fields = [
        "id", "project", "api_key", "kind", "status", "event_count", "attempts", "error",
        "received_at", "started_at", "finished_at", "payload_json",
    ]
    readonly_fields = fields

    @admin.display(description="payload")
    def payload_json(self, obj: IngestBatch) -> SafeString:
        return pretty_json(obj.payload)
