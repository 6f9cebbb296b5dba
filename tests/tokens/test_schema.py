"""What a tool definition costs: its rendering (engine) and its memoised count (server)."""

from __future__ import annotations

import json

import pytest
from toolscope_agent.engine import tokens as engine
from toolscope_agent.engine.schemas import schema_hash

from toolscope import tokenizer as tk

SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "Fichier à lire, relatif à la racine"},
        "limit": {"type": "integer", "minimum": 1},
    },
    "required": ["path"],
}
REORDERED = {
    "required": ["path"],
    "properties": {"limit": {"minimum": 1, "type": "integer"}, "path": SCHEMA["properties"]["path"]},
    "type": "object",
}


def tool(name="read_file", description="Read a file.", input_schema=SCHEMA):
    return {"name": name, "description": description, "input_schema": input_schema}


@pytest.fixture(autouse=True)
def empty_schema_cache():
    tk.schema_tokens_cache_clear()
    yield
    tk.schema_tokens_cache_clear()


def test_openai_rendering_is_the_wire_json():
    text = engine.render_tool_openai("read_file", "Read a file.", SCHEMA)
    assert text == (
        '{"type":"function","function":{"name":"read_file","description":"Read a file.","parameters":'
        '{"properties":{"limit":{"minimum":1,"type":"integer"},'
        '"path":{"description":"Fichier à lire, relatif à la racine","type":"string"}},"required":["path"],'
        '"type":"object"}}}'
    )
    assert json.loads(text) == {
        "type": "function", "function": {"name": "read_file", "description": "Read a file.", "parameters": SCHEMA}
    }


def test_anthropic_rendering_is_the_wire_json():
    text = engine.render_tool_anthropic("read_file", "Read a file.", SCHEMA)
    assert text.startswith('{"name":"read_file","description":"Read a file.","input_schema":{"properties":')
    assert list(json.loads(text)) == ["name", "description", "input_schema"]
    assert json.loads(text)["input_schema"] == SCHEMA


def test_wrapper_keys_are_fixed_and_schema_keys_sorted_so_one_hash_has_one_cost():
    first = engine.render_tool_openai("read_file", "Read a file.", SCHEMA)
    second = engine.render_tool_openai("read_file", "Read a file.", REORDERED)
    assert first == second  # key order, as sent or as the database kept it, changes nothing
    assert first.startswith('{"type":"function","function":{"name":"read_file","description":"Read a file.",'
                            '"parameters":{"properties":')
    assert schema_hash("read_file", "Read a file.", SCHEMA) == schema_hash("read_file", "Read a file.", REORDERED)


def test_rendering_is_stable():
    renders = {engine.render_tool("read_file", "Read a file.", json.loads(json.dumps(SCHEMA))) for _ in range(5)}
    assert len(renders) == 1


def test_an_empty_description_is_left_out():
    assert engine.render_tool_openai("ping", "", {}) == '{"type":"function","function":{"name":"ping","parameters":{}}}'
    assert engine.render_tool_anthropic("ping", "", {}) == '{"name":"ping","input_schema":{}}'


def test_non_ascii_is_not_escaped():
    text = engine.render_tool_anthropic("lire", "Lit un fichier — vite 📄", {})
    assert "—" in text and "📄" in text and "\\u" not in text


def test_unknown_flavor_is_refused():
    with pytest.raises(ValueError, match="allowed: openai, anthropic"):
        engine.render_tool("x", "", {}, "gemini")
    with pytest.raises(ValueError, match="allowed: openai, anthropic"):
        tk.schema_tokens(name="x", description="", input_schema={}, schema_hash="h", encoding="o200k_base",
                         flavor="gemini")


def test_render_tools_and_the_cost_of_a_set_is_the_sum():
    tools = [tool(), tool("ping", "", {}), {"name": "bare"}]
    renders = engine.render_tools(tools, "anthropic")
    assert renders == [
        engine.render_tool_anthropic("read_file", "Read a file.", SCHEMA),
        '{"name":"ping","input_schema":{}}',
        '{"name":"bare","input_schema":{}}',
    ]
    count = tk.counter("o200k_base")
    assert engine.tools_tokens(tools, count, "anthropic") == sum(count(text) for text in renders)
    assert engine.tools_tokens(tools[:1], count) == engine.tool_tokens("read_file", "Read a file.", SCHEMA, count)
    assert engine.tools_tokens([], count) == 0


def test_approximate_counter():
    assert [engine.approximate_counter("x" * n) for n in (0, 1, 4, 5, 8, 9)] == [0, 1, 1, 2, 2, 3]
    assert engine.approximate_counter("日本語") == 1  # characters, not bytes
    counter: engine.TokenCounter = engine.approximate_counter
    assert engine.tools_tokens([tool()], counter) == -(-len(engine.render_tool_openai("read_file", "Read a file.",
                                                                                      SCHEMA)) // 4)


@pytest.mark.parametrize("encoding", tk.ENCODINGS)
@pytest.mark.parametrize("flavor", engine.FLAVORS)
def test_schema_tokens_counts_the_rendering(encoding, flavor):
    digest = schema_hash("read_file", "Read a file.", SCHEMA)
    got = tk.schema_tokens(name="read_file", description="Read a file.", input_schema=SCHEMA, schema_hash=digest,
                           encoding=encoding, flavor=flavor)
    assert got == tk.count_tokens(engine.render_tool("read_file", "Read a file.", SCHEMA, flavor), encoding)


def test_schema_tokens_known_values():
    # Pinned so a change of rendering shows up here (and in every recorded number).
    digest = schema_hash("read_file", "Read a file.", SCHEMA)
    counts = {
        (encoding, flavor): tk.schema_tokens(name="read_file", description="Read a file.", input_schema=SCHEMA,
                                             schema_hash=digest, encoding=encoding, flavor=flavor)
        for encoding in tk.ENCODINGS for flavor in engine.FLAVORS
    }
    assert counts == PINNED


PINNED = {
    ("o200k_base", "openai"): 63,
    ("o200k_base", "anthropic"): 57,
    ("cl100k_base", "openai"): 62,
    ("cl100k_base", "anthropic"): 56,
}


def test_schema_tokens_cache_hits_do_not_encode(monkeypatch):
    encoded = []
    count_tokens = tk.count_tokens

    def spy(text, encoding):
        encoded.append(encoding)
        return count_tokens(text, encoding)

    monkeypatch.setattr(tk, "count_tokens", spy)
    digest = schema_hash("read_file", "Read a file.", SCHEMA)

    def ask(encoding="o200k_base", flavor="openai"):
        return tk.schema_tokens(name="read_file", description="Read a file.", input_schema=SCHEMA,
                                schema_hash=digest, encoding=encoding, flavor=flavor)

    first = ask()
    assert [ask() for _ in range(100)] == [first] * 100
    assert encoded == ["o200k_base"]
    ask("cl100k_base")
    ask("o200k_base", "anthropic")
    assert encoded == ["o200k_base", "cl100k_base", "o200k_base"]  # the key is (hash, encoding, flavor)
    assert tk.schema_tokens_cache_info() == {"hits": 100, "misses": 3, "size": 3, "maxsize": tk.SCHEMA_CACHE_SIZE}


def test_schema_tokens_cache_is_bounded_lru(monkeypatch):
    monkeypatch.setattr(tk, "SCHEMA_CACHE_SIZE", 3)

    def ask(digest):
        return tk.schema_tokens(name="t", description="", input_schema={}, schema_hash=digest, encoding="o200k_base")

    for digest in "abc":
        ask(digest)
    ask("a")  # now most recently used
    ask("d")  # evicts b
    assert tk.schema_tokens_cache_info()["size"] == 3
    misses = tk.schema_tokens_cache_info()["misses"]
    ask("a")
    ask("c")
    ask("d")
    assert tk.schema_tokens_cache_info()["misses"] == misses
    ask("b")
    assert tk.schema_tokens_cache_info()["misses"] == misses + 1
