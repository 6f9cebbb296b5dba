"""API keys: created through the service, the secret shown once on a page of its own, revocable.

The secret never passes through a redirect, a message or the session: the response that creates
a key renders it, marked uncacheable, and nothing else ever sees it again.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.cache import add_never_cache_headers

from toolscope.telemetry.admin.common import change_url
from toolscope.telemetry.models import ApiKey, Project, Scope
from toolscope.telemetry.services.api_keys import CreatedKey, api_key_create, api_key_revoke


class ApiKeyCreateForm(forms.Form):
    project = forms.ModelChoiceField(queryset=Project.objects.all())
    name = forms.CharField(max_length=ApiKey._meta.get_field("name").max_length)
    scopes = forms.MultipleChoiceField(
        choices=Scope.choices,
        widget=forms.CheckboxSelectMultiple,
        initial=[Scope.INGEST, Scope.POLICY_READ],
        help_text="admin includes every other scope.",
    )


def created_key_response(
    model_admin: admin.ModelAdmin, request: HttpRequest, created: CreatedKey
) -> HttpResponse:
    """The one page that ever shows a key's secret."""
    api_key = created.api_key
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "API key created",
        "opts": ApiKey._meta,
        "api_key": api_key,
        "secret": created.secret,
        "key_url": change_url(api_key),
        "project_url": change_url(api_key.project),
    }
    response = TemplateResponse(request, "admin/telemetry/apikey/created.html", context)
    add_never_cache_headers(response)
    return response


class KeyStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("active", "active"), ("revoked", "revoked")]

    def queryset(self, request, queryset):
        if self.value() == "active":
            return queryset.filter(revoked_at__isnull=True)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        return queryset


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["name", "prefix", "project", "scope_list", "is_active", "last_used_at", "created_at"]
    list_filter = [KeyStateFilter, "project"]
    list_select_related = ["project"]
    search_fields = ["name", "=prefix", "project__slug"]
    date_hierarchy = "created_at"
    actions = ["revoke_keys"]
    # Only the name can change; the secret_hash is left out of every page.
    readonly_fields = [
        "project", "prefix", "scope_list", "created_by", "created_at", "last_used_at", "revoked_at",
    ]
    fields = ["name", *readonly_fields]

    @admin.display(description="scopes")
    def scope_list(self, obj: ApiKey) -> str:
        return ", ".join(obj.scopes)

    @admin.display(description="active", boolean=True)
    def is_active(self, obj: ApiKey) -> bool:
        return obj.is_active

    @admin.action(description="Revoke selected keys", permissions=["change"])
    def revoke_keys(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        revoked = 0
        with transaction.atomic():  # one commit, so web processes' memory waits one barrier for all
            for api_key in queryset.filter(revoked_at__isnull=True):
                api_key_revoke(api_key=api_key)
                self.log_change(request, api_key, "Revoked.")
                revoked += 1
        self.message_user(request, f"Revoked {revoked} key(s).", messages.SUCCESS)

    def add_view(self, request: HttpRequest, form_url: str = "", extra_context=None) -> HttpResponse:
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = ApiKeyCreateForm(request.POST or None, initial=self.get_changeform_initial_data(request))
        if request.method == "POST" and form.is_valid():
            return self._create(request, form)
        return self._render_add_form(request, form, form_url)

    def _create(self, request: HttpRequest, form: ApiKeyCreateForm) -> HttpResponse:
        with transaction.atomic():
            created = api_key_create(
                project=form.cleaned_data["project"],
                name=form.cleaned_data["name"],
                scopes=form.cleaned_data["scopes"],
                created_by=request.user,
            )
            self.log_addition(request, created.api_key, [{"added": {}}])
        return created_key_response(self, request, created)

    def _render_add_form(self, request: HttpRequest, form: ApiKeyCreateForm, form_url: str) -> HttpResponse:
        admin_form = helpers.AdminForm(form, [(None, {"fields": list(form.fields)})], {}, model_admin=self)
        context = {
            **self.admin_site.each_context(request),
            "title": "Add API key",
            "subtitle": None,
            "adminform": admin_form,
            "object_id": None,
            "original": None,
            "is_popup": False,
            "to_field": None,
            "media": self.media + admin_form.media,
            "inline_admin_formsets": [],
            "errors": helpers.AdminErrorList(form, []),
            "preserved_filters": self.get_preserved_filters(request),
            # Every submit button creates the key and shows its secret; offer just one.
            "show_save_and_add_another": False,
            "show_save_and_continue": False,
        }
        return self.render_change_form(request, context, add=True, form_url=form_url)


def project_keys_url(project: Project) -> str:
    return f"{reverse('admin:telemetry_apikey_changelist')}?project__id__exact={project.pk}"


def new_key_url(project: Project) -> str:
    return f"{reverse('admin:telemetry_apikey_add')}?project={project.pk}"
