"""Retention at scale (issue 17): expiring a day of a long, partitioned history, under ingest.

A scratch PostgreSQL database, migrated (tool calls, turns, artifacts and ingest batches
partitioned by the day they expire), holding `--days` days of history (rollup_speed's seeding SQL:
sessions of 10 turns with 2 tool calls each, spread evenly; the project keeps raw data `--days`
days, so each day of history is one day partition per table). Then, with the real web server
(gunicorn, 2 workers) taking POST /api/v1/ingest (`--rate` requests/s of 20 events) throughout:

1. **ours**: the oldest day expired as beat does it (`retention_expire`: DETACH PARTITION
   CONCURRENTLY, then DROP TABLE, per table; then the sessions left without rows), alone (the
   first day, partly filled, then the second, a full one), then the third day while a 5 s report
   query over the tool calls is running (what a heavy dashboard or CSV export does);
2. **naive peer**: the fourth day dropped with a plain `DROP TABLE` of its partitions under the same
   5 s query: it queues behind the query and every insert into the table queues behind it;
3. the dashboard's pages rendered on the remaining history (bench/dashboard_pages.py's pages,
   in-process, against the target of p50 < 300 ms).

Reported: each expiry's wall time and rows, and the ingest requests' latency before and during
each (p50/p95/max), with any failed request counted.

    .venv/bin/python bench/retention.py [--days 90] [--sessions 90000] [--rate 20] [--repeat 10]

(`--sessions` x 20 calls spread over `--days` days: the default is 20,000 tool calls a day.)
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import uuid
from datetime import UTC, date, datetime, timedelta

import dashboard_pages
import httpx
import psycopg
from _stack import REPO, create_key, gunicorn, manage, percentile, scratch_database, stack_env

LONG_QUERY = "SELECT count(*), sum(length(output)) FROM telemetry_toolcall, pg_sleep(5)"
# What processing keeps on each session: the days its first and last turn or call expire.
SESSION_EXPIRY_SQL = """
UPDATE telemetry_session AS s SET first_expires_on = t.first, expires_on = t.last
FROM (SELECT session_id, min(expires_on) AS first, max(expires_on) AS last FROM telemetry_turn GROUP BY session_id) AS t
WHERE t.session_id = s.id
"""


class Ingest(threading.Thread):
    """POSTs `rate` ingest requests a second on a fixed schedule; records (sent at, latency, status)."""

    def __init__(self, base: str, key: str, rate: float) -> None:
        super().__init__(daemon=True)
        self.base, self.key, self.rate = base, key, rate
        self.samples: list[tuple[float, float, int]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        with httpx.Client(base_url=self.base, headers={"Authorization": f"Bearer {self.key}"}, timeout=60) as client:
            due = time.monotonic()
            while not self.stop.is_set():
                session = uuid.uuid4().hex[:12]
                now = datetime.now(UTC).isoformat()
                events = [{"type": "tool_call", "id": f"{session}:{n}", "session_id": session, "turn_index": 0,
                           "tool_name": f"tool_{n % 12:02d}", "output": f"line {n}\n" * 20, "duration_ms": 12.5,
                           "timestamp": now} for n in range(20)]
                started = time.monotonic()
                try:
                    status = client.post("/api/v1/ingest", json={"events": events}).status_code
                except httpx.HTTPError:
                    status = 0
                self.samples.append((started, (time.monotonic() - started) * 1000, status))
                due += 1 / self.rate
                time.sleep(max(0.0, due - time.monotonic()))

    def window(self, start: float, end: float) -> str:
        chosen = [(ms, status) for at, ms, status in self.samples if start <= at <= end]
        if not chosen:
            return "no requests"
        times = [ms for ms, _ in chosen]
        failed = sum(status != 202 for _, status in chosen)
        return (f"{len(chosen):4d} requests  p50 {percentile(times, 0.5):7.1f}  p95 {percentile(times, 0.95):7.1f}"
                f"  max {max(times):7.1f} ms  failed {failed}")


def _django(env: dict[str, str]) -> None:
    os.environ.update({key: env[key] for key in ("DATABASE_URL", "TOOLSCOPE_ENV", "CELERY_BROKER_URL", "DEBUG",
                                                 "LOG_LEVEL", "ALLOWED_HOSTS")})
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolscope.settings")
    sys.path.insert(0, str(REPO))
    import django

    django.setup()


def _long_query(database_url: str) -> threading.Thread:
    def run() -> None:
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(LONG_QUERY)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    time.sleep(0.5)  # running, holding its lock on the parent table and its partitions
    return thread


def expire_ours(database_url: str, ingest: Ingest, day: date, *, reader: bool) -> None:
    from toolscope.telemetry import partitions
    from toolscope.telemetry.services.retention import retention_expire

    rows = sum(max(p.rows, 0) for p in partitions.partitions_list() if p.day == day)
    query = _long_query(database_url) if reader else None
    started = time.monotonic()
    report = retention_expire(on=day + timedelta(days=1))
    elapsed = time.monotonic() - started
    if query is not None:
        query.join()
    time.sleep(1)
    print(f"\nours (DETACH CONCURRENTLY + DROP), day {day}: {len(report.partitions_dropped)} partitions, "
          f"~{rows:,} rows, {elapsed:.2f} s ({'a 5 s report query was running' if reader else 'no long query'}; "
          f"sessions deleted {report.sessions_deleted})")
    print(f"  ingest during: {ingest.window(started, started + max(elapsed, 1.0))}")


def expire_naive(database_url: str, ingest: Ingest, day: date) -> None:
    from toolscope.telemetry import partitions

    chosen = [p for p in partitions.partitions_list() if p.day == day]
    reader = _long_query(database_url)
    started = time.monotonic()
    with psycopg.connect(database_url, autocommit=True) as conn:
        for partition in chosen:
            conn.execute(f'DROP TABLE "{partition.name}"')
    elapsed = time.monotonic() - started
    reader.join()
    time.sleep(1)
    print(f"\nnaive peer (plain DROP TABLE), day {day}: {len(chosen)} partitions, "
          f"~{sum(max(p.rows, 0) for p in chosen):,} rows, {elapsed:.2f} s (the same 5 s query running)")
    print(f"  ingest during: {ingest.window(started, started + elapsed)}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--sessions", type=int, default=90_000)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--calls-per-turn", type=int, default=2)
    parser.add_argument("--rate", type=float, default=20, help="Ingest requests per second (20 events each).")
    parser.add_argument("--repeat", type=int, default=10, help="Renders per page.")
    args = parser.parse_args()
    args.retention = args.days
    with scratch_database() as database_url:
        env = stack_env(database_url, ALLOWED_HOSTS="testserver,127.0.0.1")
        manage(env, "migrate", "-v0")
        manage(env, "shell", "-c", "from toolscope.telemetry.services.retention import partitions_ensure;"
               f"partitions_ensure(retention_days={args.days})")
        dashboard_pages.seed(database_url, args)
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute("UPDATE telemetry_project SET retention_days = %s", [args.days])
            conn.execute(SESSION_EXPIRY_SQL)
            calls = conn.execute("SELECT count(*) FROM telemetry_toolcall").fetchone()[0]
            size = conn.execute("SELECT pg_size_pretty(sum(pg_total_relation_size(oid))) FROM pg_class "
                                "WHERE relname ~ '^telemetry_(toolcall|turn|artifact|ingestbatch)_p'").fetchone()[0]
        started = time.perf_counter()
        manage(env, "rollup", "--all")
        print(f"{calls:,} tool calls over {args.days} days ({calls / args.days:,.0f} a day), partitions {size}; "
              f"rollup --all {time.perf_counter() - started:.1f} s")
        key = create_key(env, slug="ingest")
        _django(env)
        from toolscope.telemetry import partitions

        days = sorted({p.day for p in partitions.partitions_list() if max(p.rows, 0) > 0})
        print(f"{len(partitions.partitions_list()):,} partitions; days with rows {days[0]} .. {days[-1]}")
        with gunicorn(env, workers=2) as base:
            ingest = Ingest(base, key, args.rate)
            ingest.start()
            time.sleep(10)
            calm = time.monotonic()
            print(f"\ningest before (10 s): {ingest.window(calm - 9, calm)}")
            expire_ours(database_url, ingest, days[0], reader=False)  # the first day: partly filled
            expire_ours(database_url, ingest, days[1], reader=False)  # a full day
            expire_ours(database_url, ingest, days[2], reader=True)
            expire_naive(database_url, ingest, days[3])
            ingest.stop.set()
            ingest.join()
        from django.db import connections

        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute("ANALYZE")
        ok = dashboard_pages.measure(env, args.repeat)
        connections.close_all()
    print(f"\npages' targets (p50 < {dashboard_pages.TARGET_P50_MS} ms): {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
