"""Simulation pages: replay the draft or a published version on recorded sessions, watch it run
(a progress bar polling the status JSON), and read what it would have saved and broken.

Members read simulations and recommendations; editors start them (a POST: reading a page never
starts background work) and cancel simulations. The work runs in a worker
(toolscope/policies/services/simulation_runs.py); these views parse, call, render.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django import forms
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from dashboard import charts
from dashboard.permissions import ProjectAccess, project_view
from dashboard.views.common import csv_name, csv_response, range_from, render_page
from dashboard.views.policy import confirm_page
from toolscope.policies.models import (
    BackgroundRun,
    Policy,
    Recommendation,
    Simulation,
    SimulationStatus,
    SimulationTurns,
)
from toolscope.policies.services.background import background_queue_position
from toolscope.policies.services.drafts import draft_change_preview
from toolscope.policies.services.recommendations import (
    policy_draft_apply,
    recommendation_candidate,
    recommendation_candidates,
    recommendation_start,
)
from toolscope.policies.services.simulation_runs import (
    DocumentNotFound,
    SessionSelection,
    simulation_cancel,
    simulation_document,
    simulation_start,
)
from toolscope.telemetry.models import Role

RECENT = 20
TOOL_COLUMNS = ("tool", "calls", "hard", "recoverable", "output_tokens_saved")
SESSION_COLUMNS = ("session", "turns", "calls", "misses", "advertised_tokens", "sent_tokens")
TURN_COLUMNS = ("session", "turn", "calls", "misses", "advertised_tokens", "sent_tokens", "sent_tools")


class RecommendationForm(forms.Form):
    prefix = "recommend"  # beside SimulationForm on one page: distinct names and ids
    days = forms.TypedChoiceField(choices=[(7, "7 days"), (14, "14 days"), (30, "30 days")], coerce=int, initial=14,
                                  label="Learn from the sessions of the last")
    limit = forms.IntegerField(min_value=20, max_value=5000, initial=2000, label="At most (sessions)")


class SimulationForm(forms.Form):
    policy = forms.ChoiceField(choices=[("draft", "The draft"), ("production", "The production version")])
    days = forms.TypedChoiceField(choices=[(7, "7 days"), (14, "14 days"), (30, "30 days")], coerce=int,
                                  initial=14, label="Recorded sessions of the last")
    limit = forms.IntegerField(min_value=1, max_value=100_000, initial=5000, label="At most (sessions)")


def _page(request: HttpRequest, access: ProjectAccess, template: str, **context: Any) -> HttpResponse:
    time_range, range_form = range_from(request)
    return render_page(request, access, template, active="policy", time_range=time_range, range_form=range_form,
                       **context)


def _get(access: ProjectAccess, simulation_id: int) -> Simulation:
    simulation = Simulation.objects.filter(project=access.project, pk=simulation_id).first()
    if simulation is None:
        raise Http404("No such simulation in this project.")
    return simulation


@project_view()
@require_http_methods(["GET", "POST"])
def policy_simulations(request: HttpRequest, access: ProjectAccess) -> HttpResponse:
    form = SimulationForm(request.POST or None)
    error = ""
    if request.method == "POST":
        if not access.can_edit:
            return HttpResponse("Editors start simulations.", status=403)
        if form.is_valid():
            choice = form.cleaned_data["policy"]
            try:
                document, source = simulation_document(project=access.project, draft=choice == "draft",
                                                       label=None if choice == "draft" else choice)
            except DocumentNotFound as exc:
                error = str(exc)
            else:
                end = timezone.now().replace(second=0, microsecond=0)
                selection = SessionSelection(start=end - timedelta(days=form.cleaned_data["days"]), end=end,
                                             limit=form.cleaned_data["limit"])
                simulation, _ = simulation_start(project=access.project, document=document, source=source,
                                                 selection=selection, user=request.user)
                return redirect(reverse("dashboard:policy_simulation", args=[access.project.slug, simulation.pk]))
    recent = Simulation.objects.filter(project=access.project).order_by("-created_at").defer("document", "result")
    return _page(request, access, "dashboard/policy_simulations.html", form=form, error=error,
                 simulations=list(recent[:RECENT]), **_recommendations(request, access))


def _recommendations(request: HttpRequest, access: ProjectAccess) -> dict[str, Any]:
    """The recommendation section: its form (editors start a run with a POST, see
    policy_recommendation_start), and the run asked for (?recommendation=<id>, else the project's
    latest). Reading the page never starts anything."""
    runs = Recommendation.objects.filter(project=access.project).select_related("created_by")
    pk = request.GET.get("recommendation", "")
    return _recommendation(runs.filter(pk=pk).first() if pk.isdigit() else runs.order_by("-created_at", "-pk").first())


def _recommendation(run: Recommendation | None) -> dict[str, Any]:
    """A run for the recommendation card (_recommendation.html): waiting for its turn, computing
    the candidates (a progress bar), failed, or its candidates; the form set to its window."""
    form = RecommendationForm(initial={"days": run.days, "limit": run.limit} if run is not None else None)
    if run is None:
        return {"recommend_form": form, "recommendation": None}
    context: dict[str, Any] = {"recommend_form": form, "recommendation": run,
                               "recommendation_queued_behind": background_queue_position(run)}
    if run.status == SimulationStatus.DONE:
        found = {**run.result, "candidates": recommendation_candidates(run)}
        front = [row for row in found["candidates"] if row["name"] in found["front"]]
        chart = charts.recommendation_curve(found["candidates"], found["front"], found["recommended"])
        recommended = [row for row in found["candidates"] if row["name"] == found["recommended"]]
        context.update(recommendations=found, front=front, curve=charts.chart_json(chart) if front else None,
                       comparison=recommended + found.get("baselines", []) if recommended else [])
    return context


@project_view()
@require_safe
def policy_recommendation(request: HttpRequest, access: ProjectAccess, recommendation_id: int) -> HttpResponse:
    """One recommendation's page, where starting it leads and the Runs page opens it."""
    run = (Recommendation.objects.filter(project=access.project, pk=recommendation_id)
           .select_related("created_by").first())
    if run is None:
        raise Http404("No such recommendation in this project.")
    return _page(request, access, "dashboard/policy_recommendation.html", on_run_page=True, **_recommendation(run))


@project_view(min_role=Role.EDITOR)
@require_POST
def policy_recommendation_start(request: HttpRequest, access: ProjectAccess) -> HttpResponse:
    """Queue the recommendation for the form's window (or reopen the one made), then show its page
    at once: it runs in the background in every configuration (services/background.py). `retry`
    starts a failed one afresh."""
    form = RecommendationForm(request.POST)
    if not form.is_valid():
        return HttpResponse("Choose a number of days and at most 5,000 sessions.", status=400)
    run, _ = recommendation_start(project=access.project, days=form.cleaned_data["days"],
                                  limit=form.cleaned_data["limit"], user=request.user,
                                  retry="recommend-retry" in request.POST)
    return redirect(reverse("dashboard:policy_recommendation", args=[access.project.slug, run.pk]))


@project_view(min_role=Role.EDITOR)
@require_http_methods(["GET", "POST"])
def policy_recommendation_apply(request: HttpRequest, access: ProjectAccess) -> HttpResponse:
    """GET: what applying the candidate would change in the draft, to confirm; POST: apply it.
    The draft's output rules are kept unless `outputs` asks for the candidate's."""
    data = request.POST if request.method == "POST" else request.GET
    pk = data.get("recommendation", "")
    run = (Recommendation.objects.filter(project=access.project, pk=pk, status=SimulationStatus.DONE).first()
           if pk.isdigit() else None)
    policy = Policy.objects.filter(project=access.project).first()
    if run is None or policy is None:
        return HttpResponse("No such finished recommendation in this project.", status=400)
    chosen = recommendation_candidate(run, data.get("name", ""))
    if chosen is None:
        return HttpResponse("That candidate is not among the recommendations.", status=400)
    replace_outputs = data.get("outputs") == "1"

    def apply(draft: Policy) -> object:
        return policy_draft_apply(policy=draft, selection=chosen["selection"], outputs=chosen["outputs"],
                                  user=request.user, replace_outputs=replace_outputs)

    if request.method == "GET":
        compaction = len(chosen["outputs"].get("compaction", []))
        return confirm_page(
            request, access, tab="simulate", title="Apply a recommendation to the draft",
            intro=f"“{chosen['name']}” decides the draft's mode, always-on tools, context rules and the groups "
                  "they use. The draft's other groups, its per-tool settings and, unless you ask, its output "
                  "rules are kept. Nothing is published.",
            options=[{"name": "outputs", "checked": replace_outputs,
                      "label": f"Also replace the draft's output rules with the candidate's ({compaction} "
                               f"compaction rule{'s' if compaction != 1 else ''}, duplicates)"}],
            changes=draft_change_preview(policy=policy, change=apply),
            changes_title="What changes in the draft:",
            empty_text="The draft already is this candidate: nothing changes.",
            hidden={"recommendation": run.pk, "name": chosen["name"]},
            notes=["You can undo it from the draft page afterwards."],
            action=reverse("dashboard:policy_recommendation_apply", args=[access.project.slug]),
            button="Apply to the draft",
            cancel=reverse("dashboard:policy_recommendation", args=[access.project.slug, run.pk]))
    entry = apply(policy)
    change = f": {entry.summary}" if entry else " (it already was the draft)"
    messages.success(request, f"Applied “{chosen['name']}” to the draft{change}. Publish it when ready, "
                              "or undo it below.")
    return redirect(reverse("dashboard:policy", args=[access.project.slug]))


@project_view()
@require_safe
def policy_recommendation_status(request: HttpRequest, access: ProjectAccess, recommendation_id: int,
                                 ) -> JsonResponse:
    run = Recommendation.objects.filter(project=access.project, pk=recommendation_id).first()
    if run is None:
        raise Http404("No such recommendation in this project.")
    return JsonResponse(_status(run))


def _status(run: BackgroundRun) -> dict[str, Any]:
    done, total = run.done_total
    return {"status": run.status, "progress": run.progress, "done": done, "total": total,
            "eta_seconds": run.eta_seconds, "queued_behind": background_queue_position(run)}


@project_view()
@require_safe
def policy_simulation(request: HttpRequest, access: ProjectAccess, simulation_id: int) -> HttpResponse:
    simulation = _get(access, simulation_id)
    result = simulation.result or {}
    rows = ({"name": name, "misses": row["hard"] + row["recoverable"], **row}
            for name, row in (result.get("tools") or {}).items())
    tools = sorted(rows, key=lambda row: (-row["misses"], row["name"]))
    missed = [row for row in tools if row["misses"]][:20]
    figures = {}
    if result.get("days"):
        figures["days"] = charts.chart_json(charts.simulation_days(result["days"]))
    if missed:
        figures["misses"] = charts.chart_json(charts.tool_ranking(missed, key="misses", title="Misses per tool",
                                                                   color=charts.COLORS["errors"]))
    worst = sorted((row for row in result.get("session_rows") or [] if row["misses"]),
                   key=lambda row: (-row["misses"], row["session"]))[:20]
    return _page(request, access, "dashboard/policy_simulation.html", simulation=simulation, result=result,
                 tools=tools, charts=figures, worst_sessions=worst,
                 queued_behind=background_queue_position(simulation))


@project_view()
@require_safe
def policy_simulation_status(request: HttpRequest, access: ProjectAccess, simulation_id: int) -> JsonResponse:
    simulation = _get(access, simulation_id)
    return JsonResponse({**_status(simulation), "sessions_done": simulation.sessions_done,
                         "sessions_total": simulation.sessions_total})


@project_view(min_role=Role.EDITOR)
@require_POST
def policy_simulation_cancel(request: HttpRequest, access: ProjectAccess, simulation_id: int) -> HttpResponse:
    simulation_cancel(simulation=_get(access, simulation_id))
    return redirect(reverse("dashboard:policy_simulation", args=[access.project.slug, simulation_id]))


@project_view()
@require_safe
def policy_simulation_csv(request: HttpRequest, access: ProjectAccess, simulation_id: int) -> HttpResponse:
    result = _get(access, simulation_id).result or {}
    rows = ([name, row["calls"], row["hard"], row["recoverable"], row.get("output_tokens_saved", 0)]
            for name, row in (result.get("tools") or {}).items())
    return csv_response(csv_name(access, f"simulation-{simulation_id}-tools"), TOOL_COLUMNS, rows)


@project_view()
@require_safe
def policy_simulation_sessions_csv(request: HttpRequest, access: ProjectAccess, simulation_id: int) -> HttpResponse:
    result = _get(access, simulation_id).result or {}
    rows = ([row[column] for column in SESSION_COLUMNS] for row in result.get("session_rows") or [])
    return csv_response(csv_name(access, f"simulation-{simulation_id}-sessions"), SESSION_COLUMNS, rows)


@project_view()
@require_safe
def policy_simulation_turns_csv(request: HttpRequest, access: ProjectAccess, simulation_id: int) -> HttpResponse:
    """Every replayed turn (the first MAX_TURN_ROWS), or with ?misses=1 those with a miss."""
    table = SimulationTurns.objects.filter(simulation=_get(access, simulation_id)).first()
    sessions, rows = (table.sessions, table.rows) if table is not None else ([], [])
    only_misses = request.GET.get("misses") == "1"
    lines = ([sessions[index], *figures] for index, *figures in rows if not only_misses or figures[2])
    what = "turns-with-misses" if only_misses else "turns"
    return csv_response(csv_name(access, f"simulation-{simulation_id}-{what}"), TURN_COLUMNS, lines)
