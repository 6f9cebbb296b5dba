"""API-key authentication: `Authorization: Bearer <key>`; the project is always the key's."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from toolscope.telemetry.models import ApiKey
from toolscope.telemetry.services.api_keys import api_key_verify


class ApiKeyAuthentication(BaseAuthentication):
    keyword = b"bearer"

    def authenticate(self, request: Request) -> tuple[None, ApiKey] | None:
        header = get_authorization_header(request).split()
        if not header:
            return None
        if header[0].lower() != self.keyword or len(header) != 2:
            raise exceptions.AuthenticationFailed("Send the API key as 'Authorization: Bearer <key>'.")
        api_key = self.verify(request, header[1].decode("latin-1"))
        if api_key is None:
            raise exceptions.AuthenticationFailed("The API key is unknown or revoked.")
        return (None, api_key)

    def verify(self, request: Request, raw: str) -> ApiKey | None:
        """The active key `raw` is; subclasses may answer from a cache."""
        return api_key_verify(raw=raw)

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="toolscope"'


class HasScope(BasePermission):
    """Requires an API key holding `required_scope` (set by the view)."""

    def has_permission(self, request: Request, view: Any) -> bool:
        api_key = request.auth
        if not isinstance(api_key, ApiKey):
            raise exceptions.NotAuthenticated("An API key is required: 'Authorization: Bearer <key>'.")
        scope = view.required_scope
        if not api_key.has_scope(scope):
            keys = reverse("dashboard:keys", args=[api_key.project.slug])
            self.message = (f"This API key lacks the '{scope}' scope. A project admin makes a key with it on the "
                            f"dashboard's Keys page ({keys}).")
            return False
        return True
