"""/api/v1/simulations: replay a policy on recorded sessions (toolscope/policies/services/
simulation_runs.py). POST starts one (or reopens the one already made for the same document and
selection), GET reads its progress and result, DELETE cancels it."""

from __future__ import annotations

from datetime import timedelta

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.ranges import time_range
from api.serializers import JsonObjectField, StrictBooleanField, StrictCharField, StrictIntegerField
from api.views.resolve import READ_ERRORS, LabelField
from toolscope.policies.models import Simulation, SimulationStatus
from toolscope.policies.services.background import background_queue_position
from toolscope.policies.services.simulation_runs import (
    DocumentNotFound,
    SessionSelection,
    simulation_cancel,
    simulation_document,
    simulation_start,
)

MAX_SESSIONS = 100_000


class SimulationInput(serializers.Serializer):
    document = JsonObjectField(required=False, help_text="Replay this policy document (docs/policy.md); "
                                     "first of the four.")
    version = StrictIntegerField(required=False, min_value=1, help_text="Replay this version number, when no "
                                 "document is given.")
    draft = StrictBooleanField(required=False, default=False, help_text="Replay the draft, when neither "
                                     "a document nor a version is given.")
    label = LabelField(required=False, max_length=64, help_text="Replay the version under this label, when none "
                       "of the others is given (the default: production).")
    start = serializers.DateTimeField(required=False, help_text="Sessions started at or after (default: 7 days ago).")
    end = serializers.DateTimeField(required=False, help_text="Sessions started before (default: now).")
    agent_name = StrictCharField(required=False, allow_blank=True, max_length=200, help_text="Blank: any agent.")
    model = StrictCharField(required=False, allow_blank=True, max_length=200, help_text="Blank: any model.")
    limit = StrictIntegerField(required=False, min_value=1, max_value=MAX_SESSIONS,
                               help_text=f"At most this many sessions, the oldest first (at most {MAX_SESSIONS:,}).")


class SimulationOutput(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=SimulationStatus.choices)
    source = serializers.CharField(help_text='What was replayed: "draft", "v3 (production)", "uploaded".')
    selection = serializers.DictField()
    progress = serializers.FloatField(help_text="0..1")
    sessions_total = serializers.IntegerField()
    sessions_done = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    result = serializers.DictField(allow_null=True, help_text="When done: totals, per tool, per day, the misses.")
    queued_behind = serializers.SerializerMethodField(
        help_text="While pending: how many of the project's simulations and recommendations are ahead of it "
        "(running, or asked for before it); a project runs SIMULATIONS_PER_PROJECT at once. Null otherwise.")

    def get_queued_behind(self, simulation: Simulation) -> int | None:
        return background_queue_position(simulation)


def _answer(simulation: Simulation, code: int = status.HTTP_200_OK) -> Response:
    return Response(SimulationOutput(simulation).data, status=code)


class SimulationsView(APIView):
    required_scope = "policy:read"

    @extend_schema(
        summary="Simulate a policy on recorded sessions",
        description="Replays a policy document (the production version, another label or version, the "
        "draft, or one given) on the project's recorded sessions in a worker: the schema tokens it would "
        "have sent against what was advertised, and every recorded call it would not have sent (a miss: "
        "recoverable through the progressive menu or the policy's search, or hard). The same document "
        "and selection reopen the same simulation (200); a new one is queued (202). Poll its URL.",
        request=SimulationInput, responses={200: SimulationOutput, 202: SimulationOutput, **READ_ERRORS},
        examples=[OpenApiExample("The draft on last week", request_only=True, value={"draft": True})],
    )
    def post(self, request: Request) -> Response:
        serializer = SimulationInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        project = request.auth.project
        try:
            document, source = simulation_document(  # the first given of document, version, draft, label
                project=project, label=data.get("label"), version=data.get("version"), draft=data["draft"],
                document=data.get("document"))
        except DocumentNotFound as exc:
            raise exceptions.NotFound(str(exc)) from None
        start, end = time_range(data.get("start"), data.get("end"), timedelta(days=7))
        selection = SessionSelection(start=start, end=end,
                                     agent_name=data.get("agent_name"), model=data.get("model"),
                                     limit=data.get("limit"))
        simulation, created = simulation_start(project=project, document=document, source=source,
                                               selection=selection)
        simulation.refresh_from_db()
        return _answer(simulation, status.HTTP_202_ACCEPTED if created else status.HTTP_200_OK)


class SimulationView(APIView):
    required_scope = "policy:read"

    def _get(self, request: Request, simulation_id: int) -> Simulation:
        simulation = Simulation.objects.filter(project=request.auth.project, pk=simulation_id).first()
        if simulation is None:
            raise exceptions.NotFound("No simulation with this id in the key's project.")
        return simulation

    @extend_schema(summary="Read a simulation", responses={200: SimulationOutput, **READ_ERRORS})
    def get(self, request: Request, simulation_id: int) -> Response:
        return _answer(self._get(request, simulation_id))

    @extend_schema(summary="Cancel a simulation", description="Stops a queued or running simulation at its "
                   "next chunk of sessions; one that has ended is answered as it is.",
                   responses={200: SimulationOutput, **READ_ERRORS})
    def delete(self, request: Request, simulation_id: int) -> Response:
        simulation = self._get(request, simulation_id)
        simulation_cancel(simulation=simulation)
        simulation.refresh_from_db()
        return _answer(simulation)
