"""POST /api/v1/tools/search at 2,000 tools, catalog embedded beforehand (issue 30's goal: median
≤ 15 ms a query), lexical and fused side by side in one run.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ts_bench .venv/bin/python bench/search_latency.py \
        [--tools 2000] [--queries 300]

The catalog: BFCL's definitions (bench/search_data.py), one per name, then further distinct
definitions of the same names renamed `<name>_v<n>` until --tools; registered with
catalog_upsert as PUT /tools does. Embedded once with what the worker runs
(services/embeddings.project_embed; its time is reported), then each of two published versions
— lexical, and semantic with the bundled all-MiniLM-L6-v2 — answers the same BFCL requests through
the API view in this process (Django's test client: routing, key check, the view, the queries;
no network), in alternation. The first search of each version is reported apart (it reads the
catalog's vectors from the table); the rest give median and p95. The machine's load average is
printed: latency on a shared 2-core machine moves with it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent / "sdk")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolscope.settings")
os.environ.setdefault("TOOLSCOPE_ENV", "development")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--short", action="store_true",
                        help="the queries of bench/mcp_catalogs/queries.json (2-8 words) instead of BFCL's requests")
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient
    from search_data import load
    from toolscope_agent.semantic import bundled_model_path

    from toolscope.policies.models import Policy
    from toolscope.policies.services import semantic_search
    from toolscope.policies.services.catalog import catalog_upsert
    from toolscope.policies.services.embeddings import project_embed
    from toolscope.policies.services.publish import policy_publish
    from toolscope.telemetry.models import Project
    from toolscope.telemetry.services.api_keys import api_key_create

    settings.TOOL_SEARCH_MODEL = str(bundled_model_path())
    data = load()
    catalog = [dict(tool) for tool in data.catalog]
    names = {tool["name"] for tool in catalog}
    n = 1
    while len(catalog) < args.tools:  # more distinct definitions, renamed
        for tool in data.catalog:
            if len(catalog) >= args.tools:
                break
            name = f"{tool['name']}_v{n}"
            if name not in names:
                names.add(name)
                catalog.append({**tool, "name": name})
        n += 1
    slug = f"search-latency-{int(time.time())}"
    project = Project.objects.create(name=slug, slug=slug)
    user = get_user_model().objects.create_user(username=slug, password=slug)
    started = time.perf_counter()
    catalog_upsert(project=project, definitions=[{"name": t["name"], "description": t.get("description", ""),
                                                   "input_schema": t.get("input_schema", {})} for t in catalog])
    print(f"{len(catalog)} tools registered in {time.perf_counter() - started:.1f} s", flush=True)
    started = time.perf_counter()
    result = project_embed(project_id=project.pk)
    print(f"embedded {result['embedded']} definitions in {time.perf_counter() - started:.1f} s (the worker's task; "
          "once per definition)", flush=True)
    secret = api_key_create(project=project, name="bench", scopes=["policy:read"]).secret
    client = APIClient(SERVER_NAME="localhost")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    if args.short:
        import json

        texts = [query["query"] for query in json.loads((HERE / "mcp_catalogs" / "queries.json").read_text())]
        queries = (texts * (1 + args.queries // len(texts)))[:args.queries]
    else:
        queries = [query.text[:500] for query in data.single[:args.queries]]
    figures: dict[str, dict[str, float]] = {}
    for label, semantic in (("lexical", False), ("semantic", True)):
        policy, _ = Policy.objects.get_or_create(project=project)
        policy.mode, policy.search_semantic = "tool_search", semantic
        policy.save()
        policy_publish(policy=policy, user=user, label=label)
    semantic_search._load.cache_clear()  # as a fresh web process: no vector in memory
    timings: dict[str, list[float]] = {"lexical": [], "semantic": []}
    first: dict[str, float] = {}
    for query in queries:
        for label in ("lexical", "semantic"):
            started = time.perf_counter()
            response = client.post("/api/v1/tools/search", {"query": query, "top_k": 8, "label": label},
                                   format="json")
            elapsed = (time.perf_counter() - started) * 1000
            if response.status_code != 200 or not response.json()["results"]:
                raise SystemExit(f"{label}: {response.status_code} {response.content[:300]!r}")
            if label not in first:
                first[label] = elapsed
            else:
                timings[label].append(elapsed)
    # The search alone, as the request runs it once the catalog and index are kept: no HTTP, key or
    # label lookups.
    from toolscope_agent.engine.search import search_tools, searchable
    from toolscope_agent.semantic import HybridIndex

    from toolscope.policies.selectors import tool_catalog

    kept = searchable(tool_catalog(project=project))
    fused = HybridIndex(kept, semantic_search.semantic_model())
    for label, search in (("lexical, search only", lambda q: search_tools(kept, q, 8)),
                          ("semantic, search only", lambda q: fused.search(q, 8))):
        values = []
        for query in queries:
            started = time.perf_counter()
            search(query)
            values.append((time.perf_counter() - started) * 1000)
        first[label], timings[label] = values[0], values[1:]
    load1 = os.getloadavg()[0]
    for label, values in timings.items():
        figures[label] = {"first": first[label], "p50": statistics.median(values),
                          "p95": statistics.quantiles(values, n=20)[18]}
    words = statistics.median(len(query.split()) for query in queries)
    print(f"\nload average {load1:.2f}; {len(queries)} {'short queries' if args.short else 'BFCL requests'} "
          f"(median {words:.0f} words) per version, alternating\n")
    print("| version | first search (ms) | median (ms) | p95 (ms) |")
    print("| --- | --- | --- | --- |")
    for label, row in figures.items():
        print(f"| {label} | {row['first']:.1f} | {row['p50']:.1f} | {row['p95']:.1f} |")
    if os.environ.get("SEARCH_LATENCY_PROFILE"):
        import cProfile
        import pstats

        profile = cProfile.Profile()
        profile.enable()
        for query in queries[:30]:
            client.post("/api/v1/tools/search", {"query": query, "top_k": 8, "label": "semantic"}, format="json")
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(22)
    # The project's published versions are protected (history is never deleted); left in the scratch database.


if __name__ == "__main__":
    main()
