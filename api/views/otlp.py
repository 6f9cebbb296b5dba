"""OTLP/HTTP in: POST /api/v1/otlp/v1/traces, what the OpenTelemetry SDKs' exporters send.

Point an exporter at it with

    OTEL_EXPORTER_OTLP_ENDPOINT=https://toolscope.example.com/api/v1/otlp
    OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer tsk_..."

Protobuf (`application/x-protobuf`) and JSON (`application/json`, hex ids), gzip or not, decoded
with opentelemetry-proto. The GenAI spans become session, turn and tool_call events
(toolscope/telemetry/otlp/genai.py), validated and stored as one batch before the answer, as
/ingest stores its events; the workers process it. Other spans (HTTP, database…) are accepted and
not kept. The answer is OTLP's own ExportTraceServiceResponse in the request's encoding, with
`partial_success` counting the spans whose events were rejected (and why, for the first); a body
that cannot be decoded is a 400 whose body is a google.rpc.Status. Over the key's rate limit: 429
with Retry-After, as everywhere in the API; the database down: 503 with Retry-After.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions
from rest_framework.parsers import BaseParser
from rest_framework.request import Request
from rest_framework.views import APIView

from api.parsers import PayloadTooLarge, read_limited
from api.serializers import ErrorSerializer
from toolscope.telemetry.models import BatchKind
from toolscope.telemetry.otlp.budget import Budget, OverBudget
from toolscope.telemetry.otlp.claude_code import claude_code_events
from toolscope.telemetry.otlp.decode import (
    JSON,
    PROTOBUF,
    OtlpDecodeError,
    decode_logs,
    decode_traces,
    encode_response,
    encode_status,
)
from toolscope.telemetry.otlp.genai import genai_events
from toolscope.telemetry.services.ingest import ingest_events

INVALID_ARGUMENT = 3  # google.rpc.Code
# In OTLP/JSON; in protobuf, the messages of the same names.
EXPORT_RESPONSE = {"type": "object", "properties": {"partialSuccess": {"type": "object", "properties": {
    "rejectedSpans": {"type": "string", "description": "int64, as OTLP/JSON writes it"},
    "errorMessage": {"type": "string"}}}}}
EXPORT_LOGS_RESPONSE = {"type": "object", "properties": {"partialSuccess": {"type": "object", "properties": {
    "rejectedLogRecords": {"type": "string", "description": "int64, as OTLP/JSON writes it"},
    "errorMessage": {"type": "string"}}}}}
STATUS = {"type": "object", "properties": {"code": {"type": "integer"}, "message": {"type": "string"},
                                           "details": {"type": "array", "items": {"type": "object"}}},
          "required": ["code", "message"]}


BINARY = {"type": "string", "format": "binary"}
# The other errors: the Error schema for JSON requests, its detail in a google.rpc.Status for
# protobuf ones (api/middleware.py).
ERRORS = {401: "no key or an unknown one", 403: "the key lacks the ingest scope",
          413: "the body, or the spans, log records or values it holds, over the limits",
          415: "neither protobuf nor JSON", 429: "over the key's rate limit"}


def _responses(answer: dict[str, Any], description: str) -> dict[Any, Any]:
    """OTLP answers in the request's encoding: each status documented in both."""
    status = "google.rpc.Status: the body is not an export request"
    return {(200, JSON): OpenApiResponse(response=answer, description=description),
            (200, PROTOBUF): OpenApiResponse(response=BINARY, description=description),
            (400, JSON): OpenApiResponse(response=STATUS, description=status),
            (400, PROTOBUF): OpenApiResponse(response=BINARY, description=status),
            **{(code, JSON): ErrorSerializer for code in ERRORS},
            **{(code, PROTOBUF): OpenApiResponse(response=BINARY, description="google.rpc.Status: " + why)
               for code, why in ERRORS.items()}}


class _RawBody(BaseParser):
    """The body as bytes, decompressed within the ingest size limit, with its encoding."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict[str, Any] | None = None) -> Any:
        request = (parser_context or {})["request"]
        encoding = request.META.get("HTTP_CONTENT_ENCODING", "").strip().lower()
        body = read_limited(stream, encoding, settings.INGEST_MAX_BODY_BYTES) if stream is not None else b""
        return {"encoding": self.media_type, "body": body}


class ProtobufBody(_RawBody):
    media_type = PROTOBUF


class JsonBody(_RawBody):
    media_type = JSON


class _OtlpView(APIView):
    """Decode an export request (`decode`), map it to events (`events`), store them as one batch,
    answer OTLP's response for the signal (`logs`) in the request's encoding."""

    required_scope = "ingest"
    parser_classes = [ProtobufBody, JsonBody]
    logs = False
    decode: Callable[[bytes, str, Budget], list[Any]]
    events: Callable[[list[Any]], list[dict[str, Any]]]

    def post(self, request: Request) -> HttpResponse:
        data = request.data
        if not data:  # no body at all: an empty export, answered in the encoding it declared
            encoding = JSON if request.content_type.startswith(JSON) else PROTOBUF
            return HttpResponse(encode_response(0, "", encoding, logs=self.logs), content_type=encoding)
        if not isinstance(data, dict) or "body" not in data:
            raise exceptions.UnsupportedMediaType(request.content_type)
        encoding = data["encoding"]
        budget = Budget(items=settings.OTLP_MAX_ITEMS, values=settings.OTLP_MAX_VALUES,
                        item_name="log records" if self.logs else "spans")
        try:
            items = self.decode(data["body"], encoding, budget)
        except OtlpDecodeError as exc:
            return HttpResponse(encode_status(INVALID_ARGUMENT, str(exc), encoding), status=400,
                                content_type=encoding)
        except OverBudget as exc:
            raise PayloadTooLarge(str(exc)) from None
        rejected, message = _store(request, self.events(items))
        return HttpResponse(encode_response(rejected, message, encoding, logs=self.logs), content_type=encoding)


@extend_schema_view(post=extend_schema(
    summary="Receive OpenTelemetry traces (OTLP/HTTP)",
    description="An OTLP ExportTraceServiceRequest, protobuf or JSON, gzip welcome, authenticated by "
    "`Authorization: Bearer <key>` (ingest scope). GenAI spans become session, turn and tool_call "
    "events, stored before the answer (docs/otlp.md); the answer is OTLP's ExportTraceServiceResponse in "
    "the request's encoding.",
    request={PROTOBUF: BINARY, JSON: {"type": "object"}},
    responses=_responses(EXPORT_RESPONSE, "ExportTraceServiceResponse (partial_success when spans were "
                         "rejected), in the request's encoding"),
))
class OtlpTracesView(_OtlpView):
    decode = staticmethod(decode_traces)
    events = staticmethod(genai_events)


@extend_schema_view(post=extend_schema(
    summary="Receive OpenTelemetry logs (OTLP/HTTP)",
    description="An OTLP ExportLogsServiceRequest, protobuf or JSON, gzip welcome, authenticated by "
    "`Authorization: Bearer <key>` (ingest scope). Claude Code's log events (api_request, tool_result, "
    "tool_decision, user_prompt) become session, turn and tool_call events, stored before the answer "
    "(docs/otlp.md); the answer is OTLP's ExportLogsServiceResponse in the request's encoding.",
    request={PROTOBUF: BINARY, JSON: {"type": "object"}},
    responses=_responses(EXPORT_LOGS_RESPONSE, "ExportLogsServiceResponse (partial_success when log records "
                         "were rejected), in the request's encoding"),
))
class OtlpLogsView(_OtlpView):
    logs = True
    decode = staticmethod(decode_logs)
    events = staticmethod(claude_code_events)


def _store(request: Request, events: list[dict[str, Any]]) -> tuple[int, str]:
    """Validate and store `events` as one batch; (rejected count, why the first was)."""
    if not events:
        return 0, ""
    outcome = ingest_events(api_key=request.auth, raw_events=events, kind=BatchKind.OTLP)
    failed = [result for result in outcome.results if result["status"] == "rejected"]
    if not failed:
        return 0, ""
    return len(failed), f"{len(failed)} events rejected; the first: {failed[0]['path']}: {failed[0]['reason']}"
