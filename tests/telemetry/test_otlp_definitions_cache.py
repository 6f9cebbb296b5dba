"""OTLP's tool definitions are parsed once per text, and the texts kept are bounded by bytes
(issue 24, item 6): a web worker fed distinct 3 MB `gen_ai.tool.definitions` texts kept 256 of
them with their parsed definitions, 600-990 MB."""

from __future__ import annotations

import gc
import json
import tracemalloc

from toolscope.telemetry.otlp import genai

MB = 1024 * 1024


def definitions_text(tag: str) -> str:
    """3,000 tools of about 1 kB each: 3 MB, as the agent of the report sent."""
    return json.dumps([{"type": "function", "function": {
        "name": f"{tag}_{n}", "description": f"{tag} {n} " + "Looks the record up. " * 45,
        "parameters": {"type": "object", "properties": {"id": {"type": "string", "description": f"{tag} {n}"}}}}}
        for n in range(3000)])


def test_distinct_3_mb_definition_texts_keep_the_cache_within_its_bytes():
    cache = genai._definitions_text.cache
    cache.clear()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(12):  # 36 MB of distinct texts, each parsed and hashed
            text = definitions_text(f"agent{n}")
            assert len(text) > 3 * 10**6
            hashed = genai._definitions_text(text)
            assert len(hashed) == 3000 and genai._definitions_text(text) is hashed  # parsed once
            assert cache.size_bytes <= genai.DEFINITIONS_CACHE_BYTES
            del text, hashed
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        cache.clear()
    # What the process still holds is the cache (within its bound), not 12 texts and their tools.
    assert held < genai.DEFINITIONS_CACHE_BYTES * 1.25, held
