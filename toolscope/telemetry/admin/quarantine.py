"""Quarantined events: what the workers could not store, with why, and a way to try again."""

from __future__ import annotations

from django.contrib import admin, messages
from django.utils.safestring import SafeString

from toolscope.telemetry.admin.common import ListDeferMixin, ReadOnlyAdminMixin, change_link, pretty_json
from toolscope.telemetry.models import QuarantinedEvent
from toolscope.telemetry.services.quarantine import quarantined_retry


@admin.register(QuarantinedEvent)
class QuarantinedEventAdmin(ReadOnlyAdminMixin, ListDeferMixin, admin.ModelAdmin):
    list_display = ["id", "project", "event_type", "client_id", "reason", "batch_link", "created_at"]
    list_filter = ["event_type", "project"]
    list_select_related = ["project", "batch"]
    list_defer = ("event", "batch__payload", "batch__error")
    search_fields = ["client_id"]
    date_hierarchy = "created_at"
    fields = ["id", "project", "batch_link", "event_type", "client_id", "reason", "created_at", "event_json"]
    readonly_fields = fields
    actions = ["retry_events"]

    @admin.action(description="Retry selected events (as a new batch)")
    def retry_events(self, request, queryset) -> None:
        retried = quarantined_retry(event_ids=list(queryset.values_list("pk", flat=True)))
        self.message_user(request, f"{retried} event(s) sent to the workers again.", messages.SUCCESS)

    @admin.display(description="batch")
    def batch_link(self, obj: QuarantinedEvent) -> str:
        return change_link(obj.batch, f"batch {obj.batch_id}") if obj.batch_id else "-"

    @admin.display(description="event")
    def event_json(self, obj: QuarantinedEvent) -> SafeString:
        return pretty_json(obj.event)
