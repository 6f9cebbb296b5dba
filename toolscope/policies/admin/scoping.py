"""Relation pickers limited to one project, so an edit form never offers another project's rows."""

from __future__ import annotations

from functools import partial
from typing import Any

from django import forms
from django.contrib.admin.widgets import RelatedFieldWidgetWrapper
from django.db.models import Field, Model, QuerySet
from django.http import HttpRequest

from toolscope.policies.models import Policy, PolicyVersion, Tool, ToolGroup


def scoped_choices(db_field: Field, project_id: int | None) -> QuerySet | None:
    """The rows a picker for `db_field` may offer inside `project_id`; None leaves Django's default.

    Without a project (an add form) tool and group pickers offer nothing: those forms leave the
    pickers out until the row exists. Versions stay selectable because the label's clean()
    rejects a version of another project.
    """
    model = db_field.related_model
    if model is Tool:
        return Tool.objects.filter(project_id=project_id) if project_id else Tool.objects.none()
    if model is ToolGroup:
        groups = ToolGroup.objects.filter(policy__project_id=project_id)
        return groups if project_id else ToolGroup.objects.none()
    if model is PolicyVersion:
        versions = PolicyVersion.objects.select_related("project")
        return versions.filter(project_id=project_id) if project_id else versions
    if model is Policy:
        return Policy.objects.select_related("project")
    return None


class ProjectScopedPickersMixin:
    """For admins and inlines: tool, group and version pickers list only the edited project's rows.

    get_form/get_formset receive the edited object (an inline gets its parent) and bind its project
    into the form field callback. Keeping it on the admin instance instead would leak between
    concurrent requests, since one admin instance serves them all.
    """

    def project_id_of(self, obj: Model) -> int | None:
        raise NotImplementedError

    def get_form(self, request: HttpRequest, obj: Model | None = None, **kwargs: Any):
        kwargs["formfield_callback"] = self._scoped_callback(request, obj)
        return super().get_form(request, obj, **kwargs)

    def get_formset(self, request: HttpRequest, obj: Model | None = None, **kwargs: Any):
        kwargs["formfield_callback"] = self._scoped_callback(request, obj)
        return super().get_formset(request, obj, **kwargs)

    def _scoped_callback(self, request: HttpRequest, obj: Model | None) -> partial:
        project_id = self.project_id_of(obj) if obj is not None else None
        return partial(self.formfield_for_dbfield, request=request, project_id=project_id)

    def formfield_for_dbfield(
        self, db_field: Field, request: HttpRequest, project_id: int | None = None, **kwargs: Any
    ) -> forms.Field | None:
        queryset = scoped_choices(db_field, project_id)
        if queryset is not None:
            kwargs["queryset"] = queryset
        formfield = super().formfield_for_dbfield(db_field, request, **kwargs)
        if queryset is not None and formfield is not None:
            _no_popup_add(formfield)
        return formfield


def _no_popup_add(formfield: forms.Field) -> None:
    # The "+" popup would create a group or version under any policy or project.
    if isinstance(formfield.widget, RelatedFieldWidgetWrapper):
        formfield.widget.can_add_related = False
