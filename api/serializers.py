"""Request and response shapes of API v1, for validation of small bodies and for the OpenAPI
description. Ingest events themselves are validated by services/events.py (hot path)."""

from __future__ import annotations

from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from toolscope_agent.engine.schemas import normalize_tool

from api.schema import ID, NAME, TEXT
from toolscope.telemetry.services.events import Rejected, json_object, scrub


class StrictCharField(serializers.CharField):
    """A string, as the OpenAPI description says, kept as sent: DRF's CharField would take 0 or
    true as "0" and "True", and strip white space before checking the length."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("trim_whitespace", False)
        # Blank is let through by run_validation: declared to DRF, drf-spectacular would describe
        # a field with a pattern as a second schema (oneOf ..., {"maxLength": 0}).
        self.blank_ok = kwargs.pop("allow_blank", False)
        super().__init__(**kwargs)
        if not any(isinstance(validator, RegexValidator) for validator in self.validators):
            # What CharField's own NUL check refuses, stated where drf-spectacular reads it.
            self.validators.append(RegexValidator(r"\A[^\x00]*\Z", "Null characters are not allowed."))

    def run_validation(self, data=serializers.empty):
        return "" if data == "" and self.blank_ok else super().run_validation(data)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    """An integer, as the OpenAPI description says: DRF's IntegerField would take "8". A JSON
    number with no fraction is one, 8.0 as 8, and so is one past 2**64, which the parser (orjson)
    reads as a float."""

    def to_internal_value(self, data):
        if isinstance(data, float) and data.is_integer():
            data = int(data)
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


@extend_schema_field(ID)
class IdField(StrictCharField):
    """An identifier as events take one (services/events.py `identifier`): not blank, no NUL."""

    def __init__(self, **kwargs) -> None:
        super().__init__(max_length=200, **kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if not value.strip():
            self.fail("blank")
        return value


@extend_schema_field(NAME)
class NameField(StrictCharField):
    def __init__(self, **kwargs) -> None:
        super().__init__(max_length=200, allow_blank=True, **kwargs)


@extend_schema_field(TEXT)
class FreeTextField(StrictCharField):
    """Free text as events keep it (docs/events.md): as sent, NUL and unpaired surrogates stored
    as U+FFFD; never refused for them, as DRF's CharField would."""

    def __init__(self, **kwargs) -> None:
        super().__init__(allow_blank=True, **kwargs)
        self.validators = []

    def to_internal_value(self, data):
        return scrub(super().to_internal_value(data), "")


class StrictBooleanField(serializers.BooleanField):
    """true or false, as the OpenAPI description says: DRF's BooleanField would take 0, "yes" or "on"."""

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class JsonObjectField(serializers.DictField):
    """A JSON object kept as jsonb can hold it (the rule of catalog events, docs/events.md): NUL
    and unpaired surrogates in keys and strings stored as U+FFFD, numbers within 64 bits."""

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        try:
            return json_object(value, "")
        except Rejected as exc:
            where = f"at {exc.path}: " if exc.path else ""
            raise serializers.ValidationError(f"{where}{exc.reason}") from None


class EventResultSerializer(serializers.Serializer):
    id = serializers.CharField(allow_null=True)
    status = serializers.ChoiceField(choices=["accepted", "duplicate", "rejected"])
    reason = serializers.CharField(required=False)
    path = serializers.CharField(required=False, help_text="JSON path of the bad field, e.g. events[2].index")


class IngestResponseSerializer(serializers.Serializer):
    batch_id = serializers.IntegerField(allow_null=True, help_text="The (first) batch stored; null if none was.")
    batch_ids = serializers.ListField(child=serializers.IntegerField(), help_text=(
        "Every batch stored, in order: one for /ingest, as many as a transcript's events need (at most "
        "1,000 events each), all stored in one transaction. Empty if nothing was stored."))
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

    name = IdField()
    # null is the same as absent, as in events
    description = FreeTextField(required=False, default="", allow_null=True)
    input_schema = serializers.DictField(required=False, default=dict, allow_null=True)
    source = NameField(required=False, default="", allow_null=True)

    def to_internal_value(self, data):
        if isinstance(data, dict):
            _check_shape_types(data)
            data = {key: value for key, value in normalize_tool(data).items() if value or key == "name"}
        return super().to_internal_value(data)

    def validate_input_schema(self, value):
        # The rule of catalog events (docs/events.md): what jsonb can hold, NUL replaced.
        try:
            return json_object(value, "")
        except Rejected as exc:
            where = f"at {exc.path}: " if exc.path else ""
            raise serializers.ValidationError(f"{where}{exc.reason}") from None


# The fields of each shape normalize_tool reads, and the JSON type each must have: it would drop
# a wrong one silently (a list as the schema, an object as the description).
_SHAPE_TYPES = {"description": str, "source": str, "input_schema": dict, "parameters": dict, "inputSchema": dict}


def _check_shape_types(data: dict) -> None:
    body = data.get("function", data) if data.get("type") == "function" else data
    if not isinstance(body, dict):
        raise serializers.ValidationError({"function": ["Must be an object."]})
    for key, expected in _SHAPE_TYPES.items():
        value = body.get(key)
        if value is not None and not isinstance(value, expected):
            kind = "a string" if expected is str else "an object"
            where = f"function.{key}" if body is not data else key
            raise serializers.ValidationError({where: [f"Must be {kind}."]})


class ToolsPutSerializer(serializers.Serializer):
    # A ListField rather than many=True: the OpenAPI description then states the limits.
    tools = serializers.ListField(child=ToolDefinitionSerializer(), min_length=1, max_length=2000)


class ToolUpsertResultSerializer(serializers.Serializer):
    name = serializers.CharField()
    source = serializers.CharField(help_text="The definition's source: a tool is its (source, name).")
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
    # null for an artifact no tool call points at (its call was deleted, or it was made by hand)
    tool_name = serializers.CharField(source="tool_call.tool_name", default=None, allow_null=True)
    call_id = serializers.CharField(source="tool_call.call_id", default=None, allow_null=True)
