"""Request and response shapes of API v1, for validation of small bodies and for the OpenAPI
description. Ingest events themselves are validated by services/events.py (hot path)."""

from __future__ import annotations

from rest_framework import serializers
from toolscope_agent.engine.schemas import normalize_tool


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


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()
    code = serializers.CharField()


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


class ToolsPutSerializer(serializers.Serializer):
    tools = ToolDefinitionSerializer(many=True, allow_empty=False, max_length=2000)


class ToolUpsertResultSerializer(serializers.Serializer):
    name = serializers.CharField()
    schema_hash = serializers.CharField()
    status = serializers.ChoiceField(choices=["created", "updated", "unchanged"])


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


class ArtifactSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    original = serializers.CharField()
    compacted = serializers.CharField()
    tokens_before = serializers.IntegerField()
    tokens_after = serializers.IntegerField()
    strategy = serializers.CharField()
    created_at = serializers.DateTimeField()
    tool_name = serializers.CharField(source="tool_call.tool_name", default=None)
    call_id = serializers.CharField(source="tool_call.call_id", default=None)
