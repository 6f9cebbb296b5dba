"""The overview: KPIs, tokens by component, top tools and dead weight."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse

from dashboard import charts, selectors
from dashboard.forms import SliceForm, TimeRange
from dashboard.permissions import ProjectAccess, project_view
from dashboard.views.common import csv_name, csv_response, csv_rows, range_from, render_page

TOKEN_COLUMNS = ("bucket", *(key for key, _ in selectors.COMPONENTS), "estimated_input_tokens",
                 "provider_input_tokens", selectors.UNATTRIBUTED[0])
USAGE_COLUMNS = ("name", "calls", "errors", "schema_tokens", "times_advertised", "times_called")
TOP = 10
# One unit per column: counts and dollars change by a ratio (0.25 is +25%), shares (ratios 0 to 1) by
# percentage points (1.5 is +1.5 pp); the column that does not apply to a row is empty.
KPI_COLUMNS = ("key", "label", "unit", "current", "previous", "change_ratio", "change_points")
KPI_UNITS = {"count": "count", "share": "ratio", "usd": "usd"}


def _window(request: HttpRequest, access: ProjectAccess) -> tuple[TimeRange, dict[str, Any], SliceForm]:
    """The range, the selectors' keywords for it and the slice filter (agent, model), and the filter."""
    time_range, _ = range_from(request)
    form = SliceForm(request.GET)
    window = {"project_id": access.project.pk, "start": time_range.start, "end": time_range.end,
              "where": form.where()}
    return time_range, window, form


@project_view()
def overview(request: HttpRequest, access: ProjectAccess) -> HttpResponse:
    time_range, range_form = range_from(request)
    _, window, slice_form = _window(request, access)
    kpis = selectors.overview_kpis(**window)
    series = selectors.token_series(**window, bucket=time_range.bucket)
    usage = selectors.tool_usage(**window)
    by_calls = selectors.top_by(usage, "calls", limit=TOP)
    by_schema = selectors.top_by(usage, "schema_tokens", limit=TOP)
    dead = selectors.dead_weight(usage)
    figures = {
        "tokens": charts.tokens_by_component(series, components=selectors.COMPONENTS, bucket=time_range.bucket),
        "by_calls": charts.tool_ranking(by_calls, key="calls", title=f"Top {TOP} tools by calls"),
        "by_schema": charts.tool_ranking(by_schema, key="schema_tokens", title=f"Top {TOP} tools by schema tokens",
                                         color=charts.COLORS["schema_tokens"]),
    }
    return render_page(
        request, access, "dashboard/overview.html", active="overview", time_range=time_range,
        range_form=range_form, kpis=kpis, kpi_columns=kpi_columns(len(kpis)), series=series, by_calls=by_calls,
        by_schema=by_schema,
        dead=dead[:TOP * 2], dead_count=len(dead), dead_tokens=sum(row["schema_tokens"] for row in dead),
        charts={name: charts.chart_json(figure) for name, figure in figures.items()},
        slice_form=slice_form, sliced=window["where"], csv_query=_csv_query(time_range, slice_form),
        choices=_choices(access, time_range, window["where"]),
    )


def _choices(access: ProjectAccess, time_range: TimeRange, where: dict[str, str]) -> dict[str, list[str]]:
    """The range's agents and models, and the one picked even when the range has none of it."""
    choices = selectors.slice_choices(project_id=access.project.pk, start=time_range.start, end=time_range.end)
    for key, column in (("agents", "agent_name"), ("models", "model")):
        if where.get(column) and where[column] not in choices[key]:
            choices[key] = sorted([*choices[key], where[column]])
    return choices


def _csv_query(time_range: TimeRange, slice_form: SliceForm) -> str:
    """The range and the filter as a query string, for the page's CSV links."""
    return "&".join(part for part in (time_range.query, slice_form.query()) if part)


def kpi_columns(count: int) -> dict[str, int]:
    """Columns of the KPI grid, wide (at most 8) and medium (at most 5): the most that leave the
    last row at least half full, so no card is left alone on a row (13 cards: 8 + 5, 5 + 5 + 3)."""
    def most(limit: int) -> int:
        return next(c for c in range(min(limit, count) or 1, 0, -1) if count % c == 0 or 2 * (count % c) >= c)

    return {"wide": most(8), "medium": most(5)}


@project_view()
def kpis_csv(request: HttpRequest, access: ProjectAccess) -> HttpResponse:
    time_range, window, _ = _window(request, access)
    kpis = selectors.overview_kpis(**window)
    rows = ([kpi.key, kpi.label, KPI_UNITS[kpi.kind], kpi.current, kpi.previous, kpi.change_ratio, kpi.change_points]
            for kpi in kpis)
    return csv_response(csv_name(access, "kpis", time_range), KPI_COLUMNS, rows)


@project_view()
def tokens_csv(request: HttpRequest, access: ProjectAccess) -> HttpResponse:
    time_range, window, _ = _window(request, access)
    series = selectors.token_series(**window, bucket=time_range.bucket)
    return csv_response(csv_name(access, "tokens", time_range), TOKEN_COLUMNS, csv_rows(series, TOKEN_COLUMNS))


@project_view()
def dead_weight_csv(request: HttpRequest, access: ProjectAccess) -> HttpResponse:
    time_range, window, _ = _window(request, access)
    usage = selectors.tool_usage(**window)
    return csv_response(csv_name(access, "dead-weight", time_range), USAGE_COLUMNS,
                        csv_rows(selectors.dead_weight(usage), USAGE_COLUMNS))


@project_view()
def top_tools_csv(request: HttpRequest, access: ProjectAccess) -> HttpResponse:
    """Per-tool usage behind both top-tools charts (every tool, by calls)."""
    time_range, window, _ = _window(request, access)
    usage = selectors.tool_usage(**window)
    rows = sorted(usage, key=lambda row: (-row["calls"], row["name"]))
    return csv_response(csv_name(access, "tool-usage", time_range), USAGE_COLUMNS, csv_rows(rows, USAGE_COLUMNS))
