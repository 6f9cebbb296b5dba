"""GET /api/v1/artifacts/{id}: the original, to a key of the same project only."""

from __future__ import annotations

import uuid

import pytest

from tests.factories import make_key, make_session, make_tool_call, make_turn
from toolscope.telemetry.models import Artifact


@pytest.fixture
def artifact(project):
    stored = Artifact.objects.create(project=project, original="line\n" * 500, compacted="line\n[… omitted]",
                                     tokens_before=1000, tokens_after=8, strategy="head_tail")
    make_tool_call(make_turn(make_session(project)), tool_name="bash", call_id="call_9", artifact=stored)
    return stored


def test_a_key_of_the_project_gets_the_original(api_for, project, artifact):
    client = api_for(make_key(project, scopes=["policy:read"]).secret)
    body = client.get(f"/api/v1/artifacts/{artifact.pk}").json()
    assert body["original"] == "line\n" * 500
    assert (body["tokens_before"], body["tokens_after"], body["strategy"]) == (1000, 8, "head_tail")
    assert (body["tool_name"], body["call_id"]) == ("bash", "call_9")


def test_a_key_of_another_project_gets_404(api_for, other_project, artifact):
    client = api_for(make_key(other_project, scopes=["policy:read"]).secret)
    response = client.get(f"/api/v1/artifacts/{artifact.pk}")
    assert response.status_code == 404
    assert "original" not in response.json()


def test_an_unknown_id_is_404_and_a_key_without_read_scope_403(api_for, project, artifact):
    reader = api_for(make_key(project, scopes=["policy:read"]).secret)
    assert reader.get(f"/api/v1/artifacts/{uuid.uuid4()}").status_code == 404
    writer = api_for(make_key(project, scopes=["ingest"]).secret)
    assert writer.get(f"/api/v1/artifacts/{artifact.pk}").status_code == 403
