"""A session's own page, its CSVs and its calls' whole outputs."""

from __future__ import annotations

from collections import Counter

from django.http import Http404, HttpRequest, HttpResponse

from dashboard import charts, selectors
from dashboard.permissions import ProjectAccess, project_view
from dashboard.selectors.sessions import call_previews
from dashboard.selectors.sessions import session_call_text as call_text
from dashboard.views.common import csv_name, csv_response, csv_rows, range_from, render_page
from toolscope.telemetry.models import Session

TURN_COLUMNS = ("index", "started_at", "model", *(key for key, _ in selectors.COMPONENTS), "estimated_input_tokens",
                "input_tokens", selectors.UNATTRIBUTED[0], "output_tokens", "cached_tokens", "window_share",
                "near_window", "cache_write_tokens", "cache_write_1h_tokens", *selectors.COST_COLUMNS)
CALL_COLUMNS = ("turn_index", "offset_s", "started_at", "tool_name", "status", "duration_ms", "output_tokens",
                "duplicate_of_id", "duplicate_tokens", "artifact__tokens_before", "artifact__tokens_after", "error",
                "time_known", "error_rule", "error_text_unflagged")


def _session_or_404(access: ProjectAccess, client_id: str) -> Session:
    session = selectors.session_get(project_id=access.project.pk, client_id=client_id)
    if session is None:
        raise Http404("No such session.")
    return session


# Turns and calls on one page of a session (the read API's default is larger: it has no charts).
SESSION_PAGE_SIZE = 200
# Characters of an output (an error, a compacted output's texts) the page shows; a link opens the
# whole text. 200 calls of 24 KB logs made pages of megabytes; 200 previews stay under 1 MB.
PREVIEW_CHARS = 2_000
OPEN_TURNS = 3


def _start_turn(raw: str | None) -> int | None:
    """`?turn=N`: the page starts at turn N (a link to a call on another page); anything else: None."""
    return int(raw) if raw and raw.isdigit() and len(raw) <= 9 else None


@project_view()
def session_detail(request: HttpRequest, access: ProjectAccess, client_id: str) -> HttpResponse:
    time_range, range_form = range_from(request)
    session = _session_or_404(access, client_id)
    after = selectors.position_parse(request.GET.get("after", ""))
    start_turn = None if after is not None else _start_turn(request.GET.get("turn"))
    page = selectors.session_detail_page(session=session, after=after, start_turn=start_turn,
                                         limit=SESSION_PAGE_SIZE)
    turns, calls = page.turns, page.calls
    cost = selectors.session_cost(session=session, turns=turns)  # before the transcript copies the turns
    transcript = selectors.session_transcript(turns=turns, calls=call_previews(calls=calls, chars=PREVIEW_CHARS),
                                              started_at=session.started_at)
    # Repeats whose first occurrence is on another page link to that page (it starts at its turn).
    elsewhere = {pk: row["turn_index"] for pk, row in selectors.calls_elsewhere(session=session, calls=calls).items()}
    figures = {
        "budget": charts.session_budget(turns, components=selectors.COMPONENTS,
                                        context_window=access.project.context_window),
        "timeline": charts.session_timeline(calls),
    }
    first_page = after is None and not start_turn
    # The first turns of the page open; the rest show their summary line, a click away.
    open_turns = {turn["index"] for turn in transcript[:OPEN_TURNS]}
    paging = {
        "whole": first_page and page.next_after is None,  # the whole session is on this page
        "first": first_page,
        "next": selectors.position_format(page.next_after) if page.next_after else None,
        "turns": len(turns), "calls": len(calls), "size": SESSION_PAGE_SIZE,
        "from_turn": min([t["index"] for t in turns] + [c["turn_index"] for c in calls], default=None),
        "to_turn": max([t["index"] for t in turns] + [c["turn_index"] for c in calls], default=None),
    }
    return render_page(
        request, access, "dashboard/session.html", active="sessions", time_range=time_range,
        range_form=range_form, session=session, turns=turns, calls=calls, transcript=transcript,
        artifacts=[call for call in calls if call["artifact_id"]],
        call_turns={**elsewhere, **{call["id"]: call["turn_index"] for call in calls}}, elsewhere=elsewhere,
        unflagged=sum(call["error_text_unflagged"] for call in calls), paging=paging,
        inferred=(inferred := Counter(turn["tools_from"] for turn in turns if turn["tools_from"])),
        inferred_turns=inferred.total(),
        charts={key: charts.chart_json(figure) for key, figure in figures.items()}, cost=cost,
        open_turns=open_turns, shadow=selectors.shadow_summary(turns=turns, calls=calls),
    )


@project_view()
def session_call_text(request: HttpRequest, access: ProjectAccess, client_id: str, call_id: int) -> HttpResponse:
    """One call's whole output as plain text (`?original=1`: the original its artifact kept)."""
    session = _session_or_404(access, client_id)
    call = call_text(session=session, call_id=call_id)
    if call is None:
        raise Http404("No such call in this session.")
    text = call["artifact__original"] if request.GET.get("original") else call["output"]
    if text is None:
        raise Http404("This call's output was not compacted.")
    return HttpResponse(text, content_type="text/plain; charset=utf-8")


@project_view()
def session_turns_csv(request: HttpRequest, access: ProjectAccess, client_id: str) -> HttpResponse:
    session = _session_or_404(access, client_id)
    turns = selectors.session_turns(session=session)
    selectors.session_cost(session=session, turns=turns, whole=True)
    return csv_response(csv_name(access, f"session-{client_id}-turns"), TURN_COLUMNS, csv_rows(turns, TURN_COLUMNS))


# What the calls' CSV reads: its columns (offset_s is computed) and what computing it needs; not
# the outputs, which a long session holds megabytes of.
CSV_CALL_READS = (*(c for c in CALL_COLUMNS if c != "offset_s"), "id", "time_known")


@project_view()
def session_calls_csv(request: HttpRequest, access: ProjectAccess, client_id: str) -> HttpResponse:
    session = _session_or_404(access, client_id)
    calls = selectors.session_calls(session=session, columns=tuple(dict.fromkeys(CSV_CALL_READS)))
    selectors.session_transcript(turns=[], calls=calls, started_at=session.started_at)  # sets offset_s
    return csv_response(csv_name(access, f"session-{client_id}-calls"), CALL_COLUMNS, csv_rows(calls, CALL_COLUMNS))
