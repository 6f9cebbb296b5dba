"""Published policy versions (immutable) and the labels agents fetch them by."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html_join
from django.utils.safestring import SafeString

from toolscope.policies.admin.scoping import ProjectScopedPickersMixin
from toolscope.policies.models import PolicyLabel, PolicyVersion
from toolscope.policies.selectors import policy_version_previous
from toolscope.policies.services.diff import policy_version_diff
from toolscope.policies.services.publish import label_delete, label_move
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
        "project", "number", "etag", "comment", "published_by", "published_at", "labels", "changes",
        "document_json",
    ]
    readonly_fields = fields

    @admin.display(description="labels")
    def labels(self, obj: PolicyVersion) -> str:
        return ", ".join(obj.labels.values_list("name", flat=True)) or "-"

    @admin.display(description="changes from the previous version")
    def changes(self, obj: PolicyVersion) -> SafeString | str:
        changes = policy_version_diff(old=policy_version_previous(version=obj), new=obj)
        if not changes:
            return "none"
        return format_html_join("\n", "<code>{}</code><br>", ((change,) for change in changes))

    @admin.display(description="document")
    def document_json(self, obj: PolicyVersion) -> SafeString:
        return pretty_json(obj.document)


@admin.register(PolicyLabel)
class PolicyLabelAdmin(ProjectScopedPickersMixin, admin.ModelAdmin):
    """Moving a label to an older version is a rollback; agents see it on their next fetch.

    Saves and deletes go through the publish service, which audits them and tells the API's cache.
    """

    list_display = ["name", "project", "version_number", "updated_at", "updated_by"]
    list_filter = ["project", "name"]
    list_select_related = ["project", "version", "updated_by"]
    search_fields = ["name", "project__slug"]
    fields = ["project", "name", "version", "updated_at", "updated_by"]
    readonly_fields = ["updated_at", "updated_by"]
    actions = ["roll_back"]

    def project_id_of(self, obj: PolicyLabel) -> int | None:
        return obj.project_id

    def get_readonly_fields(self, request: HttpRequest, obj: PolicyLabel | None = None):
        readonly = list(super().get_readonly_fields(request, obj))
        # A label is renamed by creating another: agents ask for it by name.
        return readonly if obj is None else [*readonly, "project", "name"]

    def save_model(self, request: HttpRequest, obj: PolicyLabel, form, change: bool) -> None:
        label = label_move(project=obj.project, name=obj.name, version=obj.version, user=request.user)
        obj.pk, obj.updated_at, obj.updated_by = label.pk, label.updated_at, label.updated_by

    def delete_model(self, request: HttpRequest, obj: PolicyLabel) -> None:
        label_delete(label=obj, user=request.user)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[PolicyLabel]) -> None:
        with transaction.atomic():  # one commit: agents' caches wait one invalidation barrier for all
            for label in queryset.select_related("project", "version"):
                label_delete(label=label, user=request.user)

    @admin.action(description="Roll back to the previous version", permissions=["change"])
    def roll_back(self, request: HttpRequest, queryset: QuerySet[PolicyLabel]) -> None:
        with transaction.atomic():  # as delete_queryset
            for label in queryset.select_related("project", "version"):
                previous = policy_version_previous(version=label.version)
                if previous is None:
                    self.message_user(request, f"{label}: no earlier version.", messages.WARNING)
                    continue
                label_move(project=label.project, name=label.name, version=previous, user=request.user)
                self.message_user(request, f"{label.project}:{label.name} → v{previous.number}.", messages.SUCCESS)

    @admin.display(description="version", ordering="version__number")
    def version_number(self, obj: PolicyLabel) -> str:
        return f"v{obj.version.number}"
