"""The read API (scope `read`): what the dashboard shows, as JSON.

- GET /api/v1/sessions: the sessions of a range, filtered as on the Sessions page, newest first,
  in pages (`next_cursor`: keyset pagination, page 100 costs page 1).
- GET /api/v1/sessions/{client_id}: one session with its turns (their context budget) and calls
  (status, tokens, the call it duplicates, its compaction artifact), in pages of turns and calls
  together in session order (`next_cursor`; a page of a 40,000-call session costs a short one's).
- GET /api/v1/tools/stats: every tool's usage over a range beside its catalog figures.
- GET /api/v1/overview: the range's KPIs beside the previous period of the same length.
- GET /api/v1/batches/{id}: an ingest batch's status and each of its events' outcome.

Tenancy as everywhere: a key reads its own project only; another project's session or batch is a
404, never a 403 that would confirm it exists.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.validators import RegexValidator
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.ranges import EPOCH, time_range
from api.views.resolve import READ_ERRORS
from dashboard import selectors
from toolscope.telemetry.selectors import batch_outcome


class _GivenMeansValidated:
    """A query parameter that, when present, is validated even when empty: `start=` is a 400,
    not the default (DRF reads an empty optional query value as absent)."""

    field_name: str

    def get_value(self, dictionary: Any) -> Any:
        if dictionary.get(self.field_name) == "":
            return ""
        return super().get_value(dictionary)  # type: ignore[misc]


class StrictDateTimeField(_GivenMeansValidated, serializers.DateTimeField):
    pass


class StrictChoiceField(_GivenMeansValidated, serializers.ChoiceField):
    pass


class StrictBooleanField(_GivenMeansValidated, serializers.BooleanField):
    pass


CURSOR = r"^[0-9]{1,20}_[0-9]{1,20}$"
MAX_ID = 2**63 - 1


class RangeQuery(serializers.Serializer):
    start = StrictDateTimeField(required=False, help_text="ISO 8601; default: 24 hours before `end`.")
    end = StrictDateTimeField(required=False, help_text="ISO 8601, exclusive; default: now. A range that "
                              "ends before it starts holds nothing.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """Within 1970-3000: no row is outside, and the overview's previous period (as long,
        just before) stays a date Python can hold."""
        start, end = time_range(attrs.get("start"), attrs.get("end"), timedelta(hours=24))
        return {**attrs, "start": start, "end": end}


def _filter_text(**kwargs: Any) -> serializers.CharField:
    """A text filter of a query string: blank for none, no NUL (a pattern the OpenAPI states)."""
    return serializers.CharField(required=False, allow_blank=True, max_length=200,
                                 validators=[RegexValidator(r"\A[^\x00]*\Z", "Null characters are not allowed.")],
                                 **kwargs)


class OverviewQuery(RangeQuery):
    agent = _filter_text(help_text="Only this agent's sessions, turns and calls.")
    model = _filter_text(help_text="Only this model's turns and their calls (a session: its own model).")


class SessionsQuery(RangeQuery):
    agent = _filter_text()
    model = _filter_text()
    errors = StrictChoiceField(required=False, choices=["yes", "no"],
                                     help_text="yes: sessions with a failed call; no: without.")
    near_window = StrictBooleanField(required=False, default=False)
    gateway = StrictBooleanField(required=False, default=False,
                                       help_text="Only sessions recorded through toolscope-mcp, the MCP gateway.")
    proxy = StrictBooleanField(required=False, default=False,
                                     help_text="Only sessions recorded through toolscope-proxy, the model-API proxy.")
    q = _filter_text(help_text="Sessions whose id, metadata (tags included) or a turn's task message holds this "
                               "text, case-insensitively.")
    cursor = serializers.RegexField(CURSOR, required=False, allow_blank=True,
                                    help_text="The previous page's next_cursor (where it ended: the start time "
                                              "in microseconds since the epoch, and the id).")
    limit = serializers.IntegerField(required=False, min_value=1, max_value=500, default=50)

    def validate_cursor(self, value: str) -> tuple[datetime, int] | None:
        """Any cursor of the documented shape is one: past the newest row, it reads from the top."""
        if not value:
            return None
        micros, pk = (int(part) for part in value.split("_"))
        try:
            moment = EPOCH + timedelta(microseconds=micros)
        except OverflowError:
            moment = datetime.max.replace(tzinfo=UTC)
        return moment, min(pk, MAX_ID)


MAX_INT = 2**31 - 1


class SessionDetailQuery(serializers.Serializer):
    cursor = serializers.RegexField(f"^{selectors.POSITION.pattern}$", required=False, allow_blank=True,
                                    help_text="The previous page's next_cursor (where it ended: a turn index, 0 "
                                              "for a turn or 1 for a call of it, that row's start in microseconds "
                                              "since the epoch and its id).")
    turn = serializers.IntegerField(required=False, min_value=0, max_value=MAX_INT,
                                    help_text="Start the page at this turn index (its calls included) instead of "
                                              "the session's start; a `cursor` given too wins.")
    limit = serializers.IntegerField(required=False, min_value=1, max_value=selectors.DETAIL_PAGE_MAX,
                                     default=selectors.DETAIL_PAGE_SIZE,
                                     help_text="Turns and calls on the page, counted together.")

    def validate_cursor(self, value: str) -> selectors.Position | None:
        """Any cursor of the documented shape is one: past the session's end, the page is empty."""
        if not value:
            return None
        position = selectors.position_parse(value)
        if position is None:
            raise serializers.ValidationError("Not a cursor this API gave.")
        return position


def _query(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    serializer = serializer_class(data=request.query_params)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def _range(data: dict[str, Any]) -> dict[str, Any]:
    return {"start": data["start"], "end": data["end"]}


SESSION_EXAMPLE = {"results": [{
    "client_id": "run-42", "agent_name": "coder", "model": "gpt-4o", "started_at": "2026-11-26T09:00:00Z",
    "ended_at": "2026-11-26T09:04:10Z", "turn_count": 12, "tool_call_count": 19, "error_count": 1,
    "duplicate_tokens": 840, "max_window_share": 0.41, "near_window": False, "total_tokens": 182_400,
    "usd": "0.183", "via": None}],
    "next_cursor": "1795683600000000_1841"}


class SessionsView(APIView):
    required_scope = "read"

    @extend_schema(
        summary="List sessions", parameters=[SessionsQuery],
        description="The sessions started in [start, end), newest first, filtered as on the dashboard's "
        "Sessions page. Pass `next_cursor` back as `cursor` for the next page; it is null on the last.",
        responses={200: dict, **READ_ERRORS},
        examples=[OpenApiExample("A page", value=SESSION_EXAMPLE, response_only=True)],
    )
    def get(self, request: Request) -> Response:
        data = _query(SessionsQuery, request)
        page = selectors.session_list(
            project_id=request.auth.project_id, **_range(data), agent=data.get("agent", ""),
            model=data.get("model", ""), has_errors={"yes": True, "no": False}.get(data.get("errors", "")),
            near_window=data["near_window"], gateway=data["gateway"], proxy=data["proxy"],
            q=data.get("q", "").strip(),
            after=data.get("cursor"),
            limit=data["limit"])
        rows = [{**{key: value for key, value in row.items() if key not in ("id", "sort_key", "cost_nanos")},
                 "usd": _money(row["usd"])} for row in page.rows]
        return Response({"results": rows, "next_cursor": _cursor(*page.next_after) if page.next_after else None})


def _cursor(started_at: datetime, pk: int) -> str:
    return f"{(started_at - EPOCH) // timedelta(microseconds=1)}_{pk}"


SESSION_FIELDS = ("client_id", "agent_name", "model", "started_at", "ended_at", "metadata", "turn_count",
                  "tool_call_count", "error_count", "duplicate_tokens", "max_window_share", "near_window")
CALL_FIELDS = ("turn_index", "call_id", "tool_name", "arguments", "output", "status", "error", "error_rule",
               "error_text_unflagged", "duration_ms", "retries", "approval", "started_at", "time_known",
               "output_tokens", "argument_tokens", "duplicate_tokens", "placeholder")


class SessionView(APIView):
    required_scope = "read"

    @extend_schema(
        summary="Read one session",
        parameters=[OpenApiParameter("client_id", str, OpenApiParameter.PATH,
                                     description="The session's id as the agent sent it."), SessionDetailQuery],
        description="The session, its turns with their context budget (schema, system prompt, messages, "
        "calls and outputs, what the provider reported, what no component explains, the window share) and "
        "its tool calls with their status, tokens, the call each repeats (`duplicate_of`, an event id, "
        "wherever that call is) and its compaction artifact (`artifact`: the id `retrieve_tool_output` takes, "
        "tokens before and after). In pages: turns and calls together, in session order (each turn "
        f"followed by its calls), at most `limit` of them (default {selectors.DETAIL_PAGE_SIZE:,}, up to "
        f"{selectors.DETAIL_PAGE_MAX:,}); pass `next_cursor` back as `cursor` for the next page, null on the "
        "last. `totals` counts the whole session's turns and calls. A turn's `tools_from` is blank when it sent its "
        "tools, else where its advertised set was inferred from (`agent`, `catalog`, `unknown`: docs/otlp.md). "
        "Each turn's dollars under the provider's "
        "prompt caching (`usd`, `schema_usd`: decimal strings, null when the model has no price; the cache "
        "tokens it was billed, `billed_as` `reported` or `predicted` by toolscope's cache model; `cache_break` "
        "and the `price_source`), and `cost`, the session's from its first turn to this page's last "
        "(`upto_turn`: a request's cache depends on every one before it), with its cache breaks and the "
        "agreement of predicted and reported cache figures (docs/cost.md).",
        responses={200: dict, **READ_ERRORS},
        examples=[OpenApiExample("A session of one turn and two calls", response_only=True, value={
            "session": {"client_id": "run-42", "agent_name": "coder", "model": "gpt-4o",
                        "started_at": "2026-11-26T09:00:00Z", "ended_at": "2026-11-26T09:00:31Z", "metadata": {},
                        "turn_count": 1, "tool_call_count": 2, "error_count": 0, "duplicate_tokens": 412,
                        "max_window_share": 0.09, "near_window": False},
            "turns": [{"index": 0, "model": "gpt-4o", "started_at": "2026-11-26T09:00:00Z", "input_tokens": 11840,
                       "output_tokens": 96, "schema_tokens": 3120, "system_prompt_tokens": 410,
                       "message_tokens": 58, "call_tokens": 40, "tool_output_tokens": 830,
                       "estimated_input_tokens": 4458, "unattributed_tokens": 7382, "window_share": 0.09}],
            "calls": [{"id": "run-42:c0", "turn_index": 0, "call_id": "call_1", "tool_name": "read_file",
                       "status": "ok", "output_tokens": 412, "duplicate_of": None, "artifact": None},
                      {"id": "run-42:c1", "turn_index": 0, "call_id": "call_2", "tool_name": "read_file",
                       "status": "ok", "output_tokens": 412, "duplicate_of": "run-42:c0", "artifact": None}],
            "totals": {"turns": 1, "calls": 2}, "next_cursor": None})],
    )
    def get(self, request: Request, client_id: str) -> Response:
        data = _query(SessionDetailQuery, request)
        session = selectors.session_get(project_id=request.auth.project_id, client_id=client_id)
        if session is None:
            raise exceptions.NotFound("No session with that id in this project.")
        after = data.get("cursor")
        page = selectors.session_detail_page(session=session, after=after,
                                             start_turn=None if after else data.get("turn"), limit=data["limit"])
        cost = selectors.session_cost(session=session, turns=page.turns)
        event_ids = {call["id"]: call["client_id"] for call in page.calls}
        # A repeat's first occurrence may be on another page: looked up in the session's days.
        event_ids.update((pk, row["client_id"]) for pk, row in
                         selectors.calls_elsewhere(session=session, calls=page.calls).items())
        return Response({
            "session": {field: getattr(session, field) for field in SESSION_FIELDS},
            "turns": [{**{key: value for key, value in turn.items() if key not in ("id", "cost", "usd", "schema_usd")},
                       "usd": _money(turn.get("usd")), "schema_usd": _money(turn.get("schema_usd"))}
                      for turn in page.turns],
            "cost": _session_cost(cost),
            "calls": [{"id": call["client_id"], **{field: call[field] for field in CALL_FIELDS},
                       "duplicate_of": event_ids.get(call["duplicate_of_id"]),
                       "artifact": None if call["artifact_id"] is None else {
                           "id": call["artifact__content_id"], "tokens_before": call["artifact__tokens_before"],
                           "tokens_after": call["artifact__tokens_after"], "strategy": call["artifact__strategy"]}}
                      for call in page.calls],
            "totals": {"turns": session.turn_count, "calls": session.tool_call_count},
            "next_cursor": selectors.position_format(page.next_after) if page.next_after else None,
        })


def _money(value: Any) -> str | None:
    """Dollars as a decimal string (a float would round them), None when unpriced."""
    return None if value is None else str(value)


def _session_cost(cost: dict[str, Any]) -> dict[str, Any] | None:
    if not cost:
        return None
    agreement = cost["agreement"]
    return {"upto_turn": cost["upto"], "requests": cost["requests"], "usd": _money(cost["total"]),
            "unpriced": cost["unpriced"], "price_sources": cost["sources"], "cache_read_tokens": cost["read"],
            "input_tokens": cost["input"],
            "cache_breaks": [{"turn": index, "reason": reason} for index, reason in cost["breaks"]],
            "agreement": {"requests": agreement.requests, "exact": agreement.exact,
                          "reported_read": agreement.reported_read, "predicted_read": agreement.predicted_read,
                          "reported_write": agreement.reported_write, "predicted_write": agreement.predicted_write}}


class ToolStatsView(APIView):
    required_scope = "read"

    @extend_schema(
        summary="Tools with their usage over a range", parameters=[RangeQuery], responses={200: dict, **READ_ERRORS},
        description="Every catalog tool and every tool called in [start, end): calls, errors, duration "
        "percentiles, output and duplicate tokens, times advertised and the schema tokens that cost, beside "
        "the catalog's figures (source, definitions, schema tokens), as the Tools page shows them.",
    )
    def get(self, request: Request) -> Response:
        data = _query(RangeQuery, request)
        rows = selectors.tool_table(project_id=request.auth.project_id, **_range(data))
        for row in rows:  # dollars as decimal strings, as everywhere in this API
            row["schema_usd"], row["output_usd"] = _money(row["schema_usd"]), _money(row["output_usd"])
        return Response({"start": data["start"], "end": data["end"], "results": rows})


class OverviewView(APIView):
    required_scope = "read"

    @extend_schema(
        summary="The overview's KPIs", parameters=[OverviewQuery], responses={200: dict, **READ_ERRORS},
        description="Each KPI of the dashboard's overview over [start, end) and over the period of the same "
        "length before it, of the whole project or of one `agent`, one `model` or both; `change` is relative "
        "for counts and dollars and in percentage points for shares. "
        "Dollars (`kind` usd: the cost of the priced requests, a month at that rate) are decimal strings, "
        "null when no request of the period has a price.",
        examples=[OpenApiExample("Two KPIs", response_only=True, value={
            "start": "2026-11-25T09:00:00Z", "end": "2026-11-26T09:00:00Z", "kpis": [
                {"key": "sessions", "label": "Sessions", "kind": "count", "better": "", "current": 120,
                 "previous": 96, "change": 0.25},
                {"key": "schema_share", "label": "Tool schemas, of provider-reported input", "kind": "share",
                 "better": "down", "current": 0.31, "previous": 0.44, "change": -13.0},
                {"key": "cost", "label": "Cost, priced requests", "kind": "usd", "better": "down",
                 "current": "41.530112", "previous": "38.2", "change": 0.087}]})],
    )
    def get(self, request: Request) -> Response:
        data = _query(OverviewQuery, request)
        where = selectors.slice_where(agent=data.get("agent", ""), model=data.get("model", ""))
        kpis = selectors.overview_kpis(project_id=request.auth.project_id, **_range(data), where=where)
        return Response({"start": data["start"], "end": data["end"], "kpis": [
            {"key": kpi.key, "label": kpi.label, "kind": kpi.kind, "better": kpi.better,
             **({"current": _money(kpi.current), "previous": _money(kpi.previous)} if kpi.kind == "usd" else
                {"current": kpi.current, "previous": kpi.previous}), "change": kpi.change} for kpi in kpis]})


class BatchView(APIView):
    required_scope = "read"

    @extend_schema(
        summary="An ingest batch's status and each event's outcome",
        description="The batch an ingest, transcript or OTLP request stored (its `batch_id`): `pending`, "
        "`processing`, `done` or `failed`, and per event `stored`, `quarantined` (with the reason), "
        "`pending` before processing ends, or `failed` when the batch failed for good.",
        responses={200: dict, **READ_ERRORS},
        examples=[OpenApiExample("A processed batch with one quarantined event", response_only=True, value={
            "id": 311, "kind": "events", "status": "done", "attempts": 1, "error": "",
            "received_at": "2026-11-26T09:00:00Z", "started_at": "2026-11-26T09:00:00Z",
            "finished_at": "2026-11-26T09:00:01Z", "event_count": 2, "quarantined": 1,
            "events": [{"id": "s-7f3a", "type": "session", "outcome": "stored"},
                       {"id": "s-7f3a:c9", "type": "tool_call", "outcome": "quarantined",
                        "reason": "DataError at processing.py:412"}]})],
    )
    def get(self, request: Request, batch_id: int) -> Response:
        outcome = batch_outcome(project_id=request.auth.project_id, batch_id=batch_id)
        if outcome is None:
            raise exceptions.NotFound("No batch with that id in this project.")
        return Response(outcome)
