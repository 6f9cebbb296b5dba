"""Redacted arguments and secret-looking values never reach any table, the raw batch included;
ids that held secrets stay distinct and re-sent events are still recognised."""

from __future__ import annotations

import pytest
from django.db import connection
from toolscope_agent.engine.schemas import schema_hash

from tests.factories import make_key
from tests.secret_corpus import secret_kinds
from toolscope.policies.models import Tool, ToolVersion
from toolscope.telemetry.models import IngestBatch, Session, ToolCall
from toolscope.telemetry.services.processing import batch_process

KEYS = {kind.name: kind.text for kind in secret_kinds()}

OPENAI_KEY = "sk-proj-Q2x9TzY7wLmN4bVc8dFg1hJk3"
GITHUB_TOKEN = "ghp_" + "R7t2Yq9W3e5U8i1O4p6A0s2D4f6G8h0J1k3L"
DB_PASSWORD = "s3cr3t-Passw0rd"
PRIVATE_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----"
ENV_VALUE = "only-in-the-env-argument-4711"
SECRETS = [OPENAI_KEY, GITHUB_TOKEN, DB_PASSWORD, "b3BlbnNzaC1rZXktdjEAAAAA", ENV_VALUE]


def every_stored_text() -> str:
    chunks = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f'SELECT t::text FROM "{table}" t')
            chunks.extend(row[0] for row in cursor.fetchall())
    return "\n".join(chunks)


@pytest.mark.django_db
def test_secrets_and_redacted_arguments_reach_no_table(api, project):
    Tool.objects.create(project=project, name="bash", redact=["env"])
    events = [
        {"type": "session", "id": "s1", "metadata": {"note": f"deploy with {OPENAI_KEY}"}},
        {"type": "turn", "id": "s1:t0", "session_id": "s1", "index": 0,
         "system_prompt": f"Use token {GITHUB_TOKEN} for GitHub.",
         "task_message": f"connect to postgres://app:{DB_PASSWORD}@db.internal:5432/app"},
        {"type": "tool_call", "id": "s1:c0", "session_id": "s1", "turn_index": 0, "tool_name": "bash",
         "arguments": {"command": f"curl -H 'Authorization: Bearer {OPENAI_KEY}' https://api",
                       "env": {"TOKEN": ENV_VALUE}},
         "output": f"wrote key:\n{PRIVATE_KEY}\n", "error": f"auth failed for {GITHUB_TOKEN}"},
    ]
    response = api.post_json("/api/v1/ingest", {"events": events})
    assert response.status_code == 202
    batch_process(batch_id=IngestBatch.objects.get().pk)

    stored = every_stored_text()
    assert ToolCall.objects.get().arguments["env"] == "[REDACTED]"
    assert "[REDACTED]" in stored
    for secret in SECRETS:
        assert secret not in stored, secret
    # What is not secret survives.
    assert "db.internal:5432/app" in stored and "curl -H" in stored


def call(event_id: str, session: str = "s1") -> dict:
    return {"type": "tool_call", "id": event_id, "session_id": session, "turn_index": 0, "tool_name": "bash",
            "output": "ok"}


@pytest.mark.django_db
def test_ids_that_differ_only_in_their_secret_stay_distinct(api):
    ids = [f"call_{KEYS[name]}" for name in ("github-pat", "stripe-secret-key", "npm-token")]
    response = api.post_json("/api/v1/ingest", {"events": [call(i) for i in ids]})
    assert response.json()["accepted"] == 3
    batch_process(batch_id=IngestBatch.objects.get().pk)

    stored = set(ToolCall.objects.values_list("client_id", flat=True))
    assert len(stored) == 3
    assert all(client_id.startswith("call_[REDACTED:") for client_id in stored)


@pytest.mark.django_db
def test_a_re_sent_event_whose_id_held_a_secret_is_a_duplicate(api):
    events = [{"type": "session", "id": f"run_{KEYS['slack-bot-token']}"},
              call(f"call_{KEYS['github-pat']}", session=f"run_{KEYS['slack-bot-token']}")]
    api.post_json("/api/v1/ingest", {"events": events})
    batch_process(batch_id=IngestBatch.objects.get().pk)

    again = api.post_json("/api/v1/ingest", {"events": events}).json()
    assert [r["status"] for r in again["results"]] == ["accepted", "duplicate"]  # sessions are upserts
    assert Session.objects.count() == 1 and ToolCall.objects.count() == 1


@pytest.mark.django_db
def test_metadata_keys_and_values_named_like_secrets_are_redacted(api):
    metadata = {KEYS["openai-short-key"]: "a key as a key", "db": {"password": "correct horse battery"},
                "max_tokens": 4096, "repo": "acme/api"}
    api.post_json("/api/v1/ingest", {"events": [{"type": "session", "id": "s1", "metadata": metadata}]})
    batch_process(batch_id=IngestBatch.objects.get().pk)

    stored = Session.objects.get().metadata
    assert KEYS["openai-short-key"] not in str(stored)
    assert stored["db"] == {"password": "[REDACTED]"}
    assert stored["max_tokens"] == 4096 and stored["repo"] == "acme/api"


@pytest.mark.django_db
def test_put_tools_keeps_a_schema_without_secrets_exactly(api_for, project):
    client = api_for(make_key(project, scopes=["ingest", "policy:read"]).secret)
    schema = {"type": "object", "properties": {"password": {"type": "string", "format": "password"},
                                               "token": {"type": "string"}, "max_tokens": {"type": "integer"}}}
    definition = {"name": "login", "description": "Log in with a password or a token.", "input_schema": schema}
    result = client.put("/api/v1/tools", {"tools": [definition]}, format="json").json()["tools"][0]

    tool = Tool.objects.get()
    assert tool.input_schema == schema and tool.description == definition["description"]
    assert result["schema_hash"] == schema_hash("login", definition["description"], schema)


@pytest.mark.django_db
def test_put_tools_cuts_secrets_out_of_definitions(api_for, project):
    client = api_for(make_key(project, scopes=["ingest", "policy:read"]).secret)
    key = KEYS["anthropic-api-key"]
    definition = {"name": "ask", "description": f"Calls Claude with {key}",
                  "input_schema": {"type": "object", "properties": {"key": {"type": "string", "default": key}}}}
    assert client.put("/api/v1/tools", {"tools": [definition]}, format="json").status_code == 200

    for row in (Tool.objects.get(), ToolVersion.objects.get()):
        assert key not in row.description and key not in str(row.input_schema)
        assert row.input_schema["properties"]["key"] == {"type": "string", "default": "[REDACTED]"}
