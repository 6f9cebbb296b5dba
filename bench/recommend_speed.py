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


def sessions_and_catalog(count: int):  # type: ignore[no-untyped-def]
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
        sessions.append(ReplaySession(f"{conversation.id}#{index}", turns))
    search_tokens = count_tokens(render_tool(SEARCH_TOOL["name"], SEARCH_TOOL["description"],
                                             SEARCH_TOOL["input_schema"]))
    catalog_with_search, costs = with_search_tool(tools, costs, search_tokens)
    return sessions, catalog_with_search, costs


def recommend_once(sessions, catalog, costs, figures: str | None = None) -> dict[str, float]:  # type: ignore[no-untyped-def]
    from toolscope_agent.engine.recommend import candidates, evaluate, grouped_split, pareto, recommend, refitted

    times = {}
    start = time.perf_counter()
    fit, held_out = grouped_split(sessions)
    found = candidates(catalog, fit, schema_tokens=costs)
    times["learn"] = time.perf_counter() - start
    mark = time.perf_counter()
    scored = evaluate(catalog, found, held_out, schema_tokens=costs)
    times["replay"] = time.perf_counter() - mark
    mark = time.perf_counter()
    scored = refitted(scored, catalog, sessions, schema_tokens=costs)
    times["refit"] = time.perf_counter() - mark
    best = recommend(pareto(scored))
    times["total"] = time.perf_counter() - start
    turns = sum(len(session.turns) for session in held_out)
    if figures:
        Path(figures).write_text(json.dumps([
            {key: value for key, value in asdict(candidate).items() if key not in ("selection", "outputs")}
            | {"document": candidate.document()} for candidate in scored], indent=1, sort_keys=True))
    print(f"{len(sessions)} sessions ({len(fit)} fit, {len(held_out)} held out, {turns:,} held-out requests), "
          f"{len(found)} candidates; recommended: {best.name if best else None}")
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=5000)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--figures", help="write every scored candidate's figures to this JSON file")
    args = parser.parse_args()
    import django

    django.setup()
    sessions, catalog, costs = sessions_and_catalog(args.sessions)
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(recommend_once, sessions, catalog, costs)
        pstats.Stats(profile).sort_stats("cumulative").print_stats(25)
        return
    times = recommend_once(sessions, catalog, costs, args.figures)
    print(" | ".join(f"{name} {seconds:.1f} s" for name, seconds in times.items()))


if __name__ == "__main__":
    main()
