"""Raw ingest batches: the request bodies as accepted, kept for processing and for inspection.

Read-only: a batch is evidence of what an agent sent, and processing reads it again on retry.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.utils.safestring import SafeString

from toolscope.telemetry.admin.common import ListDeferMixin, ReadOnlyAdminMixin, pretty_json
from toolscope.telemetry.models import IngestBatch
from toolscope.telemetry.services.batches import batches_retry, worker_metrics


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
    actions = ["retry_batches"]

    def changelist_view(self, request, extra_context=None):
        # Whether the workers keep up, above the list of what they work on.
        extra_context = {**(extra_context or {}), "worker_metrics": worker_metrics()}
        return super().changelist_view(request, extra_context=extra_context)

    @admin.action(description="Retry selected failed batches")
    def retry_batches(self, request, queryset) -> None:
        retried = batches_retry(batch_ids=list(queryset.values_list("pk", flat=True)))
        skipped = queryset.count() - retried
        self.message_user(request, f"{retried} failed batch(es) queued again.", messages.SUCCESS)
        if skipped:
            self.message_user(request, f"{skipped} batch(es) were not failed and were left alone.", messages.WARNING)

    @admin.display(description="payload")
    def payload_json(self, obj: IngestBatch) -> SafeString:
        return pretty_json(obj.payload)
