"""How long a recommendation's engine work takes on 5,000 multi-turn sessions (issue 25: "a
recommendation on 5,000 sessions in a worker < 2 min").

The sessions are BFCL's 800 multi-turn conversations of a 128-tool agent (bench/multiturn_data.py,
one request per call plus a closing one per instruction), repeated with new keys until there are
`--sessions` of them, in the data's split order (older tasks first). Every request advertises
the 128 tools, priced with the o200k_base tokenizer as toolscope prices them. Timed, as the
worker runs them after reading the sessions (policy_recommendations): the split by task, the
candidates learnt on the fit sessions, every candidate replayed on the held-out ones, the refit on
all of them, the Pareto front and the pick. Reading 5,000 sessions from PostgreSQL is not in
these figures (bench/simulation_speed.py times the replay's own reading).

    .venv/bin/python bench/recommend_speed.py [--sessions 5000] [--profile] [--figures FILE]
                                              [--model gpt-4.1] [--semantic] [--held-out-limit N]

`--model M` prices every held-out session in dollars under M's prompt cache (genai-prices' price,
the provider's rules), as the worker does for sessions whose model has a price: the candidates
then include the cache-keeping shapes. `--semantic` gives the candidates that search with
toolscope's search the server's default model (the bundled all-MiniLM-L6-v2), as the worker has
it. With both, the engine does what bench/recommend_worker_speed.py's worker does. As the worker,
it replays at most HELD_OUT_LIMIT held-out sessions (learning.held_out_sample); `--held-out-limit 0`
replays all of them.

`--figures FILE` writes every scored candidate's name and figures as JSON: two commits' files
compare a speed-up's results, candidate by candidate.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import time
from dataclasses import asdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent / "sdk")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolscope.settings")


def sessions_and_catalog(count: int, model: str = ""):  # type: ignore[no-untyped-def]
    from multiturn_data import catalog, load, split
    from toolscope_agent.engine.recommend import with_search_tool
    from toolscope_agent.engine.render import SEARCH_TOOL
    from toolscope_agent.engine.schemas import normalize_tool
    from toolscope_agent.engine.simulation import RecordedCall, RecordedTurn, ReplaySession
    from toolscope_agent.engine.tokens import render_tool

    from toolscope.tokenizer import counter

    count_tokens = counter("o200k_base")
    tools = [normalize_tool(tool) for tool in catalog()[0]]
    costs = {tool["name"]: count_tokens(render_tool(tool["name"], tool["description"], tool["input_schema"]))
             for tool in tools}
    advertised, total = list(costs), sum(costs.values())
    older, newer = split(load())
    conversations = older + newer
    sessions = []
    for index in range(count):
        conversation = conversations[index * len(conversations) // count]
        turns, context = [], 200
        for turn in conversation.turns:
            message = turn.message
            for call in turn.calls:
                output = count_tokens(call.output)
                turns.append(RecordedTurn(message=message, advertised=advertised, advertised_tokens=total,
                                          input_tokens=total + context,
                                          calls=[RecordedCall(call.name, call.arguments, output)]))
                context += output + 30
                message = ""
            turns.append(RecordedTurn(message=message, advertised=advertised, advertised_tokens=total,
                                      input_tokens=total + context))
        sessions.append(ReplaySession(f"{conversation.id}#{index}", turns, model=model))
    search_tokens = count_tokens(render_tool(SEARCH_TOOL["name"], SEARCH_TOOL["description"],
                                             SEARCH_TOOL["input_schema"]))
    catalog_with_search, costs = with_search_tool(tools, costs, search_tokens)
    return sessions, catalog_with_search, costs


def server_parts(catalog, model: str, semantic: bool):  # type: ignore[no-untyped-def]
    """The pricing by model and the fused search (with its settings) the worker would have."""
    from datetime import UTC, datetime

    from django.conf import settings as django_settings
    from toolscope_agent.engine.render import SEARCH_TOOL_NAME
    from toolscope_agent.engine.search import DEFAULT_RANKER
    from toolscope_agent.semantic import DEFAULT_FUSION, HybridIndex, SemanticRanker

    from toolscope.policies.services.semantic_search import semantic_settings
    from toolscope.prices import cache_pricing, model_price

    pricing = None
    if model:
        price = model_price(model=model, at=datetime.now(UTC))
        if price is None:
            raise SystemExit(f"genai-prices has no price for {model!r}")
        pricing = {model: cache_pricing(price, model=model)}
    settings = semantic_settings() if semantic else None
    if semantic and settings is None:
        raise SystemExit("--semantic: this server has no semantic model (TOOL_SEARCH_MODEL)")
    # The server's fused index, embedding the catalog here (the server reads stored vectors).
    fused = (HybridIndex([tool for tool in catalog if tool["name"] != SEARCH_TOOL_NAME],
                         SemanticRanker(django_settings.TOOL_SEARCH_MODEL), ranker=DEFAULT_RANKER, history=None,
                         method=settings.get("fusion", DEFAULT_FUSION), alpha=settings["alpha"])
             if settings else None)
    return pricing, settings, fused


def recommend_once(sessions, catalog, costs, figures: str | None = None, *,  # type: ignore[no-untyped-def]
                   pricing=None, semantic=None, fused=None, limit: int = 0) -> dict[str, float]:
    from toolscope_agent.engine.learning import held_out_sample
    from toolscope_agent.engine.recommend import candidates, evaluate, grouped_split, pareto, recommend, refitted

    times = {}
    start = time.perf_counter()
    fit, newer = grouped_split(sessions)
    held_out = held_out_sample(newer, limit or len(newer))
    found = candidates(catalog, fit, schema_tokens=costs, semantic=semantic)
    times["learn"] = time.perf_counter() - start
    mark = time.perf_counter()
    scored = evaluate(catalog, found, held_out, schema_tokens=costs, pricing=pricing, semantic=fused)
    times["replay"] = time.perf_counter() - mark
    mark = time.perf_counter()
    scored = refitted(scored, catalog, sessions, schema_tokens=costs, semantic=semantic)
    times["refit"] = time.perf_counter() - mark
    best = recommend(pareto(scored))
    times["total"] = time.perf_counter() - start
    turns = sum(len(session.turns) for session in held_out)
    if figures:
        Path(figures).write_text(json.dumps([
            {key: value for key, value in asdict(candidate).items() if key not in ("selection", "outputs")}
            | {"document": candidate.document()} for candidate in scored], indent=1, sort_keys=True))
    print(f"{len(sessions)} sessions ({len(fit)} fit, {len(newer)} held out, {len(held_out)} replayed: "
          f"{turns:,} requests), "
          f"{len(found)} candidates; recommended: {best.name if best else None}")
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=5000)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--figures", help="write every scored candidate's figures to this JSON file")
    parser.add_argument("--model", default="", help="price the held-out sessions as this model's (genai-prices)")
    parser.add_argument("--semantic", action="store_true", help="the server's semantic model for toolscope's search")
    parser.add_argument("--held-out-limit", type=int, default=None,
                        help="held-out sessions replayed, at most (default: the worker's HELD_OUT_LIMIT; 0: all)")
    args = parser.parse_args()
    import django

    django.setup()
    sessions, catalog, costs = sessions_and_catalog(args.sessions, args.model)
    pricing, semantic, fused = server_parts(catalog, args.model, args.semantic)
    from toolscope_agent.engine.recommend import HELD_OUT_LIMIT

    limit = HELD_OUT_LIMIT if args.held_out_limit is None else args.held_out_limit
    parts = {"pricing": pricing, "semantic": semantic, "fused": fused, "limit": limit}
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(recommend_once, sessions, catalog, costs, **parts)
        pstats.Stats(profile).sort_stats("cumulative").print_stats(30)
        return
    times = recommend_once(sessions, catalog, costs, args.figures, **parts)
    print(" | ".join(f"{name} {seconds:.1f} s" for name, seconds in times.items()))


if __name__ == "__main__":
    main()
