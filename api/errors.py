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


def _flatten(errors: Any, path: str = "") -> list[tuple[str, str]]:
    """DRF's nested error structure as (JSON path, message) pairs: tools[1].name -> "..."."""
    if isinstance(errors, dict):
        pairs = []
        for key, value in errors.items():
            key = str(key)
            if key == "non_field_errors":
                child = path
            elif key.isdigit():
                child = f"{path}[{key}]"
            else:
                child = f"{path}.{key}" if path else key
            pairs.extend(_flatten(value, child))
        return pairs
    if isinstance(errors, list):
        if all(isinstance(item, str) for item in errors):
            return [(path or "body", " ".join(str(item) for item in errors))]
        return [pair for i, item in enumerate(errors) if item for pair in _flatten(item, f"{path}[{i}]")]
    return [(path or "body", str(errors))]


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    response = exception_handler(exc, context)
    if response is None or not isinstance(exc, exceptions.APIException):
        return response
    if isinstance(response.data, dict) and "detail" in response.data:
        detail = response.data["detail"]
        response.data = {"detail": str(detail), "code": getattr(detail, "code", exc.default_code)}
    elif isinstance(exc, exceptions.ValidationError):
        errors = dict(_flatten(response.data))
        field, message = next(iter(errors.items()))
        response.data = {"detail": f"{field}: {message}", "code": "invalid", "field": field, "errors": errors}
    if getattr(exc, "field", None):
        response.data["field"] = exc.field
    if isinstance(exc, exceptions.Throttled) and exc.wait is not None:
        response["Retry-After"] = str(max(1, math.ceil(exc.wait)))
    return response
