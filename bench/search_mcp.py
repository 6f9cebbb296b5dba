"""Tool search on real MCP servers' catalogs with short agent-style queries (issue 13).

    .venv/bin/python bench/search_mcp.py [--rankers toolscope,toolscope-legacy,bm25s,ratel-ai]

The catalog is the union of the `tools/list` answers that bench/mcp_catalogs/capture.py recorded
from seven real servers (git, time and fetch from PyPI; filesystem, memory, everything and github
from npm: 77 tools). A name two servers share is prefixed by its server, as the MCP gateway
does; the others keep their own names. The queries (bench/mcp_catalogs/queries.json, 153) were
written and labelled by hand before any ranker's output was seen: 2 to 8 words, most sharing no
word with their tool's name (see its README).

Rankers are the ones bench/search_recall.py registers, on this catalog: recall@1/@5 (the share
of a query's targets in the top k, as most queries have one target; `any@1` when the first hit
is any target) and MRR@20. History: `toolscope+history` learns (with the engine's own
learn_history, as the server does) from the queries of split a, each a recorded session that
called its targets, and is measured on split b beside the others on the same queries.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from search_recall import RANKERS
from toolscope_agent.engine.history import RecordedSession, learn_history

HERE = Path(__file__).parent / "mcp_catalogs"
SERVERS = ("git", "time", "fetch", "filesystem", "memory", "everything", "github")


def load(queries_file: str = "queries.json") -> tuple[list[dict], list[dict]]:
    tools = [(server, tool) for server in SERVERS
             for tool in json.loads((HERE / f"{server}.json").read_text())["tools"]]
    counts: dict[str, int] = {}
    for _, tool in tools:
        counts[tool["name"]] = counts.get(tool["name"], 0) + 1
    names = {f"{server}/{tool['name']}": (tool["name"] if counts[tool["name"]] == 1 else f"{server}_{tool['name']}")
             for server, tool in tools}
    catalog = [{"name": names[f"{server}/{tool['name']}"], "description": tool.get("description", ""),
                "input_schema": tool.get("inputSchema", {})} for server, tool in tools]
    queries = [{**query, "targets": [names[target] for target in query["targets"]]}
               for query in json.loads((HERE / queries_file).read_text())]
    return catalog, queries


def measure(search, queries: list[dict]) -> dict[str, float]:
    r1, r5, any1, mrr, latency = [], [], [], [], []
    for query in queries:
        started = time.perf_counter_ns()
        found = search(query["query"], 20)
        latency.append((time.perf_counter_ns() - started) / 1000)
        targets = set(query["targets"])
        r1.append(len(targets & set(found[:1])) / len(targets))
        r5.append(len(targets & set(found[:5])) / len(targets))
        any1.append(float(bool(targets & set(found[:1]))))
        ranks = [rank for rank, name in enumerate(found, 1) if name in targets]
        mrr.append(1 / ranks[0] if ranks else 0.0)
    return {"R@1": statistics.fmean(r1), "any@1": statistics.fmean(any1), "R@5": statistics.fmean(r5),
            "MRR": statistics.fmean(mrr), "p50 µs": statistics.median(latency)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rankers", default="toolscope,toolscope+history,toolscope-legacy,bm25s,ratel-ai")
    parser.add_argument("--queries", default="queries.json",
                        help="queries.json (153, the team's, split a/b) or queries_people.json (508, held out: "
                             "written independently, by people's phrasing, per style; never tuned on)")
    args = parser.parse_args()
    catalog, queries = load(args.queries)
    if not any("split" in query for query in queries):
        people(catalog, queries, args.rankers.split(","))
        return
    split_a = [q for q in queries if q["split"] == "a"]
    split_b = [q for q in queries if q["split"] == "b"]
    sessions = [RecordedSession(task_message=q["query"], calls=[(t, {}) for t in q["targets"]]) for q in split_a]
    history = learn_history(reversed(sessions))
    print(f"{len(catalog)} tools, {len(queries)} queries ({len(split_a)} a, {len(split_b)} b)\n")
    print("| ranker | queries | R@1 | any@1 | R@5 | MRR@20 | p50 µs |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in args.rankers.split(","):
        rank = RANKERS[name]
        search = rank.build(catalog, history if rank.uses_history else None)
        for label, subset in ([("b (history from a)", split_b)] if rank.uses_history
                              else [("all", queries), ("b", split_b)]):
            m = measure(search, subset)
            print(f"| {name} | {label} | {m['R@1']:.1%} | {m['any@1']:.1%} | {m['R@5']:.1%} | {m['MRR']:.3f} "
                  f"| {m['p50 µs']:.0f} |")


def people(catalog: list[dict], queries: list[dict], rankers: list[str]) -> None:
    """The held-out set: every ranker on all queries, then R@5 per style; and whether any query
    was answered with nothing."""
    styles = sorted({query["style"] for query in queries})
    print(f"{len(catalog)} tools, {len(queries)} queries ({', '.join(styles)})\n")
    print("| ranker | R@1 | any@1 | R@5 | MRR@20 | p50 µs | empty answers | " + " | ".join(styles) + " |")
    print("| --- " * (7 + len(styles)) + "|")
    for name in rankers:
        rank = RANKERS[name]
        if rank.uses_history:
            continue  # no recorded sessions here to learn from
        search = rank.build(catalog, None)
        m = measure(search, queries)
        empty = sum(1 for query in queries if not search(query["query"], 20))
        per_style = [measure(search, [q for q in queries if q["style"] == style])["R@5"] for style in styles]
        print(f"| {name} | {m['R@1']:.1%} | {m['any@1']:.1%} | {m['R@5']:.1%} | {m['MRR']:.3f} | {m['p50 µs']:.0f} "
              f"| {empty} | " + " | ".join(f"{value:.1%}" for value in per_style) + " |")


if __name__ == "__main__":
    main()
