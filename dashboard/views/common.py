"""What every dashboard page shares: the time range, the frame's context, CSV responses."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone

from dashboard import selectors
from dashboard.forms import RANGE_KEYS, TimeRange, TimeRangeForm, time_range_parse
from dashboard.permissions import ProjectAccess

# Query parameters that belong to one page of results and must not survive a new range or filter.
PAGE_KEYS = ("after",)


def range_from(request: HttpRequest) -> tuple[TimeRange, TimeRangeForm]:
    return time_range_parse(request.GET, now=timezone.now())


def render_page(request: HttpRequest, access: ProjectAccess, template: str, *, active: str,
                time_range: TimeRange, range_form: TimeRangeForm, status: int = 200,
                **context: Any) -> HttpResponse:
    """Render a project page inside the frame (switcher, nav, range picker)."""
    keep = [(key, value) for key, values in request.GET.lists() if key not in (*RANGE_KEYS, *PAGE_KEYS)
            for value in values]
    frame = {
        "access": access, "project": access.project, "active": active,
        "projects": selectors.projects_for_user(user=request.user),
        "range": time_range, "range_form": range_form, "keep_params": keep,
    }
    return render(request, template, {**frame, **context}, status=status)


# A spreadsheet reads a cell starting with one of these as a formula (OWASP "CSV injection"):
# `=HYPERLINK(...)` in a tool name would run when an operator opens the export.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Any) -> Any:
    """A value as a CSV cell. Numbers are written as numbers, negative ones too: they are
    toolscope's own and a spreadsheet reads "-3" as minus three. Text (names, ids, labels: the
    agents' own strings) that starts like a formula is prefixed with an apostrophe, as OWASP
    recommends, even when it looks like a number: only numbers are numbers."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def _lines(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> Iterable[str]:
    class _Echo:
        def write(self, value: str) -> str:
            return value

    writer = csv.writer(_Echo())
    yield writer.writerow(header)
    for row in rows:
        yield writer.writerow([_cell(value) for value in row])


def csv_response(filename: str, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> HttpResponse:
    """A CSV download, streamed: exports of many rows never sit in memory whole."""
    response = StreamingHttpResponse(_lines(header, rows), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def csv_rows(rows: Iterable[dict[str, Any]], columns: Sequence[str]) -> Iterable[list[Any]]:
    return ([row.get(column) for column in columns] for row in rows)


def csv_name(access: ProjectAccess, what: str, time_range: TimeRange | None = None) -> str:
    suffix = f"_{time_range.slug}" if time_range else ""
    return f"{access.project.slug}_{what}{suffix}.csv".replace("/", "-").replace('"', "")
