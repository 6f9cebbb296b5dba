"""GET /api/v1/policy: the published policy document under a label, with ETag revalidation.

Agents poll this endpoint; a poll whose ETag is still current gets a 304 without a database
query (key verification and the document both come from the shared cache). Every answer says
`Cache-Control: private, max-age=0, must-revalidate`: a rollback must reach agents on their next
poll, so no copy may be reused without asking, and the 304 makes asking cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpResponse, HttpResponseNotModified
from django.utils.http import parse_etags
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.request import Request
from rest_framework.views import APIView

from api.auth import ApiKeyAuthentication
from api.errors import InvalidInput
from api.keycache import api_key_verify_cached_with
from api.schema import POLICY_DOCUMENT_SCHEMA
from api.serializers import ErrorSerializer
from toolscope.policies.services.documents import PRODUCTION_LABEL
from toolscope.policies.services.polls import polls
from toolscope.policies.services.serving import LABEL_PATTERN, policy_served, policy_served_keys
from toolscope.telemetry.models import ApiKey

CACHE_CONTROL = "private, max-age=0, must-revalidate"


def _label(request: Request) -> str:
    return request.query_params.get("label", PRODUCTION_LABEL)


def _served_keys(label: str) -> Callable[[int], list[str]] | None:
    if not LABEL_PATTERN.fullmatch(label):
        return None  # the view answers 400 without reading anything
    return lambda project_id: policy_served_keys(project_id=project_id, label=label)


class CachedApiKeyAuthentication(ApiKeyAuthentication):
    """ApiKeyAuthentication whose verification is served from the shared cache (api/keycache.py).

    The same cache round trip reads the entries of the label asked for, so a warm poll costs one
    round trip in all; the view finds them on the request.
    """

    def verify(self, request: Request, raw: str) -> ApiKey | None:
        api_key, request.policy_prefetched = api_key_verify_cached_with(
            raw=raw, also=_served_keys(_label(request))
        )
        return api_key


class NoNegotiation(BaseContentNegotiation):
    """The answer is JSON bytes (or no body), errors are JSON: parsing Accept would change nothing."""

    def select_parser(self, request: Request, parsers: list) -> Any:
        return parsers[0] if parsers else None

    def select_renderer(self, request: Request, renderers: list, format_suffix: str | None = None) -> tuple:
        return renderers[0], renderers[0].media_type


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    """If-None-Match compares weakly (RFC 9110 13.1.2): W/"x" matches "x"."""
    if not if_none_match:
        return False
    candidates = parse_etags(if_none_match)
    return "*" in candidates or etag in (candidate.removeprefix("W/") for candidate in candidates)


def _cacheable(response: HttpResponse, etag: str) -> HttpResponse:
    response["ETag"] = etag
    response["Cache-Control"] = CACHE_CONTROL
    response["Vary"] = "Authorization"
    return response


class PolicyView(APIView):
    authentication_classes = [CachedApiKeyAuthentication]
    content_negotiation_class = NoNegotiation
    required_scope = "policy:read"

    @extend_schema(
        summary="Fetch the published policy",
        description="The document of the version `label` points at (docs/policy.md), for the key's "
        "project. Send the last `ETag` as `If-None-Match` to get a `304` while it is current. "
        "Every answer is `Cache-Control: private, max-age=0, must-revalidate`: revalidate before each "
        "reuse, so a rollback reaches the agent on its next fetch.",
        parameters=[
            OpenApiParameter("label", {"type": "string", "pattern": LABEL_PATTERN.pattern},
                             description="production (default), staging, or a custom label: 1 to 64 letters, "
                             "digits, '-' or '_'."),
            OpenApiParameter("If-None-Match", str, OpenApiParameter.HEADER, description="A previous ETag."),
        ],
        # The same ApiKey scheme as every endpoint; only the verification is cached.
        auth=[{"ApiKey": []}],
        responses={
            200: OpenApiResponse(POLICY_DOCUMENT_SCHEMA, description="The document; `ETag` header set."),
            304: OpenApiResponse(description="The ETag sent is still current; no body."),
            400: ErrorSerializer, 401: ErrorSerializer, 403: ErrorSerializer,
            404: OpenApiResponse(ErrorSerializer, description="No such label, or nothing published yet."),
            429: ErrorSerializer,
        },
    )
    def get(self, request: Request) -> HttpResponse:
        label = _label(request)
        if not LABEL_PATTERN.fullmatch(label):
            raise InvalidInput("A label is 1 to 64 letters, digits, '-' or '_'.", field="label")
        api_key = request.auth
        served = policy_served(project_id=api_key.project_id, project_slug=api_key.project.slug, label=label,
                               prefetched=getattr(request, "policy_prefetched", None))
        if served.missing:
            raise exceptions.NotFound(served.missing)
        polls.seen(key_id=api_key.pk, project_id=api_key.project_id, label=label, etag=served.etag)
        if etag_matches(request.headers.get("If-None-Match"), served.etag):
            return _cacheable(HttpResponseNotModified(), served.etag)
        return _cacheable(HttpResponse(served.body, content_type="application/json"), served.etag)
