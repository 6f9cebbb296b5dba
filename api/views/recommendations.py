"""/api/v1/recommendations: the dashboard's policy recommendations over REST (issue 25, item 5).
POST starts them for a time range in a worker (or reopens the run already made for the same
request), GET reads their progress and, when done, the candidates with their figures, the
recommended one and its policy document; POST .../apply writes a candidate into the draft as the
dashboard's apply does (toolscope/policies/services/recommendations.py).

Scopes: starting and reading take `policy:read`, as /simulations (a run reads the recorded
sessions and changes no policy); applying changes the draft, which the dashboard lets editors
do, so it takes `admin` (there is no policy-writing scope; an agent's `policy:read` key must not
rewrite the draft)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_field
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.ranges import time_range
from api.serializers import ErrorSerializer, StrictBooleanField, StrictCharField, StrictIntegerField
from api.views.resolve import READ_ERRORS
from toolscope.policies.models import Policy, Recommendation, SimulationStatus
from toolscope.policies.services.background import background_queue_position
from toolscope.policies.services.documents import policy_document_build
from toolscope.policies.services.recommendations import (
    policy_draft_apply,
    recommendation_candidate,
    recommendation_candidates,
    recommendation_start,
)

MIN_LIMIT, MAX_LIMIT, DEFAULT_LIMIT = 20, 5000, 2000  # the dashboard's form
DEFAULT_DAYS = 14


class RecommendationInput(serializers.Serializer):
    start = serializers.DateTimeField(required=False, help_text="Learn from sessions started at or after "
                                      f"(default: {DEFAULT_DAYS} days before the end).")
    end = serializers.DateTimeField(required=False, help_text="Sessions started before (default: now).")
    agent_name = StrictCharField(required=False, allow_blank=True, max_length=200, help_text="Blank: any agent.")
    model = StrictCharField(required=False, allow_blank=True, max_length=200, help_text="Blank: any model.")
    limit = StrictIntegerField(required=False, min_value=MIN_LIMIT, max_value=MAX_LIMIT, default=DEFAULT_LIMIT,
                               help_text="The newest this many sessions: those of the older tasks learn the "
                               "candidates, those of the newer tasks score them.")
    retry = StrictBooleanField(required=False, default=False, help_text="Start a failed run afresh; "
                               "otherwise it is reopened as it is.")


class CandidateOutput(serializers.Serializer):
    name = serializers.CharField()
    selection = serializers.DictField(help_text="The policy document's `selection` this candidate writes.")
    outputs = serializers.DictField(help_text="The policy document's `outputs` this candidate writes.")
    schema_tokens_saved = serializers.IntegerField()
    round_trip_tokens = serializers.IntegerField(help_text="Added by its recoverable misses' round trips.")
    net_saved_tokens = serializers.IntegerField()
    net_saved_share = serializers.FloatField()
    hard_miss_rate = serializers.FloatField(help_text="Hard misses per held-out call.")
    hard_miss_error = serializers.FloatField(
        help_text="The hard-miss rate's standard error, each held-out task's sessions one cluster: the recommended "
                  "candidate keeps hard_miss_rate + hard_miss_error within 2%.")
    recoverable_misses = serializers.IntegerField()
    recoverable_miss_rate = serializers.FloatField(help_text="Recoverable misses per held-out call.")
    saved_share = serializers.FloatField()
    miss_rate = serializers.FloatField()
    family = serializers.CharField(help_text="The candidate's kind and settings, e.g. `request rules (precision "
                                   "0.15, 2 tasks) + tool_search top 20`.")
    refit = serializers.BooleanField(help_text="True when `selection` and `outputs` were learnt again on every "
                                     "session (fit and held-out); the figures are those of the version learnt on "
                                     "the fit sessions, measured on the held-out ones.")
    priced_sessions = serializers.IntegerField(help_text="Held-out sessions whose model has a price; when any, "
                                               "candidates are ranked on dollars, not tokens.")
    recorded_dollars = serializers.FloatField(help_text="Their input in dollars as recorded, under the "
                                              "provider's prompt cache (docs/cost.md).")
    policy_dollars = serializers.FloatField(help_text="The same under this candidate, round trips included.")
    net_dollars_share = serializers.FloatField(help_text="(recorded - policy) / recorded.")
    cache_breaks = serializers.IntegerField(help_text="Requests whose tool list differs from the one before.")


class RecommendationResult(serializers.Serializer):
    sessions = serializers.IntegerField()
    fit = serializers.IntegerField(help_text="Sessions the candidates learnt from (the older tasks).")
    held_out = serializers.IntegerField(help_text="Sessions of the newer tasks, held out from learning.")
    scored = serializers.IntegerField(required=False, help_text=(
        "Of those, the sessions every candidate was replayed on: all of them, or at most 1,000 sampled by "
        "task (each task its share, at least one session, evenly spaced in time). Absent from runs made "
        "before the limit, which replayed all of them."))
    candidates = CandidateOutput(many=True)
    front = serializers.ListField(child=serializers.CharField(), help_text="The Pareto front's names.")
    recommended = serializers.CharField(allow_null=True, help_text="The front's candidate saving most (dollars "
                                        "when priced, else net tokens) with its hard misses within 2% by one "
                                        "standard error; null with fewer than 10 sessions.")
    recommended_document = serializers.DictField(allow_null=True, help_text="The recommended candidate's "
                                                 "policy document sections: {selection, outputs}.")
    baselines = CandidateOutput(many=True, required=False, help_text=(
        "What the recommended policy is compared with, scored on the same held-out sessions: sending every "
        "tool, the published policy (the production label's version) and the provider's own deferred loading "
        "of the whole catalog. Absent from runs made before they were."))


class RecommendationOutput(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=SimulationStatus.choices)
    selection = serializers.SerializerMethodField()
    progress = serializers.FloatField(help_text="0..1: candidates scored.")
    candidates_done = serializers.IntegerField()
    candidates_total = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    error = serializers.CharField(help_text="Why a failed run failed.")
    queued_behind = serializers.SerializerMethodField(
        help_text="While pending: how many of the project's simulations and recommendations are ahead of it "
        "(running, or asked for before it); a project runs SIMULATIONS_PER_PROJECT at once. Null otherwise.")
    result = serializers.SerializerMethodField(help_text="When done: the candidates and the recommended one.")

    @extend_schema_field({"type": "object", "properties": {
        "start": {"type": "string", "format": "date-time", "nullable": True},
        "end": {"type": "string", "format": "date-time", "nullable": True},
        "days": {"type": "integer", "description": "The dashboard's window in days; 0 for a time range."},
        "agent_name": {"type": "string"}, "model": {"type": "string"}, "limit": {"type": "integer"}}})
    def get_selection(self, run: Recommendation) -> dict[str, Any]:
        return {"start": run.start and run.start.isoformat(), "end": run.end and run.end.isoformat(),
                "days": run.days, "agent_name": run.agent_name, "model": run.model, "limit": run.limit}

    def get_queued_behind(self, run: Recommendation) -> int | None:
        return background_queue_position(run)

    @extend_schema_field(RecommendationResult(allow_null=True))
    def get_result(self, run: Recommendation) -> dict[str, Any] | None:
        if run.status != SimulationStatus.DONE or not run.result:
            return None
        rows = recommendation_candidates(run)
        best = next((row for row in rows if row["name"] == run.result["recommended"]), None)
        return RecommendationResult({
            **run.result, "candidates": rows,
            "recommended_document": {"selection": best["selection"], "outputs": best["outputs"]} if best else None,
        }).data


@extend_schema_field({"oneOf": [{"type": "string", "minLength": 1, "maxLength": 200},
                                {"type": "integer", "minimum": 0, "maximum": 100_000}],
                      "description": "The candidate's name, or its index in the run's `candidates`."})
class CandidateField(serializers.Field):
    default_error_messages = {"invalid": "A candidate's name (a non-empty string) or index (an integer ≥ 0)."}

    def to_internal_value(self, data: Any) -> str | int:
        if isinstance(data, float) and data.is_integer():
            data = int(data)
        if isinstance(data, bool) or not isinstance(data, str | int):
            self.fail("invalid")
        if not (0 < len(data) <= 200 if isinstance(data, str) else 0 <= data <= 100_000):
            self.fail("invalid")
        return data

    def to_representation(self, value: Any) -> Any:
        return value


class ApplyInput(serializers.Serializer):
    candidate = CandidateField()
    outputs = serializers.ChoiceField(
        choices=["keep", "replace"], default="keep",
        help_text="`keep` (default) leaves the draft's output rules (compaction, duplicates) as they are; `replace` "
        "writes the candidate's.")


def _answer(run: Recommendation, code: int = status.HTTP_200_OK) -> Response:
    return Response(RecommendationOutput(run).data, status=code)


def _run(request: Request, recommendation_id: int) -> Recommendation:
    run = Recommendation.objects.filter(project=request.auth.project, pk=recommendation_id).first()
    if run is None:
        raise exceptions.NotFound("No recommendation with this id in the key's project.")
    return run


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


class RecommendationsView(APIView):
    required_scope = "policy:read"

    @extend_schema(
        summary="Recommend policies from recorded sessions",
        description="Learns candidate policies on the older tasks of the newest `limit` sessions of the range "
        "(of `agent_name` and `model` when given; split by task, each session's first instruction) and scores "
        "them on the newer tasks' sessions, in a worker, as the "
        "dashboard's Recommend does. The same request, while no new session has arrived, reopens the same "
        "run (200), pending, running, done or failed (unless `retry`); a new one is queued (202) behind the "
        "project's other runs. Poll its URL.",
        request=RecommendationInput, responses={200: RecommendationOutput, 202: RecommendationOutput, **READ_ERRORS},
        examples=[OpenApiExample("The coding agent's last two weeks", request_only=True, value={
            "start": "2026-01-01T00:00:00Z", "end": "2026-01-15T00:00:00Z", "agent_name": "coder", "limit": 2000})],
    )
    def post(self, request: Request) -> Response:
        serializer = RecommendationInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        start, end = time_range(data.get("start"), data.get("end"), timedelta(days=DEFAULT_DAYS))
        run, created = recommendation_start(project=request.auth.project, limit=data["limit"], start=start, end=end,
                                            agent_name=data.get("agent_name") or "", model=data.get("model") or "",
                                            retry=data["retry"])
        run.refresh_from_db()
        return _answer(run, status.HTTP_202_ACCEPTED if created else status.HTTP_200_OK)


class RecommendationView(APIView):
    required_scope = "policy:read"

    @extend_schema(summary="Read a recommendation run", description="Its status and progress (candidates "
                   "scored), how many runs it waits behind, and when done the candidates with their held-out "
                   "figures, the Pareto front, the recommended one and its policy document.",
                   responses={200: RecommendationOutput, **READ_ERRORS})
    def get(self, request: Request, recommendation_id: int) -> Response:
        return _answer(_run(request, recommendation_id))


class RecommendationApplyView(APIView):
    required_scope = "admin"

    @extend_schema(
        summary="Apply a recommended candidate to the draft",
        description="Writes the candidate's selection (mode, always-on set, context rules and the groups they use) "
        "into the project's draft policy, in one audited transaction, as the dashboard's apply does; with "
        "`outputs: replace`, its output rules (compaction rules, duplicate suppression) too. The rest of the draft "
        "(other groups, per-tool settings, the allowed set, and by default the output rules) is kept; the audit "
        "entry keeps the draft it replaced, which the dashboard's Undo puts back. Answers the draft's document. Takes "
        "the `admin` scope: it changes the policy. A run not done yet is a 409; an unknown candidate a 404.",
        request=ApplyInput,
        responses={200: serializers.DictField(help_text="The draft's policy document (docs/policy.md)."),
                   409: ErrorSerializer, **READ_ERRORS},
        examples=[OpenApiExample("By name", request_only=True, value={"candidate": "always-on top 2 + 1 rules"}),
                  OpenApiExample("By index", request_only=True, value={"candidate": 0})],
    )
    def post(self, request: Request, recommendation_id: int) -> Response:
        run = _run(request, recommendation_id)
        serializer = ApplyInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        wanted = serializer.validated_data["candidate"]
        if run.status != SimulationStatus.DONE:
            raise Conflict(f"This recommendation is {run.status}: only a done one's candidates can be applied.")
        chosen = recommendation_candidate(run, wanted)
        if chosen is None:
            raise exceptions.NotFound(f"No candidate {wanted!r} in this recommendation.")
        policy = Policy.objects.filter(project=request.auth.project).first()
        if policy is None:
            raise exceptions.NotFound("The key's project has no draft policy.")
        policy_draft_apply(policy=policy, selection=chosen["selection"], outputs=chosen["outputs"], user=None,
                           replace_outputs=serializer.validated_data["outputs"] == "replace")
        policy.refresh_from_db()
        return Response(policy_document_build(policy=policy))
