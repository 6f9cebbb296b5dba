"""A project's draft policy: always-on set, groups, context rules and compaction rules."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db import models
from django.db.models import Count, Model, QuerySet
from django.http import HttpRequest
from django.urls import path
from django.utils.safestring import SafeString

from toolscope.policies.admin.publish import publish_view
from toolscope.policies.admin.scoping import ProjectScopedPickersMixin
from toolscope.policies.models import (
    CompactionRule,
    ContextRule,
    Policy,
    PolicyAuditAction,
    PolicyAuditEntry,
    PolicyVersion,
    ToolGroup,
)
from toolscope.policies.services.audit import audit_draft_change, audit_record
from toolscope.policies.services.drafts import draft_snapshot
from toolscope.telemetry.admin.common import changelist_link

SAVE_FIRST = "Save first: the tool and group pickers offer the project's rows once the policy exists."


class DraftAuditMixin:
    """Every save or delete through this admin writes a draft_changed audit entry listing what the
    edit changed in the draft's document.

    save_model runs before anything is written, so the document built there is the draft as it
    was; save_related runs after the many-to-many fields and inlines are saved.
    """

    def policy_of(self, obj: Model) -> Policy:
        raise NotImplementedError

    def _draft_before(self, obj: Model) -> dict[str, Any] | None:
        policy = self.policy_of(obj)
        return draft_snapshot(policy=policy) if policy.pk is not None else None

    def save_model(self, request: HttpRequest, obj: Model, form, change: bool) -> None:
        request.policy_draft_before = self._draft_before(obj)
        super().save_model(request, obj, form, change)

    def save_related(self, request: HttpRequest, form, formsets, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        self._draft_audit(request, self.policy_of(form.instance), getattr(request, "policy_draft_before", None))

    def delete_model(self, request: HttpRequest, obj: Model) -> None:
        policy, before = self.policy_of(obj), self._draft_before(obj)
        super().delete_model(request, obj)
        if Policy.objects.filter(pk=policy.pk).exists():
            self._draft_audit(request, policy, before)

    def _draft_audit(self, request: HttpRequest, policy: Policy, before: dict[str, Any] | None) -> None:
        if before is None:
            audit_record(project=policy.project, user=request.user, action=PolicyAuditAction.DRAFT_CHANGED,
                         summary="draft created", detail={"mode": policy.mode})
        else:
            audit_draft_change(policy=policy, user=request.user, before=before)


class ToolGroupInline(ProjectScopedPickersMixin, admin.StackedInline):
    model = ToolGroup
    extra = 0
    fields = ["name", "description", "tools"]
    filter_horizontal = ["tools"]

    def project_id_of(self, obj: Policy) -> int | None:
        return obj.project_id


class ContextRuleInline(ProjectScopedPickersMixin, admin.TabularInline):
    """Rules apply in position order; a group added above is offered here after saving."""

    model = ContextRule
    extra = 0
    ordering = ["position", "id"]
    fields = ["position", "name", "keywords", "regex", "after_tools", "groups", "enabled"]
    formfield_overrides = {
        models.ManyToManyField: {"widget": forms.CheckboxSelectMultiple},
        models.JSONField: {"widget": forms.Textarea(attrs={"rows": 2, "cols": 30})},
    }

    def project_id_of(self, obj: Policy) -> int | None:
        return obj.project_id


class CompactionRuleInline(admin.TabularInline):
    model = CompactionRule
    extra = 0
    ordering = ["position", "id"]
    fields = ["position", "tools", "max_tokens", "strategy"]


@admin.register(Policy)
class PolicyAdmin(DraftAuditMixin, ProjectScopedPickersMixin, admin.ModelAdmin):
    list_display = [
        "project", "mode", "sticky_discovered", "provider_search", "suppress_duplicates",
        "updated_at", "updated_by",
    ]
    list_filter = ["mode"]
    list_select_related = ["project", "updated_by"]
    search_fields = ["project__slug", "project__name"]
    filter_horizontal = ["allowed", "always_on"]
    fieldsets = [
        (None, {"fields": ["project", "mode"]}),
        ("Allowed tools and always-on set", {"fields": ["allowed", "always_on", "sticky_discovered", "search_always_on",
                                                        "rule_window", "tool_list"]}),
        ("Progressive menu and tool search", {
            "fields": ["hint_prefix", "search_top_k", "search_max_top_k", "search_ranker", "search_learned",
                       "search_semantic", "provider_search", "search_defer_loading"],
        }),
        ("Outputs", {"fields": ["suppress_duplicates"]}),
        ("History", {"fields": ["updated_at", "updated_by", "versions_link", "audit_link"]}),
    ]
    add_fieldsets = [(None, {"fields": ["project", "mode"], "description": SAVE_FIRST})]
    readonly_fields = ["updated_at", "updated_by", "versions_link", "audit_link"]

    def project_id_of(self, obj: Policy) -> int | None:
        return obj.project_id

    def get_fieldsets(self, request: HttpRequest, obj: Policy | None = None):
        return self.add_fieldsets if obj is None else self.fieldsets

    def get_readonly_fields(self, request: HttpRequest, obj: Policy | None = None):
        readonly = list(super().get_readonly_fields(request, obj))
        return readonly if obj is None else [*readonly, "project"]

    def get_inlines(self, request: HttpRequest, obj: Policy | None):
        return [] if obj is None else [ToolGroupInline, ContextRuleInline, CompactionRuleInline]

    def get_urls(self):
        publish = self.admin_site.admin_view(lambda request, object_id: publish_view(self, request, object_id))
        opts = self.model._meta
        return [
            path("<path:object_id>/publish/", publish, name=f"{opts.app_label}_{opts.model_name}_publish"),
            *super().get_urls(),
        ]

    def policy_of(self, obj: Policy) -> Policy:
        return obj

    def save_model(self, request: HttpRequest, obj: Policy, form, change: bool) -> None:
        obj.updated_by = request.user
        super().save_model(request, obj, form, change)

    @admin.display(description="published versions")
    def versions_link(self, obj: Policy) -> SafeString | str:
        if obj.pk is None:
            return "-"
        return changelist_link(PolicyVersion, "versions of this project", project__id__exact=obj.project_id)

    @admin.display(description="audit log")
    def audit_link(self, obj: Policy) -> SafeString | str:
        if obj.pk is None:
            return "-"
        return changelist_link(PolicyAuditEntry, "changes to this project's policy", project__id__exact=obj.project_id)


@admin.register(ToolGroup)
class ToolGroupAdmin(DraftAuditMixin, ProjectScopedPickersMixin, admin.ModelAdmin):
    list_display = ["name", "project", "description", "tool_count"]
    list_filter = ["policy__project"]
    list_select_related = ["policy__project"]
    search_fields = ["name", "description"]
    filter_horizontal = ["tools"]

    def project_id_of(self, obj: ToolGroup) -> int | None:
        return obj.policy.project_id

    def policy_of(self, obj: ToolGroup) -> Policy:
        return obj.policy

    def get_queryset(self, request: HttpRequest) -> QuerySet[ToolGroup]:
        return super().get_queryset(request).annotate(tool_count=Count("tools"))

    def get_fields(self, request: HttpRequest, obj: ToolGroup | None = None):
        fields = ["policy", "name", "description"]
        return fields if obj is None else [*fields, "tools"]

    def get_readonly_fields(self, request: HttpRequest, obj: ToolGroup | None = None):
        return [] if obj is None else ["policy"]

    @admin.display(description="project", ordering="policy__project__slug")
    def project(self, obj: ToolGroup) -> str:
        return str(obj.policy.project)

    @admin.display(description="tools", ordering="tool_count")
    def tool_count(self, obj: ToolGroup) -> int:
        return obj.tool_count
