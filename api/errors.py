"""Every API error is JSON: {"detail": "...", "code": "..."}; 429s carry Retry-After."""

from __future__ import annotations

import math
from typing import Any

from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler


class InvalidInput(exceptions.APIException):
    """A 400 that names the offending field by its JSON path."""

    status_code = 400
    default_code = "invalid"

    def __init__(self, detail: str, field: str | None = None) -> None:
        super().__init__(detail)
        self.field = field


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    response = exception_handler(exc, context)
    if response is None or not isinstance(exc, exceptions.APIException):
        return response
    if isinstance(response.data, dict) and "detail" in response.data:
        detail = response.data["detail"]
        response.data = {"detail": str(detail), "code": getattr(detail, "code", exc.default_code)}
    elif isinstance(exc, exceptions.ValidationError):
        response.data = {"detail": "The body is invalid.", "code": "invalid", "errors": response.data}
    if getattr(exc, "field", None):
        response.data["field"] = exc.field
    if isinstance(exc, exceptions.Throttled) and exc.wait is not None:
        response["Retry-After"] = str(max(1, math.ceil(exc.wait)))
    return response
