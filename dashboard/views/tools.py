"""The tools table and a tool's own page."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from dashboard import charts, selectors
from dashboard.forms import TOOL_SHOW, TOOL_SORTS, TimeRange, ToolTableForm
from dashboard.forms_policy import ToolSettingsForm
from dashboard.permissions import ProjectAccess, project_view
from dashboard.selectors.tools import tool_definitions
from dashboard.views.common import csv_name, csv_response, csv_rows, range_from, render_page
from toolscope.policies.models import Tool
from toolscope.policies.services.drafts import tool_settings_update
from toolscope.telemetry.models import Role

TABLE_COLUMNS = ("name", "in_catalog", "source", "calls", "errors", "error_rate", "unflagged_errors", "p50_ms",
                 "p95_ms", "mean_output_tokens", "catalog_schema_tokens", "schema_tokens", "duplicates",
                 "duplicate_rate", "duplicate_tokens", "times_advertised", "times_called", "schema_usd", "output_usd",
                 "last_used", "definitions")
SERIES_COLUMNS = ("bucket", "calls", "errors", "output_tokens", "duplicates")
SAMPLE_COLUMNS = ("started_at", "status", "duration_ms", "output_tokens")


Rows = list[dict[str, Any]]


def _table(request: HttpRequest, access: ProjectAccess, time_range: TimeRange) -> tuple[Rows, dict[str, str]]:
    options = ToolTableForm(request.GET).options()
    rows = selectors.tool_table(project_id=access.project.pk, start=time_range.start, end=time_range.end)
    return selectors.tool_table_arrange(rows, **options), options


@project_view()
def tool_list(request: HttpRequest, access: ProjectAccess) -> HttpResponse:
    time_range, range_form = range_from(request)
    rows, options = _table(request, access, time_range)
    columns = [(key, label, key == options["sort"]) for key, label in TOOL_SORTS]
    return render_page(
        request, access, "dashboard/tools.html", active="tools", time_range=time_range, range_form=range_form,
        rows=rows, options=options, columns=columns, show_choices=TOOL_SHOW,
        next_dir="asc" if options["dir"] == "desc" else "desc",
    )


@project_view()
def tool_list_csv(request: HttpRequest, access: ProjectAccess) -> HttpResponse:
    time_range, _ = range_from(request)
    rows, _ = _table(request, access, time_range)
    return csv_response(csv_name(access, "tools", time_range), TABLE_COLUMNS, csv_rows(rows, TABLE_COLUMNS))


def _definitions_or_404(access: ProjectAccess, name: str) -> list[Tool]:
    definitions = tool_definitions(project_id=access.project.pk, name=name)
    if not definitions and not selectors.tool_seen(project_id=access.project.pk, name=name):
        raise Http404("No such tool.")
    return definitions


def _tool_or_404(access: ProjectAccess, name: str) -> Tool | None:
    definitions = _definitions_or_404(access, name)
    return definitions[0] if definitions else None


def _definition_shown(definitions: list[Tool], source: str | None) -> Tool | None:
    """The definition of ?source=, else the most recently seen (the one resolve falls back to)."""
    chosen = next((tool for tool in definitions if tool.source == source), None)
    return chosen or (definitions[0] if definitions else None)


@project_view()
def tool_detail(request: HttpRequest, access: ProjectAccess, name: str) -> HttpResponse:
    time_range, range_form = range_from(request)
    definitions = _definitions_or_404(access, name)
    tool = _definition_shown(definitions, request.GET.get("source"))
    window = {"project_id": access.project.pk, "name": name, "start": time_range.start, "end": time_range.end}
    series = selectors.tool_series(**window, bucket=time_range.bucket)
    sample = selectors.tool_call_sample(**window)
    totals = {key: sum(row[key] for row in series) for key in SERIES_COLUMNS[1:]}
    return render_page(
        request, access, "dashboard/tool.html", active="tools", time_range=time_range, range_form=range_form,
        name=name, tool=tool, definitions=definitions, series=series, sample_size=len(sample),
        sample_limit=selectors.SAMPLE_SIZE,
        totals=totals, charts=_tool_charts(series, sample, bucket=time_range.bucket, called=totals["calls"] > 0),
        log_spread=charts.LOG_SPREAD,
        errors=selectors.tool_errors(**window),
        versions=selectors.tool_versions(tool_id=tool.pk) if tool else [],
        search=selectors.tool_search_texts(project_id=access.project.pk, name=name),
        settings_form=ToolSettingsForm(instance=tool) if tool else None,
    )


@project_view(min_role=Role.EDITOR)
@require_POST
def tool_settings(request: HttpRequest, access: ProjectAccess, name: str) -> HttpResponse:
    """Save the tool's per-tool settings (every source's definition of the name): a draft change,
    audited and undoable on the draft page."""
    tool = _tool_or_404(access, name)
    if tool is None:
        raise Http404("The tool is not in the catalog: it has no settings.")
    form = ToolSettingsForm(request.POST, instance=tool)
    if not form.is_valid():
        messages.error(request, "Not saved: " + "; ".join(
            f"{form[field].label}: {' '.join(errors)}" for field, errors in form.errors.items()))
        return redirect(reverse("dashboard:tool", args=[access.project.slug, name]) + "#settings")
    entry = tool_settings_update(tool=tool, values=form.cleaned_data, user=request.user)
    messages.success(request, f"Saved. {entry.summary}" if entry else "Saved: nothing changed.")
    return redirect(reverse("dashboard:tool", args=[access.project.slug, name]) + "#settings")


def _tool_charts(series: Rows, sample: Rows, *, bucket: str, called: bool) -> dict[str, str]:
    """The tool page's figures as JSON; none for a chart with nothing to draw (the page says so
    instead of showing empty axes)."""
    durations = [row["duration_ms"] for row in sample if row["duration_ms"] is not None]
    outputs = [row["output_tokens"] for row in sample if row["output_tokens"] is not None]
    figures = {}
    if called:
        figures["calls"] = charts.tool_calls(series, bucket=bucket)
    if durations:
        figures["durations"] = charts.histogram(durations, title="Duration", unit="ms")
    if outputs:
        figures["outputs"] = charts.histogram(outputs, title="Output size", unit="tokens",
                                              color=charts.COLORS["tool_output_tokens"])
    return {key: charts.chart_json(figure) for key, figure in figures.items()}


@project_view()
def tool_calls_csv(request: HttpRequest, access: ProjectAccess, name: str) -> HttpResponse:
    time_range, _ = range_from(request)
    _tool_or_404(access, name)
    series = selectors.tool_series(project_id=access.project.pk, name=name, start=time_range.start,
                                   end=time_range.end, bucket=time_range.bucket)
    return csv_response(csv_name(access, f"{name}-calls", time_range), SERIES_COLUMNS, csv_rows(series, SERIES_COLUMNS))


@project_view()
def tool_sample_csv(request: HttpRequest, access: ProjectAccess, name: str) -> HttpResponse:
    """The sample behind the duration and output-size histograms."""
    time_range, _ = range_from(request)
    _tool_or_404(access, name)
    sample = selectors.tool_call_sample(project_id=access.project.pk, name=name, start=time_range.start,
                                        end=time_range.end)
    return csv_response(csv_name(access, f"{name}-sample", time_range), SAMPLE_COLUMNS,
                        csv_rows(sample, SAMPLE_COLUMNS))
