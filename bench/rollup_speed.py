"""Rollup speed: `manage.py rollup --all` over 1,000,000 tool calls, then a refresh of every hour.

A scratch PostgreSQL database seeded in SQL (INSERT ... SELECT generate_series, not the ORM):
one project, 50,000 sessions spread over 30 days (3 agents, 2 models, every fifth turn a third
model: 9 rollup slices; --agents 1 --models 1 for one), 10 turns each advertising one of 4 sets
of 12-40 tools, 2 tool calls per turn (3% errors, 5% duplicates, 2% compacted), a catalog with
schema versions. Then, each in a subprocess as an operator would run it:

    rollup --all    rebuild every hour with data (target: < 60 s for 1,000,000 tool calls)
    rollup          refresh, after every hour was marked dirty (limit 500 per transaction)

    .venv/bin/python bench/rollup_speed.py [--sessions 50000] [--turns 10] [--calls-per-turn 2] [--days 30]
                                          [--agents 3] [--models 2]
"""

from __future__ import annotations

import argparse
import json
import time

import psycopg
from _stack import manage, scratch_database, stack_env

TOOLS = [f"tool_{number:02d}" for number in range(40)]
# Set k advertises the first 12, 20, 30 or 40 tools.
SET_SIZES = (12, 20, 30, 40)

SESSIONS_SQL = """
INSERT INTO telemetry_session (project_id, client_id, agent_name, model, started_at, metadata, created_at,
    turn_count, tool_call_count, error_count, duplicate_tokens, near_window)
SELECT %(project)s, 's' || s, 'agent-' || (s %% %(agents)s), 'model-' || (s %% %(models)s),
       now() - interval '1 day' * %(days)s + interval '1 day' * %(days)s * (s - 1) / %(sessions)s, '{}', now(),
       0, 0, 0, 0, false
FROM generate_series(1, %(sessions)s) AS s
"""
TURNS_SQL = """
INSERT INTO telemetry_turn (project_id, session_id, client_id, index, model, started_at, advertised_set_id,
    input_tokens, output_tokens, task_message, messages, system_prompt_tokens, schema_tokens, message_tokens,
    tool_output_tokens, estimated_input_tokens, near_window, created_at, expires_on)
SELECT s.project_id, s.id, 't' || s.id || '-' || j, j,
       CASE WHEN j %% 5 = 4 AND %(models)s > 1 THEN 'model-small' ELSE s.model END,
       s.started_at + interval '20 seconds' * j,
       (%(sets)s::bigint[])[1 + s.id %% 4], 3000 + 400 * j, 150, '', '[]', 1500, 200 * (1 + s.id %% 4),
       200 * j, 300 * j, 1500 + 200 * (1 + s.id %% 4) + 500 * j, j >= 9, now(),
       -- The day it expires, as processing sets it (telemetry/retention.py): its day + retention.
       GREATEST(((s.started_at + interval '20 seconds' * j) AT TIME ZONE 'UTC')::date + %(retention)s,
                (now() AT TIME ZONE 'UTC')::date)
FROM telemetry_session AS s CROSS JOIN generate_series(0, %(turns)s - 1) AS j
WHERE s.project_id = %(project)s
"""
CALLS_SQL = """
INSERT INTO telemetry_toolcall (project_id, session_id, turn_id, model, turn_index, client_id, call_id, tool_name,
    arguments, output, status, error, duration_ms, retries, approval, started_at, output_hash, output_tokens,
    duplicate_tokens, placeholder, created_at, expires_on)
SELECT t.project_id, t.session_id, t.id, t.model, t.index, 'c' || t.id || '-' || k, '',
       'tool_' || lpad(((t.id * 7 + k * 13) %% 12)::text, 2, '0'), '{}', '',
       CASE WHEN random() < 0.03 THEN 'error' ELSE 'ok' END, '', round((random() * 900)::numeric, 1), 0,
       'not_required', t.started_at + interval '2 seconds' * k, '', (random() * 2000)::int, 0, '', now(),
       t.expires_on
FROM telemetry_turn AS t CROSS JOIN generate_series(0, %(calls_per_turn)s - 1) AS k
WHERE t.project_id = %(project)s
"""
WASTE_SQL = [
    # Ids are consecutive: the previous row is an earlier call whose output this one repeats.
    "UPDATE telemetry_toolcall SET duplicate_of_id = id - 1, duplicate_tokens = 120 WHERE id %% 20 = 7",
    """INSERT INTO telemetry_artifact (id, project_id, content_id, original, compacted, tokens_before, tokens_after,
           strategy, created_at, expires_on)
       SELECT md5(id::text)::uuid, project_id, left(md5(id::text), 24), '', '', 5000, 800, 'head_tail', now(),
              expires_on
       FROM telemetry_toolcall WHERE id %% 50 = 3""",
    "UPDATE telemetry_toolcall SET artifact_id = md5(id::text)::uuid WHERE id %% 50 = 3",
]
MARK_ALL_SQL = """
INSERT INTO telemetry_dirtyhour (project_id, hour, marked_at)
SELECT DISTINCT project_id, date_trunc('hour', started_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', now()
FROM telemetry_toolcall
"""
COUNTS_SQL = """
SELECT (SELECT count(*) FROM telemetry_session), (SELECT count(*) FROM telemetry_turn),
       (SELECT count(*) FROM telemetry_toolcall), (SELECT count(*) FROM telemetry_toolhourly),
       (SELECT count(*) FROM telemetry_projecthourly), (SELECT sum(tool_calls) FROM telemetry_projecthourly),
       (SELECT sum(turns) FROM telemetry_projecthourly), (SELECT sum(times_advertised) FROM telemetry_toolhourly)
"""


def seed_catalog(cursor: psycopg.Cursor, project: int) -> list[int]:
    """The catalog (every tool with two schema versions) and the 4 advertised sets; returns set ids."""
    for number, name in enumerate(TOOLS):
        cursor.execute(
            "INSERT INTO policies_tool (project_id, name, description, input_schema, source, schema_hash,"
            " schema_tokens, first_seen_at, last_seen_at, scope, requires_approval, redact, on_schema_error,"
            " retry_policy)"
            " VALUES (%s, %s, '', '{}', 'local', %s, %s, now(), now(), 'read_only', false, '[]', 'return_error', '{}')"
            " RETURNING id", [project, name, f"h-{name}", 80 + number])
        (tool_id,) = cursor.fetchone()
        cursor.executemany(
            "INSERT INTO policies_toolversion (tool_id, schema_hash, description, input_schema, schema_tokens,"
            " first_seen_at) VALUES (%s, %s, '', '{}', %s, now())",
            [(tool_id, f"h-{name}", 80 + number), (tool_id, f"old-{name}", 60 + number)])
    set_ids = []
    for size in SET_SIZES:
        tools = [{"name": name, "schema_hash": f"h-{name}"} for name in TOOLS[:size]]
        cursor.execute(
            "INSERT INTO telemetry_advertisedset (project_id, digest, tools, tool_count, created_at)"
            " VALUES (%s, %s, %s, %s, now()) RETURNING id", [project, f"set-{size}", json.dumps(tools), size])
        set_ids.append(cursor.fetchone()[0])
    return set_ids


def seed(database_url: str, args: argparse.Namespace, *, sessions_sql: str = SESSIONS_SQL,
         extra_sql: tuple[str, ...] = ()) -> None:
    """The project, catalog, sessions, turns and calls; `extra_sql` runs last (same parameters)."""
    started = time.perf_counter()
    with psycopg.connect(database_url) as conn, conn.cursor() as cursor:
        cursor.execute("INSERT INTO telemetry_project (slug, name, encoding, context_window, tool_error_patterns,"
                       " created_at) VALUES ('bench', 'bench', 'o200k_base', 200000, '[]', now()) RETURNING id")
        (project,) = cursor.fetchone()
        params = {"project": project, "sessions": args.sessions, "days": args.days, "turns": args.turns,
                  "calls_per_turn": args.calls_per_turn, "sets": seed_catalog(cursor, project),
                  "retention": getattr(args, "retention", 30), "agents": getattr(args, "agents", 3),
                  "models": getattr(args, "models", 2)}
        for sql in (sessions_sql, TURNS_SQL, CALLS_SQL, *WASTE_SQL, *extra_sql):
            cursor.execute(sql, params)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    print(f"seeded in {time.perf_counter() - started:.1f} s (including VACUUM ANALYZE)")


def timed(env: dict[str, str], *args: str) -> None:
    started = time.perf_counter()
    output = manage(env, *args).strip()
    print(f"manage.py {' '.join(args)}: {time.perf_counter() - started:.1f} s wall (with process start)")
    print("    " + output.replace("\n", "\n    "))


def report(database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        sessions, turns, calls, tool_hourly, project_hourly, rolled_calls, rolled_turns, advertised = (
            conn.execute(COUNTS_SQL).fetchone()
        )
    print(f"raw rows: sessions={sessions:,} turns={turns:,} tool_calls={calls:,}")
    print(f"rollups: tool_hourly={tool_hourly:,} project_hourly={project_hourly:,} "
          f"tool_calls rolled up={rolled_calls:,} turns rolled up={rolled_turns:,} times advertised={advertised:,}")
    if (rolled_calls, rolled_turns) != (calls, turns):
        raise SystemExit("rollups do not add up to the raw rows")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=50_000)
    parser.add_argument("--turns", type=int, default=10, help="Turns per session.")
    parser.add_argument("--calls-per-turn", type=int, default=2)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--agents", type=int, default=3, help="Agents the sessions are spread over.")
    parser.add_argument("--models", type=int, default=2,
                        help="Session models; above 1, every fifth turn uses one more (rollup slices: "
                             "agents x (models + 1)).")
    args = parser.parse_args()
    with scratch_database() as database_url:
        env = stack_env(database_url)
        manage(env, "migrate", "-v0")
        seed(database_url, args)
        timed(env, "rollup", "--all")
        report(database_url)
        with psycopg.connect(database_url) as conn:
            marked = conn.execute(MARK_ALL_SQL).rowcount
        print(f"marked {marked:,} hours dirty")
        timed(env, "rollup")
        report(database_url)


if __name__ == "__main__":
    main()
