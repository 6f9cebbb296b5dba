"""API keys: every member sees the list; admins create and revoke.

A new key's secret is shown once, on the response to the POST that created it. It is never put in
the session, a message or a redirect: once that page is gone, only its hash exists.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from dashboard import selectors
from dashboard.forms import ApiKeyCreateForm
from dashboard.permissions import ProjectAccess, project_view
from dashboard.views.common import csv_name, csv_response, range_from, render_page
from toolscope.telemetry.models import Role
from toolscope.telemetry.services.api_keys import KEY_PREFIX, api_key_create, api_key_revoke

CSV_COLUMNS = ("name", "prefix", "scopes", "created_at", "created_by", "last_used_at", "revoked_at")


def _render_keys(request: HttpRequest, access: ProjectAccess, form: ApiKeyCreateForm,
                 status: int = 200) -> HttpResponse:
    time_range, range_form = range_from(request)
    return render_page(
        request, access, "dashboard/keys.html", active="keys", time_range=time_range, range_form=range_form,
        keys=selectors.api_key_list(project_id=access.project.pk), form=form, key_prefix=KEY_PREFIX, status=status,
    )


@project_view()
def key_list(request: HttpRequest, access: ProjectAccess) -> HttpResponse:
    return _render_keys(request, access, ApiKeyCreateForm())


@project_view(min_role=Role.ADMIN)
@require_POST
@never_cache
def key_create(request: HttpRequest, access: ProjectAccess) -> HttpResponse:
    form = ApiKeyCreateForm(request.POST)
    if not form.is_valid():
        return _render_keys(request, access, form, status=400)
    try:
        created = api_key_create(project=access.project, name=form.cleaned_data["name"],
                                 scopes=form.cleaned_data["scopes"], created_by=request.user)
    except ValidationError as exc:
        form.add_error(None, exc)
        return _render_keys(request, access, form, status=400)
    time_range, range_form = range_from(request)
    return render_page(request, access, "dashboard/key_created.html", active="keys", time_range=time_range,
                       range_form=range_form, created=created)


@project_view(min_role=Role.ADMIN)
@require_POST
def key_revoke(request: HttpRequest, access: ProjectAccess, key_id: int) -> HttpResponse:
    api_key = selectors.api_key_get(project_id=access.project.pk, key_id=key_id)
    if api_key is None:
        raise Http404("No such key.")
    api_key_revoke(api_key=api_key)
    time_range, _ = range_from(request)
    return redirect(f"{reverse('dashboard:keys', args=[access.project.slug])}?{time_range.query}")


@project_view()
def key_list_csv(request: HttpRequest, access: ProjectAccess) -> HttpResponse:
    keys = selectors.api_key_list(project_id=access.project.pk)
    rows = ([k.name, f"{KEY_PREFIX}{k.prefix}_", " ".join(k.scopes), k.created_at,
             k.created_by.get_username() if k.created_by else "", k.last_used_at, k.revoked_at] for k in keys)
    return csv_response(csv_name(access, "keys"), CSV_COLUMNS, rows)
