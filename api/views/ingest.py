"""POST /api/v1/ingest and POST /api/v1/transcripts."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, PolymorphicProxySerializer, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.errors import InvalidInput
from api.parsers import PayloadTooLarge, TranscriptJSONParser
from api.schema import EVENT_BATCH_SCHEMA, TRANSCRIPT_SCHEMA
from api.serializers import ErrorSerializer, IngestResponseSerializer, TranscriptResponseSerializer
from api.transcripts import TranscriptError, TranscriptTooLong, map_transcript
from toolscope.telemetry.models import BatchKind
from toolscope.telemetry.services.ingest import IngestOutcome, ingest_events

ERRORS = dict.fromkeys((401, 403, 413, 415, 429, 500, 503), ErrorSerializer)


def _rejected(outcome: type, name: str) -> OpenApiResponse:
    """A 400 is either an Error (the body as a whole) or the outcome with every event rejected."""
    return OpenApiResponse(
        response=PolymorphicProxySerializer(component_name=name, serializers=[outcome, ErrorSerializer],
                                            resource_type_field_name=None),
        description="The body is malformed (Error), or no event in it could be accepted (each result says why).",
    )


def events_from_body(data: Any) -> list[Any]:
    if not isinstance(data, dict):
        raise InvalidInput('The body must be a JSON object: {"events": [...]}.')
    events = data.get("events")
    if not isinstance(events, list):
        raise InvalidInput("'events' is required and must be a list.", field="events")
    if not events:
        raise InvalidInput("'events' is empty.", field="events")
    check_event_count(len(events), "events in one request")
    return events


def check_event_count(count: int, what: str) -> None:
    """One batch holds at most INGEST_MAX_EVENTS events, however they arrive."""
    if count > settings.INGEST_MAX_EVENTS:
        raise PayloadTooLarge(f"{count} {what}; the limit is {settings.INGEST_MAX_EVENTS} per request.")


def outcome_response(outcome: IngestOutcome) -> Response:
    code = status.HTTP_202_ACCEPTED if outcome.stored_anything else status.HTTP_400_BAD_REQUEST
    return Response(outcome.as_dict(), status=code)


EXAMPLE_BATCH = {
    "events": [
        {"type": "session", "id": "s-7f3a", "agent_name": "coder", "model": "gpt-4o"},
        {"type": "turn", "id": "s-7f3a:t0", "session_id": "s-7f3a", "index": 0,
         "tools": [{"name": "read_file", "description": "Read a file",
                    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}],
         "usage": {"input_tokens": 5120, "output_tokens": 210}},
        {"type": "tool_call", "id": "s-7f3a:call_0", "session_id": "s-7f3a", "turn_index": 0,
         "call_id": "call_0", "tool_name": "read_file", "arguments": {"path": "src/api.py"},
         "output": "import os\n", "status": "ok", "duration_ms": 12.5},
    ]
}


class IngestView(APIView):
    required_scope = "ingest"

    @extend_schema(
        summary="Send telemetry events",
        description="A batch of session, turn, tool_call and catalog events (docs/events.md). At most "
        "1,000 events and 5 MB decompressed; `Content-Encoding: gzip` accepted. The batch is stored "
        "before the 202; workers process it. Re-sent event ids are answered `duplicate`.",
        request={"application/json": EVENT_BATCH_SCHEMA},
        responses={202: IngestResponseSerializer, 400: _rejected(IngestResponseSerializer, "IngestRejected"),
                   **ERRORS},
        examples=[OpenApiExample("A session with one turn and one tool call", value=EXAMPLE_BATCH,
                                 request_only=True)],
    )
    def post(self, request: Request) -> Response:
        events = events_from_body(request.data)
        return outcome_response(ingest_events(api_key=request.auth, raw_events=events))


class TranscriptView(APIView):
    required_scope = "ingest"
    parser_classes = [TranscriptJSONParser]

    @extend_schema(
        summary="Send a whole conversation",
        description="An OpenAI Chat Completions (`messages` + `tools`), Anthropic Messages (`system`, "
        "`messages` with tool_use/tool_result blocks, `tools`) or OpenAI Responses (`input` items, "
        "`tools`) conversation, exactly as sent to the provider. `format` is detected when absent. "
        "It becomes session, turn and tool_call events with ids derived from the conversation, so "
        "re-sending it creates nothing twice. A whole session in one request: at most TRANSCRIPT_MAX_CALLS "
        "tool calls and as many model requests (default 10,000) and TRANSCRIPT_MAX_BODY_BYTES decompressed "
        "(default 50 MB), else 413 naming the limit. Its events (a session start and end, a turn per model "
        "request, a tool call per call) are stored as batches of at most 1,000 (INGEST_MAX_EVENTS), all in "
        "one transaction before the 202: every one or none. `batch_id` is the first, `batch_ids` all of them "
        "in order.",
        request={"application/json": TRANSCRIPT_SCHEMA},
        responses={202: TranscriptResponseSerializer,
                   400: _rejected(TranscriptResponseSerializer, "TranscriptRejected"), **ERRORS},
        examples=[OpenApiExample("OpenAI Chat Completions", request_only=True, value={
            "session_id": "run-42", "model": "gpt-4o",
            "messages": [
                {"role": "system", "content": "You are a coding agent."},
                {"role": "user", "content": "What is in README.md?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "read_file", "arguments": "{\"path\": \"README.md\"}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "# toolscope\n"},
                {"role": "assistant", "content": "It is toolscope's README."},
            ],
            "tools": [{"type": "function", "function": {
                "name": "read_file", "description": "Read a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}],
        })],
    )
    def post(self, request: Request) -> Response:
        if not isinstance(request.data, dict):
            raise InvalidInput("The body must be a JSON object.")
        limit = settings.TRANSCRIPT_MAX_CALLS
        try:
            mapped = map_transcript(request.data, received_at=timezone.now(), max_calls=limit)
        except TranscriptError as exc:
            raise InvalidInput(str(exc), field=exc.path or None) from None
        except TranscriptTooLong as exc:
            raise PayloadTooLarge(
                f"The transcript holds {exc.what}; the limit is {limit:,} per request (TRANSCRIPT_MAX_CALLS). "
                "Send a longer session as events to /api/v1/ingest.") from None
        outcome = ingest_events(api_key=request.auth, raw_events=mapped.events, kind=BatchKind.TRANSCRIPT,
                                batch_events=settings.INGEST_MAX_EVENTS)
        body = {"format": mapped.format, "session_id": mapped.session_id, **outcome.as_dict()}
        return Response(body, status=outcome_response(outcome).status_code)

