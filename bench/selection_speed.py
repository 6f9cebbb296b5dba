"""Cost of the selection engine on the agent's hot path: select_tools and search_tools.

Inputs, generated deterministically (seeded):
- a 500-tool catalog shaped like a multi-server MCP setup: names `<server>_<verb>_<noun>[_n]`,
  two- to four-sentence descriptions, three to six parameters each;
- a policy per mode (all, context_rules with 12 keyword/regex rules over 12 groups,
  progressive, tool_search) and a mid-session state (10 loaded, 8 discovered, 12 activated);
- a 1,000-tool catalog and 12 queries (names, verbs, natural-language phrases, typos).

Each call is timed alone with perf_counter_ns; the script prints the median and p99 in µs over
--calls calls (after --warmup calls, so regex compilation, the progressive menu's line cache and
the search index are built once, as they are in a long-running agent), and the first (cold) call.

Targets: select_tools < 200 µs (500 tools), search_tools < 2 ms (1,000 tools).

Run: .venv/bin/python bench/selection_speed.py [--calls 3000] [--warmup 200]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from toolscope_agent.engine import render, search, selection
from toolscope_agent.engine.search import search_tools
from toolscope_agent.engine.selection import SessionState, select_tools

SERVERS = ["github", "slack", "jira", "sentry", "grafana", "fs", "git", "k8s", "db", "web", "docs", "mail"]
VERBS = ["get", "list", "create", "update", "delete", "search", "read", "write", "run", "sync", "merge", "send"]
NOUNS = ["issue", "pull_request", "branch", "commit", "message", "channel", "user", "dashboard", "alert",
         "file", "directory", "pod", "deployment", "table", "page", "ticket", "event", "secret"]
FILLER = ["Returns the matching records as JSON", "Results are paginated; pass the cursor from the previous page",
          "Requires read access to the workspace", "Rate limited to 60 calls per minute",
          "Fields that are not requested are omitted from the output"]
QUERIES = ["read file", "create a new jira ticket", "slack send message", "git diff", "github_list_issue",
           "delet secrt", "show grafana dashboards with alerts", "pods", "merge pull request",
           "search the web for a page", "zzzz", "k8s deployment rollback"]


def make_catalog(size: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    catalog, seen = [], set()
    while len(catalog) < size:
        server, verb, noun = rng.choice(SERVERS), rng.choice(VERBS), rng.choice(NOUNS)
        name = f"{server}_{verb}_{noun}"
        if name in seen:
            name = f"{name}_{len(catalog)}"
        seen.add(name)
        sentences = [f"{verb.capitalize()} a {noun.replace('_', ' ')} in {server}"]
        sentences += rng.sample(FILLER, rng.randint(1, 3))
        params = {"workspace": {"type": "string", "description": "Workspace id."}}
        for i in range(rng.randint(2, 5)):
            kind = rng.choice(["string", "integer", "boolean", "array"])
            params[f"p{i}"] = {"type": kind, "description": f"Parameter {i}."}
            if kind == "array":
                params[f"p{i}"]["items"] = {"type": "string"}
        catalog.append({"name": name, "description": ". ".join(sentences) + ".",
                        "input_schema": {"type": "object", "properties": params, "required": ["workspace"]}})
    return catalog


def make_policies(catalog: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    names = [tool["name"] for tool in catalog]
    always_on = [*names[:6], "tool_search"]
    groups = {f"g{i}": names[10 + i * 8: 18 + i * 8] for i in range(12)}
    rules = [{"name": f"r{i}", "keywords": [VERBS[i], NOUNS[i]], "regex": rf"\b{SERVERS[i]}\w*" if i % 3 == 0 else None,
              "groups": [f"g{i}"]} for i in range(12)]
    base = {"allowed": None, "always_on": always_on, "groups": groups, "context_rules": rules,
            "progressive": {"hint_prefix": "$"}, "tool_search": {"top_k": 8, "max_top_k": 20},
            "sticky_discovered": True}
    return {mode: {"schema_version": 1, "selection": {**base, "mode": mode}}
            for mode in ("all", "context_rules", "progressive", "tool_search")}


def time_calls(call: Callable[[], object], calls: int, warmup: int) -> tuple[float, float, float]:
    """(cold µs, median µs, p99 µs)."""
    start = time.perf_counter_ns()
    call()
    cold = (time.perf_counter_ns() - start) / 1000
    for _ in range(warmup):
        call()
    samples = []
    for _ in range(calls):
        start = time.perf_counter_ns()
        call()
        samples.append((time.perf_counter_ns() - start) / 1000)
    samples.sort()
    return cold, statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.99))]


def clear_caches() -> None:
    """Cold means cold: no compiled rule, menu line or search index left from an earlier case."""
    for cache in (selection._REGEX_CACHE, selection._KEYWORD_CACHE, render._MENU_CACHE, render._SENTENCE_CACHE,
                  search._INDEXES):
        cache.clear()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=200)
    args = parser.parse_args()

    search_tool = {"name": "tool_search", "description": "Find tools by query.", "input_schema": {"type": "object"}}
    catalog = [*make_catalog(499, seed=11), search_tool]
    names = [tool["name"] for tool in catalog]
    state = SessionState(loaded=names[100:110], discovered=names[200:208], activated=names[300:312], turns=9)
    message = "please update the issue and run the pipeline on github, then merge"
    print(f"select_tools, {len(catalog)} tools, {args.calls} calls (target < 200 µs)")
    print(f"{'mode':16} {'sent':>5} {'deferred':>8} {'cold µs':>9} {'median µs':>10} {'p99 µs':>8}")
    for mode, doc in make_policies(catalog).items():
        clear_caches()
        chosen = select_tools(catalog, doc, state, message)
        clear_caches()
        cold, median, p99 = time_calls(lambda doc=doc: select_tools(catalog, doc, state, message),
                                       args.calls, args.warmup)
        print(f"{mode:16} {len(chosen.tools):5d} {len(chosen.deferred):8d} {cold:9.1f} {median:10.1f} {p99:8.1f}")

    big = make_catalog(1000, seed=12)
    calls = max(1, args.calls // len(QUERIES))
    print(f"\nsearch_tools, {len(big)} tools, {calls} calls per query (target < 2000 µs)")
    print(f"{'query':40} {'hits':>4} {'cold µs':>9} {'median µs':>10} {'p99 µs':>8}  top hit")
    for query in QUERIES:
        clear_caches()
        cold, median, p99 = time_calls(lambda query=query: search_tools(big, query), calls, args.warmup // 10)
        hits = search_tools(big, query)
        top = f"{hits[0].name} ({hits[0].score:g})" if hits else "-"
        print(f"{query!r:40} {len(hits):4d} {cold:9.1f} {median:10.1f} {p99:8.1f}  {top}")


if __name__ == "__main__":
    main()
