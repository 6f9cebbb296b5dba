"""Request and response shapes of API v1, for validation of small bodies and for the OpenAPI
description. Ingest events themselves are validated by services/events.py (hot path)."""

from __future__ import annotations

from rest_framework import serializers
from toolscope_agent.engine.schemas import normalize_tool

from toolscope.telemetry.services.events import Rejected, json_object


class EventResultSerializer(serializers.Serializer):
    id = serializers.CharField(allow_null=True)
    status = serializers.ChoiceField(choices=["accepted", "duplicate", "rejected"])
    reason = serializers.CharField(required=False)
    path = serializers.CharField(required=False, help_text="JSON path of the bad field, e.g. events[2].index")


class IngestResponseSerializer(serializers.Serializer):
    batch_id = serializers.IntegerField(allow_null=True)
    accepted = serializers.IntegerField()
    duplicates = serializers.IntegerField()
    rejected = serializers.IntegerField()
    results = EventResultSerializer(many=True)


class TranscriptResponseSerializer(IngestResponseSerializer):
    format = serializers.ChoiceField(choices=["openai_chat", "anthropic", "openai_responses"])
    session_id = serializers.CharField()


class ErrorSerializer(serializers.Serializer):
    """Every error answer of the API (api/errors.py, api/middleware.py)."""

    detail = serializers.CharField()
    code = serializers.CharField()
    field = serializers.CharField(required=False, help_text="JSON path of the bad field, e.g. tools[1].name")
    errors = serializers.DictField(child=serializers.CharField(), required=False,
                                   help_text="Every bad field of a 400: JSON path -> message.")
    request_id = serializers.CharField(required=False, help_text="On 500 and 503: the id the server logged "
                                       "the error under (also the X-Request-ID header).")


class ToolDefinitionSerializer(serializers.Serializer):
    """toolscope's shape; OpenAI (function / Responses), Anthropic and MCP shapes are normalised first."""

    name = serializers.CharField(max_length=200)
    description = serializers.CharField(allow_blank=True, required=False, default="")
    input_schema = serializers.DictField(required=False, default=dict)
    source = serializers.CharField(max_length=200, allow_blank=True, required=False, default="")

    def to_internal_value(self, data):
        if isinstance(data, dict):
            data = {key: value for key, value in normalize_tool(data).items() if value or key == "name"}
        return super().to_internal_value(data)

    def validate_input_schema(self, value):
        # The rule of catalog events (docs/events.md): what jsonb can hold, NUL replaced.
        try:
            return json_object(value, "")
        except Rejected as exc:
            where = f"at {exc.path}: " if exc.path else ""
            raise serializers.ValidationError(f"{where}{exc.reason}") from None


class ToolsPutSerializer(serializers.Serializer):
    tools = ToolDefinitionSerializer(many=True, allow_empty=False, max_length=2000)


class ToolUpsertResultSerializer(serializers.Serializer):
    name = serializers.CharField()
    schema_hash = serializers.CharField()
    status = serializers.ChoiceField(choices=["created", "updated", "unchanged"])


class ToolsPutResponseSerializer(serializers.Serializer):
    tools = ToolUpsertResultSerializer(many=True)


class ToolSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    input_schema = serializers.DictField()
    source = serializers.CharField()
    schema_hash = serializers.CharField()
    schema_tokens = serializers.IntegerField(allow_null=True)
    first_seen_at = serializers.DateTimeField()
    last_seen_at = serializers.DateTimeField()
    settings = serializers.DictField(help_text="Per-tool settings: scope, requires_approval, redact, ...")


class ToolListSerializer(serializers.Serializer):
    tools = ToolSerializer(many=True)


class ArtifactSerializer(serializers.Serializer):
    # The content id the compacted text names, which retrieval takes (the row's uuid is internal)
    id = serializers.CharField(source="content_id")
    original = serializers.CharField()
    compacted = serializers.CharField()
    tokens_before = serializers.IntegerField()
    tokens_after = serializers.IntegerField()
    strategy = serializers.CharField()
    created_at = serializers.DateTimeField()
    tool_name = serializers.CharField(source="tool_call.tool_name", default=None)
    call_id = serializers.CharField(source="tool_call.call_id", default=None)
