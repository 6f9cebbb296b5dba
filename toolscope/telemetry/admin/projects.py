"""Projects and who may use them."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.defaultfilters import filesizeformat
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from toolscope.policies.models import Policy, Tool
from toolscope.telemetry.admin.api_keys import created_key_response, new_key_url, project_keys_url
from toolscope.telemetry.admin.common import changelist_link
from toolscope.telemetry.models import (
    ApiKey,
    IngestBatch,
    Membership,
    ModelPrice,
    Project,
    Scope,
    Session,
    ToolCall,
)
from toolscope.telemetry.services.api_keys import api_key_create
from toolscope.telemetry.services.repricing import reprice_soon
from toolscope.telemetry.services.retention import partitions_ensure, retention_overview


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]
    fields = ["user", "role", "created_at"]
    readonly_fields = ["created_at"]


class ApiKeyInline(admin.TabularInline):
    """Keys are listed here and created through the key admin, which shows the secret once."""

    model = ApiKey
    extra = 0
    fields = ["prefix", "name", "scopes", "last_used_at", "revoked_at"]
    readonly_fields = fields
    show_change_link = True
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class ModelPriceInline(admin.TabularInline):
    """The project's own prices: they win over genai-prices' for their model (toolscope/prices.py)."""

    model = ModelPrice
    extra = 0
    fields = ["model", "provider", "input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok",
              "cache_write_1h_mtok", "valid_from", "note"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "encoding", "context_window", "retention_days", "created_at"]
    list_filter = ["encoding"]
    search_fields = ["slug", "name"]
    readonly_fields = ["created_at", "related_links", "retention_state"]
    fieldsets = [
        (None, {"fields": ["slug", "name", "encoding", "context_window", "tool_error_patterns", "created_at",
                           "related_links"]}),
        ("Retention", {"fields": ["retention_days", "rollup_retention_days", "retention_state"]}),
    ]
    inlines = [MembershipInline, ApiKeyInline, ModelPriceInline]
    actions = ["create_ingest_key"]

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        super().save_formset(request, form, formset, change)
        if formset.model is ModelPrice and (formset.new_objects or formset.changed_objects
                                            or formset.deleted_objects):
            # Stored dollars follow the project's prices: every session is priced again.
            reprice_soon(project_id=form.instance.pk)
            self.message_user(request, "Prices changed: the project's sessions are being priced again in the "
                                       "background; the overview and tools pages follow once it is done.")

    @admin.display(description="open")
    def related_links(self, obj: Project) -> SafeString | str:
        if obj.pk is None:
            return "-"
        links = [
            changelist_link(Session, "sessions", project__id__exact=obj.pk),
            changelist_link(ToolCall, "tool calls", project__id__exact=obj.pk),
            changelist_link(IngestBatch, "ingest batches", project__id__exact=obj.pk),
            changelist_link(Tool, "tools", project__id__exact=obj.pk),
            changelist_link(Policy, "policy", project__id__exact=obj.pk),
            format_html('<a href="{}">API keys</a>', project_keys_url(obj)),
            format_html('<a href="{}">create an API key</a>', new_key_url(obj)),
        ]
        return format_html_join(" · ", "{}", ((link,) for link in links))

    @admin.display(description="stored days")
    def retention_state(self, obj: Project) -> SafeString | str:
        """What retention does (shared by all projects): the day partitions and when the next goes."""
        state = retention_overview()
        if state.partitions is None:
            return format_html("SQLite: expired rows are deleted hourly (no partitions). Next expiry: {}.",
                               state.next_expiry)
        if not state.partitions:
            return "No partitions yet: beat's hourly retention task makes them."
        return format_html(
            "{} day partitions per table, {} to {} ({} on disk, ~{} rows). Raw rows expire on the day stored "
            "with them; the oldest day ({}) is dropped whole on {}.",
            state.days, state.first, state.last, filesizeformat(state.bytes), f"{state.rows:,}", state.first,
            state.next_expiry,
        )

    def save_model(self, request: HttpRequest, obj: Project, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        # A longer retention needs days ahead that may not exist yet: made now, not at beat's next run.
        transaction.on_commit(lambda: partitions_ensure(retention_days=obj.retention_days))

    def has_delete_permission(self, request: HttpRequest, obj: Project | None = None) -> bool:
        # The confirmation page would load every session, turn and tool call of the project.
        return False

    def has_create_key_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("telemetry.add_apikey")

    @admin.action(description="Create an ingest + policy:read key", permissions=["create_key"])
    def create_ingest_key(self, request: HttpRequest, queryset: QuerySet[Project]) -> HttpResponse | None:
        projects = list(queryset[:2])
        if len(projects) != 1:
            self.message_user(request, "Select exactly one project to create a key for.", messages.WARNING)
            return None
        with transaction.atomic():
            created = api_key_create(
                project=projects[0],
                name=f"ingest + policy:read, {timezone.localdate():%Y-%m-%d}",
                scopes=[Scope.INGEST, Scope.POLICY_READ],
                created_by=request.user,
            )
            self.log_addition(request, created.api_key, [{"added": {}}])
        return created_key_response(self, request, created)


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "project", "role", "created_at"]
    list_filter = ["role", "project"]
    list_select_related = ["user", "project"]
    search_fields = ["user__username", "user__email", "project__slug"]
    autocomplete_fields = ["project", "user"]
    readonly_fields = ["created_at"]
