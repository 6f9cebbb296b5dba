"""Retrievable compaction in the agent: the compacted text names the original's id, the selector
keeps originals in a bounded store, and `retrieve_tool_output` answers from it or from the
server (`GET /api/v1/artifacts/{id}`, a local stub here; tests/sdk/test_retrieve_live.py runs
the real server)."""

from __future__ import annotations

import threading

import pytest
from toolscope_agent import ArtifactStore, ToolSelector
from toolscope_agent.engine.compaction import artifact_id

from tests.sdk.server import Action

TOOLS = [{"name": "bash", "description": "Run a shell command.", "input_schema": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}]
POLICY = {"encoding": "o200k_base",
          "outputs": {"compaction": [{"tools": "bash", "max_tokens": 80, "strategy": "head_tail"}]},
          "tools": {"bash": {}}}
LOG = "".join(f"step {n}: compiled module_{n}.py in {n % 7} ms\n" for n in range(400))


def words(text: str) -> int:
    return len(text.split())


# --- the store ---------------------------------------------------------------------------------


def test_the_store_forgets_the_least_recently_used_beyond_its_bytes():
    store = ArtifactStore(max_bytes=10)
    store.put("a", "aaaa")
    store.put("b", "bbbb")
    assert store.get("a") == "aaaa"  # now "b" is the least recently used
    store.put("c", "cccc")
    assert ("a" in store, "b" in store, "c" in store) == (True, False, True)
    assert store.size_bytes == 8


def test_the_store_counts_utf8_bytes_and_refuses_what_alone_is_too_large():
    store = ArtifactStore(max_bytes=8)
    assert store.put("e", "é" * 4)  # 8 bytes
    assert not store.put("big", "x" * 9)
    assert "big" not in store and store.get("e") == "é" * 4
    store.put("e", "é")
    assert store.size_bytes == 2, "storing an id again replaces its original"


def test_the_store_is_safe_under_threads():
    store = ArtifactStore(max_bytes=1000)

    def work(n: int) -> None:
        for i in range(500):
            store.put(f"{n}-{i}", "x" * (i % 20))
            store.get(f"{n}-{i - 1}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert store.size_bytes <= 1000
    assert store.size_bytes == sum(len(store.get(key) or "") for key in list(store._originals))


# --- the selector ------------------------------------------------------------------------------


def test_a_compacted_output_names_its_id_and_the_handler_returns_the_original():
    selector = ToolSelector(TOOLS, POLICY)
    text = selector.prepare_output("bash", "call_1", LOG)
    assert f'retrieve_tool_output(id="{artifact_id(LOG)}")' in text
    assert selector.counter(text) <= 80
    assert selector.retrieve_tool_output(id=artifact_id(LOG)) == LOG


def test_an_output_within_budget_is_not_kept():
    selector = ToolSelector(TOOLS, POLICY)
    assert selector.prepare_output("bash", "call_1", "ok\n") == "ok\n"
    assert len(selector.artifacts) == 0


def test_an_unknown_id_gets_a_sentence_for_the_model():
    answer = ToolSelector(TOOLS, POLICY).retrieve_tool_output(id="0" * 24)
    assert answer.startswith("No tool output with id 000000000000000000000000 is available")


@pytest.mark.parametrize(("format", "expected"), [
    ("openai", {"type": "function", "function": {"name": "retrieve_tool_output", "parameters": {"required": ["id"]}}}),
    ("anthropic", {"name": "retrieve_tool_output", "input_schema": {"required": ["id"]}}),
    ("plain", {"name": "retrieve_tool_output", "input_schema": {"required": ["id"]}}),
])
def test_the_retrieve_tool_comes_in_every_shape(format, expected):
    definition = ToolSelector(TOOLS, POLICY).retrieve_tool(format)

    def contains(actual: dict, wanted: dict) -> bool:
        return all(contains(actual[k], v) if isinstance(v, dict) else actual.get(k) == v for k, v in wanted.items())

    assert contains(definition, expected), definition
    with pytest.raises(ValueError, match="unknown format"):
        ToolSelector(TOOLS, POLICY).retrieve_tool("xml")


def test_a_selector_without_the_original_asks_the_server_and_keeps_the_answer(server, client):
    server.then(Action(status=200, body={"id": artifact_id(LOG), "original": LOG}))
    selector = ToolSelector(TOOLS, POLICY, client=client)
    assert selector.retrieve_tool_output(id=artifact_id(LOG)) == LOG
    assert selector.retrieve_tool_output(id=artifact_id(LOG)) == LOG, "the second answer comes from memory"
    artifact_requests = [r for r in server.requests if r.path.startswith("/api/v1/artifacts/")]
    assert [(r.method, r.path) for r in artifact_requests] == [("GET", f"/api/v1/artifacts/{artifact_id(LOG)}")]
    assert artifact_requests[0].headers["authorization"] == "Bearer tsk_test_key"


def test_a_404_from_the_server_and_an_id_that_is_not_one_never_raise(server, client):
    server.then(Action(status=404, body={"detail": "No artifact with this id in the key's project."}))
    selector = ToolSelector(TOOLS, POLICY, client=client)
    assert selector.retrieve(artifact_id("gone")) is None
    assert selector.retrieve_tool_output(id="../policy").startswith("No tool output with id ../policy")
    assert [r.path for r in server.requests] == [f"/api/v1/artifacts/{artifact_id('gone')}"], \
        "what is not an id never reaches a URL"


def test_a_server_that_refuses_is_explained_to_the_model(server, client):
    server.then(Action(status=403, body={"detail": "This API key lacks the 'policy:read' scope."}))
    answer = ToolSelector(TOOLS, POLICY, client=client).retrieve_tool_output(id=artifact_id(LOG))
    assert answer == (f"The tool output {artifact_id(LOG)} could not be retrieved now: "
                      "This API key lacks the 'policy:read' scope.")


def test_a_shared_store_serves_every_selector_that_holds_it():
    shared = ArtifactStore()
    ToolSelector(TOOLS, POLICY, artifacts=shared).prepare_output("bash", "call_1", LOG)
    assert ToolSelector(TOOLS, POLICY, artifacts=shared).retrieve(artifact_id(LOG)) == LOG
    assert ToolSelector(TOOLS, POLICY).retrieve(artifact_id(LOG)) is None, "each selector has its own by default"


def test_a_custom_counter_is_used_and_reported():
    selector = ToolSelector(TOOLS, POLICY, counter=words)
    assert selector.tokenizer == "custom"
    assert words(selector.prepare_output("bash", "call_1", LOG)) <= 80
