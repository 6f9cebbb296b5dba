"""GET /api/v1/artifacts/{id}: the original of a compacted tool output, for the agent's
`retrieve_tool_output` tool. The id is the content id the compacted text names (a uuid of an
artifact stored before content ids also works)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
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
        "compacted text and both token counts. `id` is the content id that the compacted text names "
        "(24 hex digits of the original's SHA-256, as the SDK computes it); identical originals share "
        "it, and the earliest is answered. Only a key of the artifact's project can read it.",
        parameters=[OpenApiParameter(
            "artifact_id", str, OpenApiParameter.PATH,
            description="The content id the compacted text names (24 hex digits), or an artifact's uuid.")],
        responses={200: ArtifactSerializer, 401: ErrorSerializer, 403: ErrorSerializer, 404: ErrorSerializer},
    )
    def get(self, request: Request, artifact_id: str) -> Response:
        artifact = artifact_get(project=request.auth.project, artifact_id=artifact_id)
        if artifact is None:
            raise exceptions.NotFound("No artifact with this id in the key's project.")
        return Response(ArtifactSerializer(artifact).data)
