"""GET /api/v1/artifacts/{id}: the original, by the content id its compacted text names, to a key
of the same project only."""

from __future__ import annotations

import re
import uuid

import pytest
from toolscope_agent.engine.compaction import artifact_id

from tests.factories import make_key, make_session, make_tool_call, make_turn
from toolscope.policies.models import CompactionRule, Policy
from toolscope.telemetry.models import Artifact, ToolCall
from toolscope.telemetry.services.ingest import ingest_events
from toolscope.telemetry.services.processing import batch_process

ORIGINAL = "line\n" * 500


def stored(project, original=ORIGINAL, call_id="call_9") -> Artifact:
    artifact = Artifact.objects.create(project=project, original=original, compacted="line\n[… omitted]",
                                       tokens_before=1000, tokens_after=8, strategy="head_tail")
    make_tool_call(make_turn(make_session(project)), tool_name="bash", call_id=call_id, artifact=artifact)
    return artifact


@pytest.fixture
def artifact(project):
    return stored(project)


@pytest.fixture
def reader(api_for, project):
    return api_for(make_key(project, scopes=["policy:read"]).secret)


def test_a_key_of_the_project_gets_the_original_by_its_content_id(reader, artifact):
    body = reader.get(f"/api/v1/artifacts/{artifact_id(ORIGINAL)}").json()
    assert body["id"] == artifact_id(ORIGINAL) == artifact.content_id
    assert body["original"] == ORIGINAL
    assert (body["tokens_before"], body["tokens_after"], body["strategy"]) == (1000, 8, "head_tail")
    assert (body["tool_name"], body["call_id"]) == ("bash", "call_9")


def test_the_uuid_of_an_artifact_still_finds_it(reader, artifact):
    body = reader.get(f"/api/v1/artifacts/{artifact.pk}").json()
    assert body["original"] == ORIGINAL and body["id"] == artifact_id(ORIGINAL)


def test_a_key_of_another_project_gets_404(api_for, other_project, artifact):
    outsider = api_for(make_key(other_project, scopes=["policy:read"]).secret)
    for id_ in (artifact.content_id, str(artifact.pk)):
        response = outsider.get(f"/api/v1/artifacts/{id_}")
        assert response.status_code == 404
        assert "original" not in response.json()


def test_the_same_original_in_two_projects_answers_each_key_with_its_own_row(api_for, project, other_project):
    ours, theirs = stored(project, call_id="ours"), stored(other_project, call_id="theirs")
    assert ours.content_id == theirs.content_id
    for owner, call_id in ((project, "ours"), (other_project, "theirs")):
        body = api_for(make_key(owner, scopes=["policy:read"]).secret).get(
            f"/api/v1/artifacts/{ours.content_id}").json()
        assert body["call_id"] == call_id


def test_identical_originals_in_one_project_coexist_and_the_earliest_answers(reader, project):
    first, second = stored(project, call_id="first"), stored(project, call_id="second")
    assert first.pk != second.pk and first.content_id == second.content_id
    assert reader.get(f"/api/v1/artifacts/{first.content_id}").json()["call_id"] == "first"


@pytest.mark.parametrize("bad", ["nope", "0" * 23, "../policy", "A" * 24, "0" * 25])
def test_what_is_not_an_id_is_404(reader, artifact, bad):
    assert reader.get(f"/api/v1/artifacts/{bad}").status_code == 404


def test_an_unknown_id_is_404_and_a_key_without_read_scope_403(api_for, reader, project, artifact):
    assert reader.get(f"/api/v1/artifacts/{uuid.uuid4()}").status_code == 404
    assert reader.get(f"/api/v1/artifacts/{'0' * 24}").status_code == 404
    writer = api_for(make_key(project, scopes=["ingest"]).secret)
    assert writer.get(f"/api/v1/artifacts/{artifact.content_id}").status_code == 403


def test_processing_names_the_content_id_in_the_compacted_output(reader, project):
    policy = Policy.objects.create(project=project)
    CompactionRule.objects.create(policy=policy, tools="bash", max_tokens=60, strategy="head_tail")
    log = "".join(f"step {n}: compiled module_{n}.py\n" for n in range(300))
    events = []
    for n in range(2):  # two sessions: within one, the second output would be a duplicate
        session = f"s{n}"
        events += [
            {"type": "session", "id": session, "timestamp": "2026-11-22T10:00:00+00:00"},
            {"type": "turn", "id": f"{session}:t0", "session_id": session, "index": 0,
             "timestamp": "2026-11-22T10:00:01+00:00"},
            {"type": "tool_call", "id": f"{session}:c0", "call_id": f"call_{n}", "session_id": session,
             "turn_index": 0, "tool_name": "bash", "output": log, "timestamp": "2026-11-22T10:00:02+00:00"},
        ]
    outcome = ingest_events(api_key=make_key(project).api_key, raw_events=events)
    batch_process(batch_id=outcome.batch_id)

    compacted = ToolCall.objects.get(call_id="call_0")
    assert re.search(rf'retrieve_tool_output\(id="{artifact_id(log)}"\)', compacted.output)
    # The same original twice in one project: two rows under one content id, no conflict.
    assert Artifact.objects.filter(project=project, content_id=artifact_id(log)).count() == 2
    assert reader.get(f"/api/v1/artifacts/{artifact_id(log)}").json()["original"] == log


def test_an_artifact_without_its_call_answers_null_tool_name_as_documented(reader, api_for, project):
    # Found by the API fuzzer: the call had been deleted (SET_NULL), and the description said string.
    Artifact.objects.create(project=project, original="x", compacted="x", tokens_before=1, tokens_after=1,
                            strategy="head")
    body = reader.get(f"/api/v1/artifacts/{artifact_id('x')}").json()
    assert (body["tool_name"], body["call_id"]) == (None, None)
    schema = api_for(None).get("/api/v1/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    properties = schema["components"]["schemas"]["Artifact"]["properties"]
    assert properties["tool_name"]["nullable"] and properties["call_id"]["nullable"]
