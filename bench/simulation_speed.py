"""Simulation speed (issue 14; issue 26 prices it): replay 10,000 sessions / 200,000 turns under a policy,
priced in dollars under the provider's prompt cache, then again unpriced (the same run's peer).

Target: < 60 s for the whole replay on this machine.

A scratch PostgreSQL database seeded in SQL as bench/rollup_speed.py seeds it (one project, a
40-tool catalog, 4 advertised sets of 12-40 tools, 2 calls per turn; EXTRA_SQL makes the rows
consistent for a replay), then, in one Django
process, a Simulation row per policy and `simulation_run` on it: the code the worker task runs
(session rows read in chunks of 500, replayed by the engine, progress written per chunk, the
summary stored). Policies: `all`; `context_rules` with 8 always-on tools and a rule per group;
`tool_search` with 4 always-on tools (every miss then asks the search).

    .venv/bin/python bench/simulation_speed.py [--sessions 10000] [--turns 20] [--calls-per-turn 2]
"""

from __future__ import annotations

import argparse
import json

from _stack import manage, scratch_database, stack_env
from rollup_speed import TOOLS, seed

# rollup_speed's rows, made consistent for a replay: each turn's schema tokens are its advertised
# set's (tool_NN costs 80 + NN), tools have descriptions, turns a task message, and the catalog a
# tool_search tool (50 tokens) that the sets do not advertise.
EXTRA_SQL = (
    """UPDATE telemetry_turn AS t SET schema_tokens = 80 * a.tool_count + a.tool_count * (a.tool_count - 1) / 2,
           task_message = 'fix the failing tests in the files we changed'
       FROM telemetry_advertisedset AS a WHERE a.id = t.advertised_set_id""",
    # A priced model and a growing conversation, so the replay also prices every request under the
    # provider's prompt cache (issue 26); the last round replays again with the model cleared.
    """UPDATE telemetry_turn SET model = 'claude-sonnet-4-5',
           estimated_input_tokens = coalesce(schema_tokens, 0) + 2000 + 300 * index""",
    """UPDATE policies_tool SET description = 'Works on '
           || (ARRAY['files', 'git history', 'failing tests', 'deployments', 'logs'])[1 + id %% 5] || '.'""",
    """INSERT INTO policies_tool (project_id, name, description, input_schema, source, schema_hash, schema_tokens,
           first_seen_at, last_seen_at, scope, requires_approval, redact, on_schema_error, retry_policy)
       VALUES (%(project)s, 'tool_search', 'Find tools by what they do.', '{}', 'local', 'h-search', 50, now(),
           now(), 'read_only', false, '[]', 'return_error', '{}')""",
)

POLICIES = {
    "all": {"mode": "all"},
    "context_rules": {"mode": "context_rules", "always_on": TOOLS[:8],
                      "groups": {"g1": TOOLS[8:14], "g2": TOOLS[14:20]},
                      "context_rules": [{"name": "r1", "keywords": ["deploy"], "groups": ["g1"]},
                                        {"name": "r2", "regex": "migrat\\w+", "groups": ["g2"]}]},
    "tool_search": {"mode": "tool_search", "always_on": [*TOOLS[:4], "tool_search"],
                    "tool_search": {"top_k": 8, "max_top_k": 20, "ranker": "bm25f-2"}},
}

RUN = """
import json, time
from django.utils import timezone
from datetime import timedelta
from toolscope.policies.models import Simulation
from toolscope.policies.services.simulation_runs import simulation_run
from toolscope.telemetry.models import Project
project = Project.objects.get(slug="bench")
selection = {"start": (timezone.now() - timedelta(days=400)).isoformat(), "end": timezone.now().isoformat(),
             "agent_name": None, "model": None, "limit": None}
from toolscope.telemetry.models import Turn
for priced in (True, False):
    if not priced:
        Turn.objects.filter(project=project).update(model="")
    for name, section in json.loads(POLICIES).items():
        key = name if priced else name + " (unpriced)"
        simulation = Simulation.objects.create(project=project, key=key, document={"selection": section},
                                               document_hash=key, source=name, selection=selection)
        started = time.perf_counter()
        done = simulation_run(simulation_id=simulation.pk)
        seconds = time.perf_counter() - started
        r = done.result
        dollars = r["dollars"]
        print(f"{key:25} {seconds:6.1f} s  sessions={r['sessions']:,} turns={r['turns']:,} calls={r['calls']:,} "
              f"saved={r['saved_share']:.1%} misses={r['misses']:,} (hard {r['hard_misses']:,}) "
              f"turns/s={r['turns'] / seconds:,.0f}  priced={dollars['priced_sessions']:,} "
              f"${dollars['recorded']:,.2f} -> ${dollars['policy']:,.2f} ({dollars['saved_share']:+.1%}), "
              f"list changes {dollars['cache_breaks']:,}")
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=20, help="Turns per session.")
    parser.add_argument("--calls-per-turn", type=int, default=2)
    parser.add_argument("--days", type=int, default=30)
    args = parser.parse_args()
    with scratch_database() as database_url:
        env = stack_env(database_url)
        manage(env, "migrate", "-v0")
        seed(database_url, args, extra_sql=EXTRA_SQL)
        code = f"POLICIES = {json.dumps(json.dumps(POLICIES))}\n{RUN}"
        print(manage(env, "shell", "-c", code).strip())


if __name__ == "__main__":
    main()
