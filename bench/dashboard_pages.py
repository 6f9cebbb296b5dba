"""Dashboard page speed over 1,000,000 tool calls: server-side render time and queries per page.

A scratch PostgreSQL database seeded in SQL with rollup_speed's statements (50,000 sessions over
30 days, 10 turns each, 2 tool calls per turn, 3% errors, 5% duplicates, 2% compacted, a 40-tool
catalog) plus the session summaries the workers keep, rolled up with `manage.py rollup --all`,
then each page rendered N times in-process by Django's test Client as a logged-in superuser (no
network, no browser: the server's share of a page view). Targets: p50 < 300 ms, <= 20 queries.

    .venv/bin/python bench/dashboard_pages.py [--sessions 50000] [--repeat 20] [--keep]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from contextlib import nullcontext
from typing import Any

import psycopg
import rollup_speed
from _stack import REPO, manage, percentile, scratch_database, stack_env

# Two agents (the sessions list filters by agent), and the session summaries filled in once the
# calls exist: the dashboard reads them, the rollup benchmark does not.
SESSIONS_SQL = """
INSERT INTO telemetry_session (project_id, client_id, agent_name, model, started_at, metadata, created_at, turn_count,
    tool_call_count, error_count, duplicate_tokens, near_window)
SELECT %(project)s, 's' || s, CASE WHEN s %% 3 = 0 THEN 'reviewer' ELSE 'coder' END, 'model-x',
       now() - interval '1 day' * %(days)s + interval '1 day' * %(days)s * (s - 1) / %(sessions)s, '{}', now(),
       0, 0, 0, 0, false
FROM generate_series(1, %(sessions)s) AS s
"""
SUMMARY_SQL = [
    """UPDATE telemetry_session AS s SET turn_count = t.turns, max_window_share = t.share, near_window = t.near
       FROM (SELECT session_id, count(*) AS turns, max(estimated_input_tokens) / 200000.0 AS share,
                    bool_or(near_window) AS near
             FROM telemetry_turn GROUP BY session_id) AS t
       WHERE t.session_id = s.id""",
    """UPDATE telemetry_session AS s SET tool_call_count = c.calls, error_count = c.errors, duplicate_tokens = c.dup
       FROM (SELECT session_id, count(*) AS calls, count(*) FILTER (WHERE status <> 'ok') AS errors,
                    sum(duplicate_tokens) AS dup
             FROM telemetry_toolcall GROUP BY session_id) AS c
       WHERE c.session_id = s.id""",
]
TARGET_P50_MS = 300
TARGET_QUERIES = 20


def _pages(session_id: str) -> list[tuple[str, str]]:
    return [
        ("overview, 7 days (hourly)", "/p/bench/"),
        ("overview, 30 days (daily)", "/p/bench/?range=30d"),
        ("tools, 30 days", "/p/bench/tools/?range=30d"),
        ("tools, 30 days, by p95", "/p/bench/tools/?range=30d&sort=p95_ms"),
        ("tool page, 30 days", "/p/bench/tools/tool_03/?range=30d"),
        ("sessions, 7 days", "/p/bench/sessions/"),
        ("sessions, errors only", "/p/bench/sessions/?errors=yes"),
        ("session page", f"/p/bench/sessions/{session_id}/"),
    ]


def _django(env: dict[str, str]) -> tuple[Any, str]:
    """Django set up in this process against the scratch database; a logged-in Client and the
    newest session's id."""
    os.environ.update({key: env[key] for key in ("DATABASE_URL", "TOOLSCOPE_ENV", "CELERY_BROKER_URL", "DEBUG",
                                                 "LOG_LEVEL", "ALLOWED_HOSTS")})
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolscope.settings")
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client

    from toolscope.telemetry.models import Session

    user = get_user_model().objects.create_superuser("bench", "bench@example.com", "bench-password")
    client = Client()
    client.force_login(user)
    newest = Session.objects.order_by("-started_at").values_list("client_id", flat=True).first()
    return client, newest


def _render(client: Any, url: str, *, capture: bool = False) -> tuple[float, int]:
    """Milliseconds to render `url`, and its query count (capture) or its size in bytes."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    context = CaptureQueriesContext(connection) if capture else nullcontext()
    started = time.perf_counter()
    with context as queries:
        response = client.get(url)
        body = b"".join(response.streaming_content) if response.streaming else response.content
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise SystemExit(f"{url} answered {response.status_code}")
    return elapsed, len(queries) if capture else len(body)


def measure(env: dict[str, str], repeat: int) -> bool:
    client, session_id = _django(env)
    print(f"\n{'page':28} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'queries':>8} {'KB':>6}")
    ok = True
    for label, url in _pages(session_id):
        _, size = _render(client, url)  # warm-up: templates compiled, connection open
        _, queries = _render(client, url, capture=True)
        times = [_render(client, url)[0] for _ in range(repeat)]
        p50, p95 = percentile(times, 0.5), percentile(times, 0.95)
        ok &= p50 < TARGET_P50_MS and queries <= TARGET_QUERIES
        print(f"{label:28} {p50:8.1f} {p95:8.1f} {max(times):8.1f} {queries:8d} {size / 1024:6.0f}")
    return ok


def seed(database_url: str, args: argparse.Namespace) -> None:
    rollup_speed.seed(database_url, args, sessions_sql=SESSIONS_SQL, extra_sql=tuple(SUMMARY_SQL))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=50_000)
    parser.add_argument("--turns", type=int, default=10, help="Turns per session.")
    parser.add_argument("--calls-per-turn", type=int, default=2)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=20, help="Renders per page (after one warm-up).")
    args = parser.parse_args()
    with scratch_database() as database_url:
        env = stack_env(database_url, ALLOWED_HOSTS="testserver")
        manage(env, "migrate", "-v0")
        seed(database_url, args)
        started = time.perf_counter()
        manage(env, "rollup", "--all")
        print(f"rollup --all: {time.perf_counter() - started:.1f} s")
        with psycopg.connect(database_url, autocommit=True) as conn:
            # What autovacuum would have done by the time anyone looks at the pages.
            conn.execute("ANALYZE")
            calls = conn.execute("SELECT count(*) FROM telemetry_toolcall").fetchone()[0]
        print(f"{calls:,} tool calls")
        ok = measure(env, args.repeat)
        # Django's connection must let go before the scratch database is dropped.
        from django.db import connections

        connections.close_all()
    print(f"\ntargets (p50 < {TARGET_P50_MS} ms, <= {TARGET_QUERIES} queries): {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
