"""The sessions list page and its CSV."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from dashboard import selectors
from dashboard.forms import SESSION_SORTS, SessionFilterForm, cursor_format
from dashboard.permissions import ProjectAccess, project_view
from dashboard.views.common import csv_name, csv_response, csv_rows, range_from, render_page

LIST_COLUMNS = ("client_id", "agent_name", "model", "started_at", "ended_at", "turn_count", "tool_call_count",
                "error_count", "duplicate_tokens", "max_window_share", "near_window", "via", "total_tokens", "usd")


@project_view()
def session_list(request: HttpRequest, access: ProjectAccess) -> HttpResponse:
    time_range, range_form = range_from(request)
    form = SessionFilterForm(request.GET)
    filters = form.filters()
    window = {"project_id": access.project.pk, "start": time_range.start, "end": time_range.end}
    page = selectors.session_list(**window, **filters)
    return render_page(
        request, access, "dashboard/sessions.html", active="sessions", time_range=time_range,
        range_form=range_form, form=form, filters=filters, page=page, sorts=SESSION_SORTS,
        # Only the first page of the newest sessions changes as sessions arrive: it refreshes itself.
        live=filters["sort"] == "time" and filters["after"] is None and time_range.end >= timezone.now(),
        facets=selectors.session_facets(**window), page_size=selectors.PAGE_SIZE,
        next_after=cursor_format(*page.next_after) if page.next_after else None,
    )


@project_view()
def session_list_csv(request: HttpRequest, access: ProjectAccess) -> HttpResponse:
    time_range, _ = range_from(request)
    filters = SessionFilterForm(request.GET).filters()
    filters.pop("after")
    rows = selectors.session_export(project_id=access.project.pk, start=time_range.start, end=time_range.end,
                                    **filters)
    return csv_response(csv_name(access, "sessions", time_range), LIST_COLUMNS,
                        csv_rows(rows, LIST_COLUMNS))
