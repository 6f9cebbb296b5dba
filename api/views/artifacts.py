"""GET /api/v1/artifacts/{id}: the original of a compacted tool output, for the agent's
`retrieve_tool_output` tool."""

from __future__ import annotations

from uuid import UUID

from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.serializers import ArtifactSerializer, ErrorSerializer
from toolscope.telemetry.selectors import artifact_get


class ArtifactView(APIView):
    required_scope = "policy:read"

    @extend_schema(
        summary="Retrieve a compacted output's original",
        description="The full original text of a tool output the model received compacted, with the "
        "compacted text and both token counts. Only a key of the artifact's project can read it.",
        responses={200: ArtifactSerializer, 401: ErrorSerializer, 403: ErrorSerializer, 404: ErrorSerializer},
    )
    def get(self, request: Request, artifact_id: UUID) -> Response:
        artifact = artifact_get(project=request.auth.project, artifact_id=artifact_id)
        if artifact is None:
            raise exceptions.NotFound("No artifact with this id in the key's project.")
        return Response(ArtifactSerializer(artifact).data)
