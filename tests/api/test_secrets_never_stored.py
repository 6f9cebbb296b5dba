"""Secrets never stored: 20+ kinds of fake secret, placed in every field of every way in
(ingest events, the three transcript formats, PUT /tools, OTLP traces and logs), processed by the
real processing service, and then not one of them in a dump of the whole database (pg_dump)."""

from __future__ import annotations

import json
import os
import random
import string
import subprocess

import pytest
from django.db import connection
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Status

from tests.api.test_otlp import START, TRACE, request, span
from tests.factories import make_key
from tests.secret_corpus import ORDINARY_TEXTS, SecretKind, secret_kinds
from toolscope.policies.models import Tool
from toolscope.telemetry.models import IngestBatch, QuarantinedEvent, Session, ToolCall, Turn
from toolscope.telemetry.services.processing import batch_process

KINDS = secret_kinds()
_rng = random.Random(12)
# Recognisable by their key's name only: no text rule could tell them from other words.
STRUCTURED_PASSWORD = "correct horse " + "".join(_rng.choices(string.ascii_lowercase, k=12))
STRUCTURED_AWS_SECRET = "".join(_rng.choices(string.ascii_letters + string.digits + "+/", k=40))
ENV_VALUE = "only-in-the-env-argument-" + "".join(_rng.choices(string.digits, k=6))  # a tool's `redact` key
NOT_SECRET = ("db.internal:5432/app", "deploy with", "Authorization: Bearer", "Run a command", "$ cat .env")


def in_id(kind: SecretKind, prefix: str, index: int, limit: int = 100) -> str:
    """An id holding the secret when it fits, glued with "_" as real ids are."""
    return f"{prefix}_{kind.text}" if kind.short and len(kind.text) <= limit else f"{prefix}-{index}"


def arguments_for(kind: SecretKind) -> dict:
    return {kind.text: "as a key", "command": f"deploy --key {kind.text}",
            "nested": [{"password": STRUCTURED_PASSWORD, "aws_secret_access_key": STRUCTURED_AWS_SECRET}],
            "env": {"TOKEN": ENV_VALUE}}


def schema_for(kind: SecretKind) -> dict:
    return {"type": "object", "properties": {
        "command": {"type": "string", "description": f"e.g. {kind.text}", "default": kind.text},
        "password": {"type": "string", "format": "password"},
        kind.text: {"type": "string"}}}


def ingest_events_for(kind: SecretKind, i: int) -> list[dict]:
    session = in_id(kind, "session", i)
    tool = in_id(kind, "tool", i)
    metadata = {kind.text: kind.text, "note": f"deploy with {kind.text}",
                "db": {"password": STRUCTURED_PASSWORD}, "aws_secret_access_key": STRUCTURED_AWS_SECRET}
    return [
        {"type": "session", "id": session, "agent_name": in_id(kind, "agent", i), "model": "gpt-4o",
         "metadata": metadata},
        {"type": "turn", "id": in_id(kind, "turn", i), "session_id": session, "index": 0,
         "tools": [{"name": tool, "description": f"Deploys with {kind.text}", "input_schema": schema_for(kind)},
                   {"name": "bash", "description": "Run a command", "input_schema": {"type": "object"}}],
         "system_prompt": f"Use {kind.text} for the deploy.", "task_message": f"deploy with {kind.text}",
         "messages": [{"role": "user", "content": f"deploy with {kind.text}"},
                      {"role": "assistant", "content": f"I will use {kind.text}."}]},
        {"type": "tool_call", "id": in_id(kind, "call", i), "session_id": session, "turn_index": 0,
         "call_id": in_id(kind, "call", i), "tool_name": "bash", "arguments": arguments_for(kind),
         "output": f"$ cat .env\n{kind.text}\n", "error": f"failed with {kind.text}", "status": "error"},
        {"type": "tool_call", "id": in_id(kind, "call2", i), "session_id": session, "turn_index": 0,
         "tool_name": tool, "arguments": arguments_for(kind), "output": f"used {kind.text}"},
        {"type": "catalog", "id": in_id(kind, "catalog", i),
         "tools": [{"name": in_id(kind, "catalog_tool", i), "description": f"Holds {kind.text}",
                    "input_schema": schema_for(kind)}]},
    ]


def openai_chat(kind: SecretKind, i: int) -> dict:
    call, tool = in_id(kind, "call", i, 60), in_id(kind, "tool", i, 60)
    return {
        "format": "openai_chat", "session_id": in_id(kind, "chat", i), "agent_name": "coder", "model": "gpt-4o",
        "metadata": {kind.text: kind.text, "db": {"password": STRUCTURED_PASSWORD}},
        "tools": [{"type": "function", "function": {"name": tool, "description": f"Deploys with {kind.text}",
                                                    "parameters": schema_for(kind)}}],
        "messages": [
            {"role": "system", "content": f"Use {kind.text} for the deploy."},
            {"role": "user", "content": f"deploy with {kind.text}"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": call, "type": "function",
                 "function": {"name": tool, "arguments": json.dumps(arguments_for(kind))}}]},
            {"role": "tool", "tool_call_id": call, "content": f"$ cat .env\n{kind.text}\n"},
            {"role": "assistant", "content": f"Deployed with {kind.text}."},
        ],
    }


def anthropic(kind: SecretKind, i: int) -> dict:
    call, tool = in_id(kind, "toolu", i, 60), in_id(kind, "tool", i, 60)
    return {
        "format": "anthropic", "session_id": in_id(kind, "claude", i), "agent_name": "coder",
        "model": "claude-sonnet-4-5", "metadata": {kind.text: kind.text, "db": {"password": STRUCTURED_PASSWORD}},
        "system": f"Use {kind.text} for the deploy.",
        "tools": [{"name": tool, "description": f"Deploys with {kind.text}", "input_schema": schema_for(kind)}],
        "messages": [
            {"role": "user", "content": f"deploy with {kind.text}"},
            {"role": "assistant", "content": [
                {"type": "text", "text": f"Calling with {kind.text}"},
                {"type": "tool_use", "id": call, "name": tool, "input": arguments_for(kind)}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": call, "content": f"$ cat .env\n{kind.text}\n",
                 "is_error": True}]},
            {"role": "assistant", "content": [{"type": "text", "text": f"Deployed with {kind.text}."}]},
        ],
    }


def openai_responses(kind: SecretKind, i: int) -> dict:
    call, tool = in_id(kind, "call", i, 60), in_id(kind, "tool", i, 60)
    return {
        "format": "openai_responses", "session_id": in_id(kind, "resp", i), "agent_name": "coder",
        "model": "gpt-4.1", "metadata": {kind.text: kind.text, "db": {"password": STRUCTURED_PASSWORD}},
        "instructions": f"Use {kind.text} for the deploy.",
        "tools": [{"type": "function", "name": tool, "description": f"Deploys with {kind.text}",
                   "parameters": schema_for(kind)}],
        "input": [
            {"role": "user", "content": f"deploy with {kind.text}"},
            {"type": "function_call", "id": f"fc_{i}", "call_id": call, "name": tool,
             "arguments": json.dumps(arguments_for(kind))},
            {"type": "function_call_output", "call_id": call, "output": f"$ cat .env\n{kind.text}\n"},
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": f"Deployed with {kind.text}."}]},
        ],
    }


def pg_dump() -> str:
    """The whole test database, schema and data, as pg_dump writes it."""
    settings = connection.settings_dict
    env = {**os.environ, "PGPASSWORD": settings.get("PASSWORD") or ""}
    command = ["pg_dump", "--no-owner", "-h", settings["HOST"] or "127.0.0.1", "-p", str(settings["PORT"] or 5432),
               "-U", settings["USER"], settings["NAME"]]
    return subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout


def leaked(dump: str) -> list[str]:
    secrets = [(kind.name, s) for kind in KINDS for s in kind.secrets]
    secrets += [("structured password", STRUCTURED_PASSWORD), ("structured aws secret", STRUCTURED_AWS_SECRET),
                ("redact setting", ENV_VALUE)]
    return [name for name, secret in secrets if secret in dump or json.dumps(secret)[1:-1] in dump]


@pytest.mark.django_db(transaction=True)
def test_no_secret_of_any_kind_reaches_the_database(project):
    assert connection.vendor == "postgresql"
    api = make_client(project)
    Tool.objects.create(project=project, name="bash", redact=["env"])
    events = [event for i, kind in enumerate(KINDS) for event in ingest_events_for(kind, i)]
    response = api.post_json("/api/v1/ingest", {"events": events})
    assert response.status_code == 202, response.content
    assert response.json()["rejected"] == 0
    for build in (openai_chat, anthropic, openai_responses):
        for i, kind in enumerate(KINDS):
            response = api.post_json("/api/v1/transcripts", build(kind, i))
            assert response.status_code == 202, (build.__name__, kind.name, response.content)
    tools = [{"name": in_id(kind, "put_tool", i), "description": f"Holds {kind.text}",
              "input_schema": schema_for(kind)} for i, kind in enumerate(KINDS)]
    assert api.put("/api/v1/tools", {"tools": tools}, format="json").status_code == 200

    for batch in IngestBatch.objects.order_by("pk"):
        batch_process(batch_id=batch.pk)

    assert set(IngestBatch.objects.values_list("status", flat=True)) == {"done"}
    assert not QuarantinedEvent.objects.exists()
    assert Session.objects.count() == 4 * len(KINDS)
    assert ToolCall.objects.count() == 5 * len(KINDS)  # two per ingest session, one per transcript
    dump = pg_dump()
    assert leaked(dump) == []
    assert "[REDACTED]" in dump and "[REDACTED:" in dump
    for text in NOT_SECRET:
        assert text in dump, text
    # Lines that go on after their secret are stored with the secret alone replaced.
    task_messages = set(Turn.objects.values_list("task_message", flat=True))
    for kind in KINDS:
        if kind.redacted is not None:
            assert f"deploy with {kind.redacted}" in task_messages, kind.name


def make_client(project):
    from tests.api.conftest import KeyClient

    return KeyClient(make_key(project, scopes=["ingest", "policy:read"]).secret)


@pytest.mark.django_db
def test_text_that_holds_no_secret_is_stored_exactly_as_sent(project):
    api = make_client(project)
    events = [{"type": "session", "id": "s-ordinary"}]
    events += [{"type": "tool_call", "id": f"s-ordinary:c{i}", "session_id": "s-ordinary", "turn_index": 0,
                "tool_name": "bash", "arguments": {"command": text}, "output": text}
               for i, text in enumerate(ORDINARY_TEXTS)]
    assert api.post_json("/api/v1/ingest", {"events": events}).status_code == 202
    batch_process(batch_id=IngestBatch.objects.get().pk)

    stored = {call.client_id: call for call in ToolCall.objects.all()}
    for i, text in enumerate(ORDINARY_TEXTS):
        call = stored[f"s-ordinary:c{i}"]
        assert (call.output, call.arguments) == (text, {"command": text})


# --- ids and texts cut to fit -------------------------------------------------------------------------
# OTLP mappers cut client text to the 200 characters of an id, and errors to 2,000. A cut that
# splits a secret leaves a part no rule recognises: it has to be cut after redaction.

_token_rng = random.Random(24)


def fine_grained_token() -> str:
    """A GitHub fine-grained token (93 characters), as the corpus's github-fine-grained-pat."""
    alnum = string.ascii_letters + string.digits
    return ("github" + "_pat_" + "".join(_token_rng.choices(alnum, k=22)) + "_"
            + "".join(_token_rng.choices(alnum, k=59)))


def split_by_cut(token: str, limit: int = 200) -> str:
    """`token` placed so that cutting the text to `limit` characters keeps its first 71."""
    return "x" * (limit - 71) + token


def runs(secret: str, length: int = 20) -> list[str]:
    return [secret[i:i + length] for i in range(len(secret) - length + 1)]


def claude_code_export(tokens: dict[str, str]) -> bytes:
    def record(name: str, **attributes: str) -> LogRecord:
        return LogRecord(time_unix_nano=START, body=AnyValue(string_value=f"claude_code.{name}"), attributes=[
            KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in {"event.name": name, **attributes}.items()])

    session = split_by_cut(tokens["session.id"])
    records = [
        record("api_request", **{"session.id": session, "event.sequence": "1", "model": split_by_cut(tokens["model"]),
                                 "request_id": tokens["request_id"], "input_tokens": "10"}),
        record("tool_result", **{"session.id": session, "event.sequence": "2", "success": "false",
                                 "tool_name": split_by_cut(tokens["tool_name"]),
                                 "tool_use_id": split_by_cut(tokens["tool_use_id"]),
                                 "error": split_by_cut(tokens["error"], 2000) + " at line 3"}),
    ]
    resource = Resource(attributes=[KeyValue(key="service.name",
                                             value=AnyValue(string_value=split_by_cut(tokens["service.name"])))])
    return ExportLogsServiceRequest(resource_logs=[ResourceLogs(
        resource=resource, scope_logs=[ScopeLogs(log_records=records)])]).SerializeToString()


def genai_export(tokens: dict[str, str]) -> bytes:
    asked = split_by_cut(tokens["history call id"])
    history = [{"role": "user", "parts": [{"type": "text", "content": "build it"}]},
               {"role": "assistant", "parts": [{"type": "tool_call", "id": asked,
                                                "name": split_by_cut(tokens["history tool name"]),
                                                "arguments": {"command": "make"}}]},
               {"role": "tool", "parts": [{"type": "tool_call_response", "id": asked, "response": "built"}]}]
    chat = span(TRACE, bytes.fromhex("b7ad6b7169203331"), "chat", START, **{
        "gen_ai.operation.name": "chat", "gen_ai.conversation.id": split_by_cut(tokens["conversation.id"]),
        "gen_ai.agent.name": split_by_cut(tokens["agent.name"]),
        "gen_ai.request.model": split_by_cut(tokens["request.model"]),
        "gen_ai.input.messages": json.dumps(history)})
    tool = span(TRACE, bytes.fromhex("b7ad6b7169203332"), "execute_tool", START + 10, **{
        "gen_ai.operation.name": "execute_tool", "gen_ai.conversation.id": split_by_cut(tokens["conversation.id"]),
        "gen_ai.tool.call.id": split_by_cut(tokens["tool.call.id"]),
        "gen_ai.tool.name": split_by_cut(tokens["tool.name"])})
    tool.status.CopyFrom(Status(code=Status.STATUS_CODE_ERROR, message=split_by_cut(tokens["status message"], 2000)))
    return request(chat, tool).SerializeToString()


@pytest.mark.django_db(transaction=True)
def test_a_secret_that_the_cut_of_an_otlp_id_or_error_would_split_is_never_stored(project):
    api = make_client(project)
    logs = {field: fine_grained_token() for field in (
        "session.id", "model", "request_id", "tool_name", "tool_use_id", "error", "service.name")}
    traces = {field: fine_grained_token() for field in (
        "conversation.id", "agent.name", "request.model", "history call id", "history tool name", "tool.call.id",
        "tool.name", "status message")}
    bodies = {"logs": claude_code_export(logs), "traces": genai_export(traces)}

    def send() -> None:
        for signal, body in bodies.items():
            response = api.generic("POST", f"/api/v1/otlp/v1/{signal}", body, content_type="application/x-protobuf")
            assert response.status_code == 200, response.content
        for batch in IngestBatch.objects.filter(status="pending").order_by("pk"):
            batch_process(batch_id=batch.pk)

    send()
    dump = pg_dump()
    leaks = [field for field, token in {**logs, **traces}.items() if any(run in dump for run in runs(token))]
    assert leaks == [], leaks
    # Two calls whose ids differ only past the cut stay two.
    assert Session.objects.count() == 2 and Turn.objects.count() == 2 and ToolCall.objects.count() == 3
    errors = set(ToolCall.objects.exclude(error="").values_list("error", flat=True))
    assert errors == {"x" * 1929 + "[REDACTED] at line 3", "x" * 1929 + "[REDACTED]"}  # all fits once redacted
    # The same export again is recognised: its ids were made the same way.
    send()
    assert Session.objects.count() == 2 and Turn.objects.count() == 2 and ToolCall.objects.count() == 3
