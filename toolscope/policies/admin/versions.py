"""Published policy versions (immutable) and the labels agents fetch them by."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest
from django.utils.safestring import SafeString

from toolscope.policies.admin.scoping import ProjectScopedPickersMixin
from toolscope.policies.models import PolicyLabel, PolicyVersion
from toolscope.telemetry.admin.common import ListDeferMixin, ReadOnlyAdminMixin, pretty_json


@admin.register(PolicyVersion)
class PolicyVersionAdmin(ReadOnlyAdminMixin, ListDeferMixin, admin.ModelAdmin):
    """Agents cache a version by its ETag, so a version never changes: publish a new one instead."""

    list_display = ["number", "project", "etag", "comment", "published_by", "published_at"]
    list_filter = ["project"]
    list_select_related = ["project", "published_by"]
    list_defer = ("document",)
    search_fields = ["comment", "=etag", "project__slug"]
    date_hierarchy = "published_at"
    fields = [
        "project", "number", "etag", "comment", "published_by", "published_at", "labels", "document_json",
    ]
    readonly_fields = fields

    @admin.display(description="labels")
    def labels(self, obj: PolicyVersion) -> str:
        return ", ".join(obj.labels.values_list("name", flat=True)) or "-"

    @admin.display(description="document")
    def document_json(self, obj: PolicyVersion) -> SafeString:
        return pretty_json(obj.document)


@admin.register(PolicyLabel)
class PolicyLabelAdmin(ProjectScopedPickersMixin, admin.ModelAdmin):
    """Moving a label to an older version is a rollback; agents see it on their next fetch."""

    list_display = ["name", "project", "version_number", "updated_at", "updated_by"]
    list_filter = ["project", "name"]
    list_select_related = ["project", "version", "updated_by"]
    search_fields = ["name", "project__slug"]
    fields = ["project", "name", "version", "updated_at", "updated_by"]
    readonly_fields = ["updated_at", "updated_by"]

    def project_id_of(self, obj: PolicyLabel) -> int | None:
        return obj.project_id

    def get_readonly_fields(self, request: HttpRequest, obj: PolicyLabel | None = None):
        readonly = list(super().get_readonly_fields(request, obj))
        return readonly if obj is None else [*readonly, "project"]

    def save_model(self, request: HttpRequest, obj: PolicyLabel, form, change: bool) -> None:
        obj.updated_by = request.user
        super().save_model(request, obj, form, change)

    @admin.display(description="version", ordering="version__number")
    def version_number(self, obj: PolicyLabel) -> str:
        return f"v{obj.version.number}"
