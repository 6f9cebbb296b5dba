"""The policy audit log: read-only, newest first."""

from __future__ import annotations

from django.contrib import admin
from django.utils.safestring import SafeString

from toolscope.policies.models import PolicyAuditEntry
from toolscope.telemetry.admin.common import ListDeferMixin, ReadOnlyAdminMixin, pretty_json


@admin.register(PolicyAuditEntry)
class PolicyAuditEntryAdmin(ReadOnlyAdminMixin, ListDeferMixin, admin.ModelAdmin):
    list_display = ["created_at", "project", "action", "summary", "user"]
    list_filter = ["action", "project"]
    list_select_related = ["project", "user"]
    list_defer = ("detail",)
    date_hierarchy = "created_at"
    fields = ["created_at", "project", "action", "user", "summary", "detail_json"]
    readonly_fields = fields

    @admin.display(description="detail")
    def detail_json(self, obj: PolicyAuditEntry) -> SafeString:
        return pretty_json(obj.detail)
