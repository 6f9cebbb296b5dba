"""Sessions, turns, tool calls and artifacts: what agents sent, read-only.

These tables grow fastest, so the lists skip the full-table count, keep large columns out of the
list query, and offer date filters that need no query instead of a date hierarchy that scans.
"""

from __future__ import annotations

from django.contrib import admin
from django.utils.html import format_html_join
from django.utils.safestring import SafeString

from toolscope.policies.models import Tool
from toolscope.telemetry.admin.common import (
    ListDeferMixin,
    ReadOnlyAdminMixin,
    change_link,
    changelist_link,
    preformatted,
    pretty_json,
)
from toolscope.telemetry.models import AdvertisedSet, AgentTools, Artifact, Session, ToolCall, Turn

DATE_FILTER = admin.DateFieldListFilter


class ToolNameFilter(admin.SimpleListFilter):
    """Names from the catalog (of the filtered project): a DISTINCT on tool calls would scan them.

    Calls to tools outside the catalog are still found by searching for the name.
    """

    title = "tool name"
    parameter_name = "tool_name"

    def lookups(self, request, model_admin):
        tools = Tool.objects.order_by("name")
        project_id = request.GET.get("project__id__exact", "")
        if project_id.isdigit():
            tools = tools.filter(project_id=project_id)
        return [(name, name) for name in tools.values_list("name", flat=True).distinct()]

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(tool_name=self.value())
        return queryset


class TelemetryAdmin(ReadOnlyAdminMixin, ListDeferMixin, admin.ModelAdmin):
    show_full_result_count = False


@admin.register(Session)
class SessionAdmin(TelemetryAdmin):
    list_display = ["client_id", "agent_name", "model", "project", "started_at", "ended_at", "related_links"]
    list_filter = ["project", "agent_name", "model", ("started_at", DATE_FILTER)]
    list_select_related = ["project"]
    list_defer = ("metadata",)
    search_fields = ["client_id"]
    date_hierarchy = "started_at"
    fields = [
        "project", "client_id", "agent_name", "model", "started_at", "ended_at", "created_at",
        "related_links", "metadata_json",
    ]
    readonly_fields = fields

    @admin.display(description="open")
    def related_links(self, obj: Session) -> SafeString:
        links = [
            changelist_link(Turn, "turns", session__id__exact=obj.pk),
            changelist_link(ToolCall, "tool calls", session__id__exact=obj.pk),
        ]
        return format_html_join(" · ", "{}", ((link,) for link in links))

    @admin.display(description="metadata")
    def metadata_json(self, obj: Session) -> SafeString:
        return pretty_json(obj.metadata)


@admin.register(Turn)
class TurnAdmin(TelemetryAdmin):
    list_display = [
        "index", "session", "project", "model", "started_at",
        "input_tokens", "output_tokens", "cached_tokens", "latency_ms",
    ]
    list_filter = ["project", "model", "tools_from", ("started_at", DATE_FILTER)]
    list_select_related = ["session", "project"]
    list_defer = ("task_message",)
    search_fields = ["=client_id", "=session__client_id"]
    fields = [
        "project", "session", "client_id", "index", "model", "started_at", "time_known", "created_at",
        "input_tokens", "output_tokens", "cached_tokens", "cache_write_tokens", "cache_write_1h_tokens", "latency_ms",
        "system_prompt_chars",
        "tool_calls_link", "task_message_text", "tools_from", "advertised_tools_json",
    ]
    readonly_fields = fields

    @admin.display(description="tool calls")
    def tool_calls_link(self, obj: Turn) -> SafeString:
        return changelist_link(ToolCall, "tool calls of this turn", turn__id__exact=obj.pk)

    @admin.display(description="task message")
    def task_message_text(self, obj: Turn) -> SafeString:
        return preformatted(obj.task_message)

    @admin.display(description="advertised tools")
    def advertised_tools_json(self, obj: Turn) -> SafeString:
        return pretty_json(obj.advertised_set.tools if obj.advertised_set else [])


@admin.register(AdvertisedSet)
class AdvertisedSetAdmin(TelemetryAdmin):
    list_display = ["digest", "project", "tool_count", "schema_tokens", "created_at"]
    list_filter = ["project"]
    list_select_related = ["project"]
    list_defer = ("tools",)
    search_fields = ["=digest"]
    fields = ["project", "digest", "tool_count", "schema_tokens", "created_at", "tools_json"]
    readonly_fields = fields

    @admin.display(description="tools")
    def tools_json(self, obj: AdvertisedSet) -> SafeString:
        return pretty_json(obj.tools)


@admin.register(AgentTools)
class AgentToolsAdmin(TelemetryAdmin):
    """Read-only: what a turn of each agent that sends no definitions is taken to carry."""

    list_display = ["agent_name", "project", "advertised_set", "since"]
    list_filter = ["project"]
    list_select_related = ["project", "advertised_set"]
    search_fields = ["agent_name"]
    fields = ["project", "agent_name", "advertised_set", "since"]
    readonly_fields = fields


@admin.register(ToolCall)
class ToolCallAdmin(TelemetryAdmin):
    list_display = ["tool_name", "status", "error_rule", "duration_ms", "session", "project", "started_at"]
    list_filter = ["status", "error_text_unflagged", "project", ToolNameFilter, "approval", "altered",
                   "time_known", ("started_at", DATE_FILTER)]
    list_select_related = ["session", "project"]
    list_defer = ("arguments", "output", "error")
    search_fields = ["tool_name", "=client_id", "=call_id", "=session__client_id"]
    fields = [
        "project", "session", "turn", "turn_index", "client_id", "call_id", "tool_name", "status",
        "error_rule", "error_text_unflagged", "approval", "duration_ms", "retries", "started_at", "time_known",
        "created_at", "artifact", "altered",
        "arguments_json", "output_text", "error_text",
    ]
    readonly_fields = fields

    @admin.display(description="arguments")
    def arguments_json(self, obj: ToolCall) -> SafeString:
        return pretty_json(obj.arguments)

    @admin.display(description="output (as the model received it)")
    def output_text(self, obj: ToolCall) -> SafeString:
        return preformatted(obj.output)

    @admin.display(description="error")
    def error_text(self, obj: ToolCall) -> SafeString:
        return preformatted(obj.error)


@admin.register(Artifact)
class ArtifactAdmin(TelemetryAdmin):
    list_display = ["id", "project", "strategy", "tokens_before", "tokens_after", "created_at"]
    list_filter = ["project", "strategy", ("created_at", DATE_FILTER)]
    list_select_related = ["project"]
    list_defer = ("original", "compacted")
    search_fields = ["=tool_call__client_id"]
    fields = [
        "id", "project", "tool_call_link", "strategy", "tokens_before", "tokens_after", "created_at",
        "compacted_text", "original_text",
    ]
    readonly_fields = fields

    @admin.display(description="tool call")
    def tool_call_link(self, obj: Artifact) -> str:
        return change_link(ToolCall.objects.filter(artifact=obj).first())

    @admin.display(description="compacted (what the model received)")
    def compacted_text(self, obj: Artifact) -> SafeString:
        return preformatted(obj.compacted)

    @admin.display(description="original")
    def original_text(self, obj: Artifact) -> SafeString:
        return preformatted(obj.original)
