"""Every answer under /api/ is JSON, whatever went wrong and wherever it went wrong.

DRF renders what its views raise (api/errors.py). What it never sees is answered here, as
{"detail", "code"} with the same status Django would have sent:

- a path no view matches (Django's 404: under DEBUG an HTML debug page);
- an exception nothing handled: 500, with a request id that the log record of the exception
  carries too, so an operator finds the traceback a client quotes;
- the database unreachable (refused connection, a restart, a connection that died): 503 with
  Retry-After, so that clients back off and send again instead of treating it as a bug;
- any other error page Django renders itself (400 for a disallowed host, a 500 raised by a
  middleware, ...).

Every error answer under /api/ carries X-Request-ID: the client's own when it sent a sane one,
else a new one. Successful answers do not: the policy poll's 304 is answered in front of Django
(api/fastpath.py) and must not differ from Django's.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import traceback
import uuid
from collections.abc import Callable
from http import HTTPStatus

from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.core.signals import got_request_exception
from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

from toolscope.telemetry.otlp.decode import encode_status
from toolscope.telemetry.services.quarantine import failure_reason

logger = logging.getLogger(__name__)

API_PREFIX = "/api/"
REQUEST_ID_HEADER = "X-Request-ID"
# Letters, digits and a few separators: enough for UUIDs, ULIDs and trace ids, nothing that could
# forge a log line or a header.
SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
# How long a client should wait before retrying while the database is unreachable: a restart or a
# failover takes seconds.
DATABASE_RETRY_AFTER_SECONDS = 5
# Django's error pages -> the code of the JSON body that replaces them.
CODES = {400: "bad_request", 403: "permission_denied", 404: "not_found", 405: "method_not_allowed",
         413: "payload_too_large", 415: "unsupported_media_type", 500: "server_error",
         503: "database_unavailable"}
# Exceptions Django answers with a client error page -> its status (RequestDataTooBig is a
# SuspiciousOperation: it comes first).
CLIENT_ERRORS = ((Http404, 404), (PermissionDenied, 403), (RequestDataTooBig, 413), (SuspiciousOperation, 400))


def is_api(request: HttpRequest) -> bool:
    return request.path_info.startswith(API_PREFIX)


def request_id(request: HttpRequest) -> str:
    """This request's id: the client's X-Request-ID when sane, else a new one (kept for the request)."""
    found = getattr(request, "request_id", None)
    if found is None:
        sent = request.META.get("HTTP_X_REQUEST_ID", "")
        found = sent if SANE_REQUEST_ID.fullmatch(sent) else uuid.uuid4().hex
        request.request_id = found
    return found


def error_body(status: int, detail: str | None = None) -> dict[str, str]:
    return {"detail": detail or f"{HTTPStatus(status).phrase}.", "code": CODES.get(status, "error")}


def database_unavailable(request: HttpRequest, exc: BaseException) -> HttpResponse:
    rid = request_id(request)
    logger.error("database unavailable (request id %s): %s", rid, exc, extra={"request_id": rid})
    body = error_body(503, "The database is unavailable; retry later.")
    response = JsonResponse({**body, "request_id": rid}, status=503)
    response["Retry-After"] = str(DATABASE_RETRY_AFTER_SECONDS)
    return response


def server_error(request: HttpRequest, exc: BaseException | None) -> HttpResponse:
    rid = request_id(request)
    if isinstance(exc, DatabaseError):
        # PostgreSQL's detail and Django's message can quote the row: the reason and the stack only.
        logger.error("unhandled exception (request id %s) on %s %s: %s\n%s", rid, request.method, request.path,
                     failure_reason(exc), "".join(traceback.format_tb(exc.__traceback__)),
                     extra={"request_id": rid})
    elif exc is not None:
        logger.error("unhandled exception (request id %s) on %s %s", rid, request.method, request.path,
                     exc_info=(type(exc), exc, exc.__traceback__), extra={"request_id": rid})
    detail = f"Internal server error; quote the request id {rid} when reporting it."
    return JsonResponse({**error_body(500, detail), "request_id": rid}, status=500)


def exception_response(request: HttpRequest, exc: BaseException) -> HttpResponse:
    """The JSON answer for an exception that reached Django from an API view."""
    if isinstance(exc, OperationalError | InterfaceError):
        return database_unavailable(request, exc)
    for kind, status in CLIENT_ERRORS:
        if isinstance(exc, kind):
            return JsonResponse(error_body(status), status=status)
    return server_error(request, exc)


def unhandled_response(request: HttpRequest) -> HttpResponse:
    """The JSON 500 (or what the exception calls for) of a request Django answered with an error page."""
    exc = getattr(request, "unhandled_exception", None)
    return server_error(request, None) if exc is None else exception_response(request, exc)


def _remember_exception(sender: object, request: HttpRequest | None = None, **kwargs: object) -> None:
    # Django turns an exception raised inside another middleware into an HTML 500 before this
    # middleware sees the response; the signal it sends first is the only sight of the exception.
    if request is not None:
        request.unhandled_exception = sys.exc_info()[1]


got_request_exception.connect(_remember_exception, dispatch_uid="api.middleware.remember_exception")


class ApiErrorMiddleware:
    """First in MIDDLEWARE, so that it sees every answer the others produce."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code < 400 or not is_api(request):
            return response
        # JSON already, or an OTLP error (a google.rpc.Status in protobuf, api/views/otlp.py).
        if not response.get("Content-Type", "").startswith(("application/json", PROTOBUF)):
            response = self._as_json(request, response)
        if _wants_protobuf(request) and response["Content-Type"].startswith("application/json"):
            response = _as_status(response)
        response[REQUEST_ID_HEADER] = request_id(request)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        return exception_response(request, exception) if is_api(request) else None

    def _as_json(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if response.status_code >= 500 or getattr(request, "unhandled_exception", None) is not None:
            return unhandled_response(request)
        replaced = JsonResponse(error_body(response.status_code), status=response.status_code)
        for header in ("Allow", "Retry-After", "WWW-Authenticate"):
            if header in response:
                replaced[header] = response[header]
        return replaced


OTLP_PREFIX = "/api/v1/otlp/"
PROTOBUF = "application/x-protobuf"
# HTTP status -> google.rpc.Code, as OTLP/HTTP clients read a failed export's body.
RPC_CODES = {400: 3, 401: 16, 403: 7, 404: 5, 405: 12, 413: 8, 415: 3, 429: 8, 500: 13, 503: 14}
UNKNOWN = 2


def _wants_protobuf(request: HttpRequest) -> bool:
    """An OTLP export sent as protobuf: its errors are google.rpc.Status messages in protobuf."""
    return request.path_info.startswith(OTLP_PREFIX) and request.META.get("CONTENT_TYPE", "").startswith(PROTOBUF)


def _as_status(response: HttpResponse) -> HttpResponse:
    """The JSON error `response` as a protobuf google.rpc.Status (same status, same headers)."""
    try:
        detail = str(json.loads(response.content).get("detail", ""))
    except (ValueError, AttributeError):
        detail = ""
    code = RPC_CODES.get(response.status_code, UNKNOWN)
    replaced = HttpResponse(encode_status(code, detail or HTTPStatus(response.status_code).phrase, PROTOBUF),
                            status=response.status_code, content_type=PROTOBUF)
    for header in ("Allow", "Retry-After", "WWW-Authenticate"):
        if header in response:
            replaced[header] = response[header]
    return replaced


def handler404(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's 404 outside DEBUG: JSON under /api/, the usual page elsewhere."""
    if is_api(request):
        return JsonResponse(error_body(404), status=404)
    return defaults.page_not_found(request, exception)


def handler500(request: HttpRequest) -> HttpResponse:
    """Django's 500 outside DEBUG: JSON under /api/, logged with its request id."""
    return unhandled_response(request) if is_api(request) else defaults.server_error(request)
