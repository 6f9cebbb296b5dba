"""An SDK agent against a real toolscope server (live HTTP server, Celery worker, PostgreSQL):
it compacts an output under the published policy, the model-facing text names the artifact id,
and the agent gets the original back through the `retrieve_tool_output` handler it was given,
from memory and then from the server, whose artifact has the same id and the same compacted text.
"""

from __future__ import annotations

import httpx
import pytest
from django.conf import settings
from toolscope_agent import AuthenticationError, Client, PolicyCache, ScopeError, ToolSelector
from toolscope_agent.engine.compaction import artifact_id

if not settings.configured:  # the SDK's pure tests run without Django (-p no:django)
    pytest.skip("needs Django: a live server, a worker and PostgreSQL", allow_module_level=True)

from tests.e2e.conftest import ingest_queue, wait_for, worker  # noqa: F401 -- fixtures
from tests.factories import make_key, make_project, make_user
from toolscope.policies.models import CompactionRule, Policy
from toolscope.policies.services.catalog import catalog_upsert
from toolscope.policies.services.publish import policy_publish
from toolscope.telemetry.models import Artifact, BatchStatus, IngestBatch, ToolCall

pytestmark = pytest.mark.slow

BASH = {"name": "bash", "description": "Run a shell command", "input_schema": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}
LOG = "".join(f"[{n:04d}] compiling src/module_{n}.py ... ok ({n % 13} ms)\n" for n in range(400))


@pytest.fixture
def project(transactional_db):
    project = make_project("retrieval")
    catalog_upsert(project=project, definitions=[BASH])
    policy = Policy.objects.create(project=project)
    CompactionRule.objects.create(policy=policy, tools="bash", max_tokens=120, strategy="head_tail")
    policy_publish(policy=policy, user=make_user("owner"))
    return project


class ArtifactRequests:
    """Counts the agent's GET /api/v1/artifacts requests (an httpx event hook)."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def __call__(self, request: httpx.Request) -> None:
        if request.url.path.startswith("/api/v1/artifacts/"):
            self.paths.append(request.url.path)


def batches_done() -> bool:
    return IngestBatch.objects.exists() and not IngestBatch.objects.exclude(status=BatchStatus.DONE).exists()


def test_an_agent_compacts_an_output_and_retrieves_the_original_through_its_tool(
        live_server, worker, project, tmp_path):  # noqa: F811 -- the worker fixture
    key = make_key(project, scopes=("ingest", "policy:read")).secret
    seen = ArtifactRequests()
    http = httpx.Client(timeout=10, event_hooks={"request": [seen]})
    client = Client(live_server.url, key, flush_interval=0.1, http_client=http)
    client.check(scopes=("ingest", "policy:read"))
    seen.paths.clear()  # check() looked up a nil id
    policy = PolicyCache(live_server.url, key, cache_dir=tmp_path, timeout=5)
    selector = ToolSelector([BASH], policy, client=client)
    implementations = {"retrieve_tool_output": selector.retrieve_tool_output}
    assert selector.tokenizer == "bpe-openai"
    assert selector.retrieve_tool("anthropic")["name"] == "retrieve_tool_output"

    with client.session(agent_name="builder", model="gpt-4o") as session:
        session.turn(tools=[BASH, selector.retrieve_tool("plain")], task_message="Build the project")
        model_text = selector.prepare_output("bash", "call_1", LOG)
        session.tool_call("bash", {"command": "make"}, output=LOG, call_id="call_1")
    content_id = artifact_id(LOG)
    assert f'retrieve_tool_output(id="{content_id}")' in model_text
    assert selector.counter(model_text) <= 120 < selector.counter(LOG)

    # The model asks for the original: the selector answers from memory, without a request.
    assert implementations["retrieve_tool_output"](id=content_id) == LOG
    assert seen.paths == []

    assert client.flush(timeout=20)
    wait_for(batches_done, message="the worker to process the batch")
    stored = Artifact.objects.get(project=project)
    assert stored.content_id == content_id
    assert stored.compacted == model_text, "the server compacted exactly as the agent did"
    assert ToolCall.objects.get(call_id="call_1").output == model_text

    # A fresh selector (a new process, say) has nothing in memory: the server answers.
    fresh = ToolSelector([BASH], policy, client=client)
    assert fresh.retrieve_tool_output(id=content_id) == LOG
    # And the first selector, its memory evicted, asks the server too.
    selector.artifacts.clear()
    assert implementations["retrieve_tool_output"](id=content_id) == LOG
    assert seen.paths == [f"/api/v1/artifacts/{content_id}"] * 2
    client.close()
    http.close()
    policy.close()


def test_check_against_the_server_names_a_bad_key_and_a_missing_scope(live_server, project):
    with Client(live_server.url, "tsk_not_a_key") as stranger, pytest.raises(AuthenticationError) as refused:
        stranger.check()
    assert refused.value.status == 401 and refused.value.message
    ingest_only = make_key(project, scopes=("ingest",)).secret
    with Client(live_server.url, ingest_only) as writer:
        writer.check()
        with pytest.raises(ScopeError, match="policy:read"):
            writer.check(scopes=("policy:read",))
