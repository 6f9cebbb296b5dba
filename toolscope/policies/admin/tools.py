"""A project's tool catalog: filled by what agents advertise, tuned here per tool."""

from __future__ import annotations

from django.contrib import admin
from django.utils.safestring import SafeString

from toolscope.policies.models import Tool, ToolVersion
from toolscope.policies.services.catalog import tool_settings_share
from toolscope.telemetry.admin.common import (
    ListDeferMixin,
    ReadOnlyAdminMixin,
    changelist_link,
    pretty_json,
)
from toolscope.telemetry.models import ToolCall

CATALOG_FIELDS = [
    "project", "name", "source", "description", "schema_hash", "schema_tokens",
    "first_seen_at", "last_seen_at", "calls_link", "input_schema_json",
]
SETTING_FIELDS = [
    "scope", "requires_approval", "redact", "max_result_tokens", "on_schema_error", "retry_policy",
]


class ToolVersionInline(ReadOnlyAdminMixin, admin.StackedInline):
    """Every schema the tool has had, newest first."""

    model = ToolVersion
    extra = 0
    ordering = ["-first_seen_at"]
    fields = ["schema_hash", "schema_tokens", "first_seen_at", "description", "input_schema_json"]
    readonly_fields = fields
    classes = ["collapse"]
    verbose_name_plural = "schema history"

    @admin.display(description="input schema")
    def input_schema_json(self, obj: ToolVersion) -> SafeString:
        return pretty_json(obj.input_schema)


@admin.register(Tool)
class ToolAdmin(ListDeferMixin, admin.ModelAdmin):
    list_display = [
        "name", "project", "source", "scope", "requires_approval", "schema_tokens", "last_seen_at",
    ]
    list_editable = ["scope", "requires_approval"]
    list_filter = ["project", "scope", "requires_approval", "on_schema_error", "source"]
    list_select_related = ["project"]
    list_defer = ("input_schema",)
    search_fields = ["name", "description"]
    fieldsets = [
        ("Catalog (as this source advertised it)", {"fields": CATALOG_FIELDS}),
        ("Per-tool settings (served in the policy by name, shared by every source's definition)",
         {"fields": SETTING_FIELDS}),
    ]
    readonly_fields = CATALOG_FIELDS
    inlines = [ToolVersionInline]

    def save_model(self, request, obj: Tool, form, change: bool) -> None:
        super().save_model(request, obj, form, change)
        # The policy serves settings by name: every source's tool of this name gets them.
        if shared := tool_settings_share(tool=obj):
            self.message_user(request, f"Settings of {obj.name} also applied to its {shared} other "
                              f"source{'s' if shared > 1 else ''}' definition{'s' if shared > 1 else ''}.")

    def has_add_permission(self, request) -> bool:
        # The catalog is what agents advertise; a tool typed in here would have no schema.
        return False

    @admin.display(description="calls")
    def calls_link(self, obj: Tool) -> SafeString:
        return changelist_link(
            ToolCall, f"calls to {obj.name}", project__id__exact=obj.project_id, tool_name=obj.name
        )

    @admin.display(description="input schema")
    def input_schema_json(self, obj: Tool) -> SafeString:
        return pretty_json(obj.input_schema)
