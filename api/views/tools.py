"""GET and PUT /api/v1/tools: the project's catalog."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.serializers import ToolListSerializer, ToolsPutResponseSerializer, ToolsPutSerializer
from toolscope.policies.selectors import tool_list
from toolscope.policies.services.catalog import catalog_upsert


class ToolsView(APIView):
    def get_permissions(self):
        # Reading the catalog is what an agent with a policy key does; writing it is ingest.
        self.required_scope = "policy:read" if self.request.method == "GET" else "ingest"
        return super().get_permissions()

    @extend_schema(
        summary="List the project's tools",
        responses={200: ToolListSerializer},
    )
    def get(self, request: Request) -> Response:
        return Response({"tools": tool_list(project=request.auth.project)})

    @extend_schema(
        summary="Register tool definitions",
        description="Bulk upsert. A changed definition gets a new schema hash; every schema a tool has "
        "had is kept. Per-tool settings are never changed here. Accepts toolscope's shape "
        "({name, description, input_schema, source}) and OpenAI/Anthropic/MCP definitions.",
        request=ToolsPutSerializer,
        responses={200: ToolsPutResponseSerializer},
        examples=[OpenApiExample("Two tools", request_only=True, value={"tools": [
            {"name": "read_file", "description": "Read a file from the workspace",
             "input_schema": {"type": "object", "properties": {"path": {"type": "string"}},
                              "required": ["path"]}, "source": "local"},
            {"name": "github_create_issue", "description": "Open an issue",
             "input_schema": {"type": "object", "properties": {"title": {"type": "string"}}},
             "source": "mcp:github"},
        ]})],
    )
    def put(self, request: Request) -> Response:
        serializer = ToolsPutSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        results = catalog_upsert(project=request.auth.project, definitions=serializer.validated_data["tools"])
        return Response({"tools": results})
