"""POST /api/v1/policy/resolve and POST /api/v1/tools/search: the engine, served."""

from __future__ import annotations

import hashlib
import json

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView
from toolscope_agent.engine.render import FORMATS

from api.serializers import ErrorSerializer, IdField, StrictCharField, StrictIntegerField
from toolscope.policies.services.resolve import (
    MAX_MESSAGE_LENGTH,
    MAX_QUERY_LENGTH,
    PolicyNotPublished,
    policy_resolve,
    tools_embeddings,
    tools_search,
)

READ_ERRORS = {400: ErrorSerializer, 401: ErrorSerializer, 403: ErrorSerializer, 404: ErrorSerializer}


class LabelField(StrictCharField, serializers.SlugField):
    pass


class AdvertisedToolInput(serializers.Serializer):
    """A tool the agent advertises: a full definition, or a reference to a catalog tool."""

    # Stated in the description as validated (found by the API fuzzer: blank was refused, undocumented).
    name = IdField()
    schema_hash = StrictCharField(required=False, min_length=1, max_length=64,
                                  help_text="The definition's hash, as in a turn event's tools.")
    source = StrictCharField(required=False, allow_blank=True, max_length=200)
    description = StrictCharField(required=False, allow_blank=True)
    input_schema = serializers.DictField(required=False, help_text="With it, the definition is used as sent.")


class ResolveInput(serializers.Serializer):
    message = StrictCharField(
        allow_blank=True, required=False, default="", max_length=MAX_MESSAGE_LENGTH,
        help_text=f"The task message the context rules look at; at most {MAX_MESSAGE_LENGTH:,} characters.")
    state = serializers.DictField(required=False, allow_null=True, default=None,
                                  help_text="The session's state as returned by the previous call.")
    format = serializers.ChoiceField(
        choices=FORMATS, default="openai",
        help_text="`openai` (Chat Completions), `anthropic`, `openai_responses` (the Responses API) or `plain`. "
                  "A policy with `tool_search.provider_search` is rendered as the provider's own deferred loading "
                  "in `anthropic` and `openai_responses`: its search tool, the tools sent, and every other tool "
                  "with `defer_loading` (Responses: a policy group's inside a namespace), so the list stays put "
                  "and the prompt cache with it. With `tool_search.defer_loading` instead, the same list keeps "
                  "toolscope's `tool_search` (Responses: a client-executed `tool_search`), whose answers the "
                  "agent returns as `tool_reference` blocks (Anthropic) or a `tool_search_output` (Responses).")
    label = LabelField(default="production", max_length=64)
    tools = serializers.ListField(
        child=AdvertisedToolInput(), required=False, allow_null=True, default=None, max_length=2000,
        help_text="The tools the agent advertises: the catalog is then these names, each in the "
        "definition given, or the catalog's of that schema_hash, or of that source.")
    source = StrictCharField(
        required=False, allow_null=True, allow_blank=True, default=None, max_length=200,
        help_text="The source (MCP server, agent) whose definitions to use where several sources define "
        "a name; without it, the most recently seen definition.")


class ResolveOutput(serializers.Serializer):
    label = serializers.CharField()
    version = serializers.IntegerField()
    mode = serializers.CharField()
    tools = serializers.ListField(child=serializers.DictField(), help_text="Ready for the provider's `tools`.")
    menu = serializers.CharField(allow_null=True)
    reasons = serializers.DictField(child=serializers.CharField())
    state = serializers.DictField()
    tokens = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="selected / all / saved: schema tokens of this selection vs every allowed tool.",
    )


class SearchInput(serializers.Serializer):
    query = StrictCharField(min_length=1, max_length=MAX_QUERY_LENGTH,
                            help_text=f"What the tool should do; at most {MAX_QUERY_LENGTH} characters.")
    top_k = StrictIntegerField(default=8, help_text="Clamped to 1..20.")
    label = LabelField(default="production", max_length=64,
                       help_text="Rank as this label's version does (its ranker and learned history).")


class SearchHitOutput(serializers.Serializer):
    name = serializers.CharField()
    score = serializers.FloatField()
    summary = serializers.CharField()
    parameters = serializers.CharField(help_text="e.g. {path: string, offset?: integer}")
    matched = serializers.BooleanField(
        help_text="Whether the query matched this tool. A search always answers `top_k` tools (or the whole "
                  "catalog): tools the query did not match fill the rest, nearest by spelling, last.")


class SearchOutput(serializers.Serializer):
    ranking = serializers.CharField(
        help_text="What ranked: the version's ranker (`bm25f-2`, `fuzzy-1`), plus `+semantic` when its "
                  "semantic fusion ran (a version published with semantic search on, and this server has "
                  "the model it was published with).")
    confident = serializers.BooleanField(
        help_text="False when no result matched the query: the answer is the catalog's nearest tools, not a find.")
    results = SearchHitOutput(many=True)


class ResolveView(APIView):
    required_scope = "policy:read"

    @extend_schema(
        summary="Resolve the tools to send this turn",
        description="Applies the labelled policy version to the project's catalog, the session state "
        "and the task message with the same engine as the SDK, and returns the tools rendered for "
        "the provider, the state to keep, and the schema tokens saved against sending every tool.",
        request=ResolveInput, responses={200: ResolveOutput, **READ_ERRORS},
        examples=[OpenApiExample("A coding task", request_only=True, value={
            "message": "Fix the failing test in tests/test_api.py", "state": None, "format": "anthropic"})],
    )
    def post(self, request: Request) -> Response:
        data = _valid(ResolveInput, request)
        try:
            body = policy_resolve(project=request.auth.project, label=data["label"], message=data["message"],
                                  state=data["state"], output_format=data["format"],
                                  advertised=data["tools"], source=data["source"])
        except PolicyNotPublished as exc:
            raise exceptions.NotFound(str(exc)) from None
        return Response(body)


class ToolSearchView(APIView):
    required_scope = "policy:read"

    @extend_schema(
        summary="Search the catalog",
        description="What a `tool_search` meta-tool answers: tools ranked as the label's version "
        "ranks them (BM25F over name, description and parameters, plus the project's learned history "
        "when the version turns it on; docs/policy.md), each with a one-line parameter summary. Never empty "
        "while the catalog has tools: `confident` says whether any result matched.",
        request=SearchInput, responses={200: SearchOutput, **READ_ERRORS},
        examples=[OpenApiExample("Git tools", request_only=True, value={"query": "git diff", "top_k": 5})],
    )
    def post(self, request: Request) -> Response:
        data = _valid(SearchInput, request)
        return Response(tools_search(project=request.auth.project, query=data["query"], top_k=data["top_k"],
                                     label=data["label"]))


class EmbeddingsQuery(serializers.Serializer):
    label = LabelField(default="production", max_length=64, help_text="The label whose version's model to serve.")


class EmbeddingsOutput(serializers.Serializer):
    model = serializers.CharField(
        allow_null=True, help_text="`<directory>@<12 hex of its weights' SHA-256>`; null when the label's version "
        "does not rank by meaning with this server's model (then `vectors` is empty).")
    dimension = serializers.IntegerField()
    vectors = serializers.DictField(
        child=serializers.CharField(),
        help_text="SHA-256 (hex) of each embedded tool text (name words, description, parameter names: "
                  "toolscope_agent.semantic.tool_text) -> its unit vector, base64 of little-endian float32.")


class ToolEmbeddingsView(APIView):
    required_scope = "policy:read"

    @extend_schema(
        summary="The catalog's tool embeddings",
        description="For an agent that ranks tool_search by meaning itself with a local copy of the model "
        "(the SDK's `ToolSelector(semantic=...)`): the stored embedding of each catalog definition, computed "
        "once by a worker, so the agent embeds only its queries. Served with an ETag; `If-None-Match` "
        "answers 304 while the catalog and model are unchanged.",
        parameters=[EmbeddingsQuery],
        responses={200: EmbeddingsOutput, 304: None, **READ_ERRORS},
    )
    def get(self, request: Request) -> Response:
        if request.query_params.get("label", None) == "":  # a form-style blank would read as the default
            raise exceptions.ValidationError({"label": ["This field may not be blank."]})
        query = EmbeddingsQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        body = tools_embeddings(project=request.auth.project, label=query.validated_data["label"])
        etag = '"' + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:32] + '"'
        if etag in request.headers.get("If-None-Match", ""):
            return Response(status=304, headers={"ETag": etag})
        return Response(body, headers={"ETag": etag})


def _valid(serializer_class: type[serializers.Serializer], request: Request) -> dict:
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data
