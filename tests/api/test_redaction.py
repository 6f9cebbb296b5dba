"""Redacted arguments and secret-looking values never reach any table, the raw batch included."""

from __future__ import annotations

import pytest
from django.db import connection

from toolscope.policies.models import Tool
from toolscope.telemetry.models import IngestBatch, ToolCall
from toolscope.telemetry.services.processing import batch_process

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
