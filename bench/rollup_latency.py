"""Rollup latency: from an ingest request's 202 to its calls being visible in the hourly rollups.

The whole stack on this machine against a scratch PostgreSQL database and a spare Redis DB, with a
queue name of its own: gunicorn (2 sync workers), one Celery worker (--concurrency 1 or 2) and
celery beat (sweeper, periodic rollup refresh, heartbeat). The project has the same draft policy
as bench/processing_throughput.py (bash* compacted to 400 tokens).

Load: `--rate` requests/s of `--events` tool_call events each (default 10 x 100 = 1,000 events/s),
paced on a fixed schedule for `--seconds`, 2 KB outputs, ~10% repeated outputs, no timestamp (the
server's receive time: every row lands in the current hour). Every request uses its own tool name
(`tool_<n>`), so a poller (one query per 50 ms round for all outstanding names) sees when
ToolHourly shows all of that request's calls:

    latency = first poll seeing sum(ToolHourly.calls) == events  -  the request's 202

Target: p95 and max under 5 s at 1,000 events/s. The IngestBatch rows split each latency into
queue wait (received -> started), processing (started -> finished) and rollup lag (finished ->
visible); the worker log gives each task's run time.

The poller also records when the request's tool first has its duration p95 (every call is timed):

    percentiles visible = first poll seeing all the calls and duration_p95_ms non-null  -  the 202

Since 2b71030 (DDSketch bins kept by processing) that is the same moment; before, the rollup
task's percentile refresh set them some time after the batch committed.

    .venv/bin/python bench/rollup_latency.py [--seconds 30] [--rate 10] [--events 100] [--concurrency 1]
        [--preload-minutes 10]   # first fill the current hour as if this load had run for 10 minutes

The preload copies tool calls by SQL, then rebuilds the project's hours (`manage.py rollup --all
--project bench`) so that ToolHourly/ProjectHourly hold what processing would have added for them
(sums, and duration bins and percentiles since 2b71030; on the code before it also CallDuration,
whose rows processing wrote beside each timed call). Works on the code before and after 2b71030.

Broker and cache: BENCH_ROLLUP_BROKER / BENCH_ROLLUP_CACHE (default Redis DB 5).

It also prints the CPU seconds used by each piece (and by everything else on the machine: other
people's tests count) and what the scratch database's active backends were doing or waiting for.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psycopg
import redis
from _stack import (
    celery_beat,
    celery_worker,
    cpu_delta,
    cpu_snapshot,
    create_key,
    gunicorn,
    manage,
    percentile,
    postmaster_pid,
    scratch_database,
    stack_env,
)
from processing_throughput import DUPLICATE_SHARE, code_version, output_2kb, output_pool, policy_setup

BROKER = os.environ.get("BENCH_ROLLUP_BROKER", "redis://127.0.0.1:6379/5")
CACHE = os.environ.get("BENCH_ROLLUP_CACHE", "redis://127.0.0.1:6379/5")
SESSION_CALLS = 50
POLL_SECONDS = 0.05
TARGET_SECONDS = 5.0
ARGUMENTS = {"path": "src/module_7.py", "offset": 120, "limit": 400, "pattern": "def .*_handler\\("}


def request_body(n: int, *, events: int, rng: random.Random, pool: list[str], prefix: str = "tool") -> str:
    tool = f"{prefix}_{n}"
    calls: list[dict] = []
    originals: list[dict] = []
    for j in range(events):
        sid = f"{prefix}{n}-s{j // SESSION_CALLS}"
        event = {"type": "tool_call", "id": f"{sid}:c{j}", "session_id": sid, "turn_index": j % SESSION_CALLS // 3,
                 "call_id": f"call_{j}", "tool_name": tool, "arguments": ARGUMENTS,
                 "status": "ok" if rng.random() > 0.03 else "error", "duration_ms": round(rng.uniform(2, 900), 1)}
        same_session = [o for o in originals if o["session_id"] == sid]
        if same_session and j % SESSION_CALLS > 5 and rng.random() < DUPLICATE_SHARE * 1.12:
            event["output"] = rng.choice(same_session)["output"]
        else:
            event["output"] = output_2kb(pool, rng, f"{sid}:c{j}")
            originals.append(event)
        calls.append(event)
    return json.dumps({"events": calls})


# What the scratch database's active backends are doing (or waiting for, and on whom).
WAITS_SQL = """
SELECT coalesce(a.wait_event_type || ':' || a.wait_event, 'cpu'), a.query,
       (SELECT b.query FROM pg_stat_activity AS b WHERE b.pid = (pg_blocking_pids(a.pid))[1])
FROM pg_stat_activity AS a
WHERE a.datname = current_database() AND a.state = 'active' AND a.pid <> pg_backend_pid()
"""


class Poller(threading.Thread):
    """One query per round for every outstanding tool name; records when each is complete."""

    def __init__(self, database_url: str, project_id: int, expected: int) -> None:
        super().__init__(daemon=True)
        self.db = psycopg.connect(database_url, autocommit=True)
        self.project_id, self.expected = project_id, expected
        self.outstanding: dict[str, tuple[float, float]] = {}  # name -> (monotonic, wall) of the 202
        self.visible: dict[str, tuple[float, float]] = {}  # name -> (latency s, wall time seen)
        self.percentiles: dict[str, tuple[float, float]] = {}  # the same, for calls + p95 non-null
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.rounds = 0
        self.waits: dict[str, int] = defaultdict(int)  # what our database's active backends wait on
        self.wait_samples = 0

    def accepted(self, name: str, mono: float, wall: float) -> None:
        with self.lock:
            self.outstanding[name] = (mono, wall)

    def run(self) -> None:
        while not self.stopping.is_set():
            with self.lock:
                names = list(self.outstanding)
            if names:
                rows = self.db.execute(
                    "SELECT tool_name, sum(calls), bool_and(duration_p95_ms IS NOT NULL) FROM telemetry_toolhourly"
                    " WHERE project_id = %s AND tool_name = ANY(%s) GROUP BY tool_name", [self.project_id, names],
                ).fetchall()
                now_mono, now_wall = time.monotonic(), time.time()
                self.rounds += 1
                if self.rounds % 4 == 0:
                    self.wait_samples += 1
                    for wait, query, blocker in self.db.execute(WAITS_SQL).fetchall():
                        what = f"{wait:22} {' '.join(query.split())[:45]}"
                        if blocker:
                            what += f"  <- blocked by: {' '.join(blocker.split())[:45]}"
                        self.waits[what] += 1
                with self.lock:
                    for name, calls, timed in rows:
                        if calls < self.expected or name not in self.outstanding:
                            continue
                        mono, _ = self.outstanding[name]
                        self.visible.setdefault(name, (now_mono - mono, now_wall))
                        if timed:  # outstanding until its percentiles show too
                            del self.outstanding[name]
                            self.percentiles[name] = (now_mono - mono, now_wall)
            self.stopping.wait(POLL_SECONDS)
        self.db.close()

    def wait_all(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if not self.outstanding:
                    return
            time.sleep(0.1)


PRELOAD_SQL = """
INSERT INTO telemetry_toolcall ({columns})
SELECT {values}
FROM telemetry_toolcall AS t CROSS JOIN generate_series(1, %(copies)s) AS g
WHERE t.project_id = %(project)s
"""


def preload(database_url: str, project_id: int, rows: int, env: dict[str, str]) -> float:
    """Fill the current hour with `rows` more tool calls, as if the stack had been taking this load
    for a while: copies of the rows already there (every column, so this follows the model), with
    new ids, tool names preload_00..39 and times spread over the hour so far; then the rollups of
    the hour as processing would have kept them (a rebuild from the raw rows). Returns seconds."""
    started = time.monotonic()
    with psycopg.connect(database_url, autocommit=True) as db:
        have = db.execute("SELECT count(*) FROM telemetry_toolcall WHERE project_id = %s", [project_id]).fetchone()[0]
        columns = [c for (c,) in db.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'telemetry_toolcall'"
            " AND column_name <> 'id' ORDER BY ordinal_position")]
        override = {
            "client_id": "t.client_id || '-p' || g", "tool_name": "'preload_' || lpad((g %% 40)::text, 2, '0')",
            "started_at": "date_trunc('hour', now()) + (now() - date_trunc('hour', now())) * random()",
            "artifact_id": "NULL", "duplicate_of_id": "NULL", "turn_id": "NULL",
        }
        values = ", ".join(override.get(c, f"t.{c}") for c in columns)
        db.execute(PRELOAD_SQL.format(columns=", ".join(columns), values=values),
                   {"copies": max(1, rows // max(1, have)), "project": project_id})
        if db.execute("SELECT to_regclass('telemetry_callduration')").fetchone()[0]:
            # What processing writes beside each timed call (the percentile refresh reads it).
            db.execute(
                "INSERT INTO telemetry_callduration (call_id, project_id, hour, tool_name, duration_ms)"
                " SELECT id, project_id, date_trunc('hour', started_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC',"
                " tool_name, duration_ms FROM telemetry_toolcall t WHERE project_id = %s AND duration_ms IS NOT NULL"
                " AND NOT EXISTS (SELECT 1 FROM telemetry_callduration d WHERE d.call_id = t.id)", [project_id])
            db.execute("VACUUM ANALYZE telemetry_callduration")
        db.execute("VACUUM ANALYZE telemetry_toolcall")
    # ToolHourly/ProjectHourly of the hour (sums; duration bins and percentiles), which processing
    # keeps batch by batch: a rebuild gives the same rows (bench/processing_throughput.py checks).
    manage(env, "rollup", "--all", "--project", "bench")
    with psycopg.connect(database_url, autocommit=True) as db:
        db.execute("VACUUM ANALYZE telemetry_toolhourly")
        db.execute("VACUUM ANALYZE telemetry_projecthourly")
    return time.monotonic() - started


def task_times(log: Path) -> dict[str, list[float]]:
    """Run time of each task from the worker log ('Task workers.x[id] succeeded in 0.12s')."""
    times: dict[str, list[float]] = defaultdict(list)
    for name, seconds in re.findall(r"Task (workers\.\w+)\[[^\]]+\] succeeded in ([0-9.]+)s", log.read_text()):
        times[name].append(float(seconds))
    return times


def summary(values: list[float]) -> str:
    if not values:
        return "n/a"
    return (f"p50={percentile(values, 0.5) * 1000:,.0f} p95={percentile(values, 0.95) * 1000:,.0f} "
            f"max={max(values) * 1000:,.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--rate", type=float, default=10, help="requests per second")
    parser.add_argument("--events", type=int, default=100, help="tool_call events per request")
    parser.add_argument("--concurrency", type=int, default=1, help="celery worker --concurrency")
    parser.add_argument("--senders", type=int, default=4, help="client threads keeping the schedule")
    parser.add_argument("--drain", type=float, default=90, help="seconds to wait for the last rollups")
    parser.add_argument("--preload-minutes", type=float, default=0,
                        help="first fill the current hour with this many minutes of the load (SQL copies)")
    args = parser.parse_args()

    version = code_version()
    load_before = os.getloadavg()
    rng = random.Random(5)
    pool = output_pool(rng)
    total = int(args.seconds * args.rate)
    print(f"building {total} request bodies ...", flush=True)
    bodies = [request_body(n, events=args.events, rng=rng, pool=pool) for n in range(total)]
    warm_bodies = [request_body(n, events=args.events, rng=rng, pool=pool, prefix="warm") for n in range(4)]
    queue = f"bench_rollup_{uuid.uuid4().hex[:8]}"
    logs = Path(tempfile.mkdtemp(prefix="toolscope-bench-"))

    with scratch_database() as database_url:
        env = stack_env(database_url)
        # The cache on Redis, as in production (before 2b71030 the rollup task's coalescing and
        # spacing flags in workers.tasks had to be shared by the worker's processes).
        env.update(CELERY_BROKER_URL=BROKER, INGEST_QUEUE=queue, CACHE_URL=CACHE)
        manage(env, "migrate", "-v0")
        key = create_key(env)
        policy_setup(env)
        with psycopg.connect(database_url, autocommit=True) as db:
            project_id = db.execute("SELECT id FROM telemetry_project WHERE slug = 'bench'").fetchone()[0]
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        with gunicorn(env, workers=2, log=logs / "web.log") as web, \
                celery_worker(env, queue=queue, log=logs / "worker.log", concurrency=args.concurrency) as worker, \
                celery_beat(env, log=logs / "beat.log", schedule=logs / "beat-schedule") as beat:
            poller = Poller(database_url, project_id, args.events)
            poller.start()
            # Warm-up (imports, tokenizer vocabulary, connections), not measured.
            with httpx.Client(base_url=web, headers=headers, timeout=30) as http:
                for n, body in enumerate(warm_bodies):
                    response = http.post("/api/v1/ingest", content=body)
                    assert response.status_code == 202, response.text[:300]
                    poller.accepted(f"warm_{n}", time.monotonic(), time.time())
            poller.wait_all(60)
            warm = dict(poller.visible)
            poller.visible.clear()
            poller.percentiles.clear()
            preloaded = 0
            if args.preload_minutes:
                preloaded = int(args.preload_minutes * 60 * args.rate * args.events)
                print(f"preloading {preloaded:,} tool calls into the current hour ...", flush=True)
                preload_seconds = preload(database_url, project_id, preloaded, env)
                with psycopg.connect(database_url, autocommit=True) as db:
                    preloaded = db.execute("SELECT count(*) FROM telemetry_toolcall").fetchone()[0]
                print(f"  {preloaded:,} tool calls in the hour after {preload_seconds:.0f} s", flush=True)
            port = web.rsplit(":", 1)[1]
            groups = {"worker": [worker.pid], "beat": [beat.pid],
                      "postgres (all DBs)": [postmaster_pid(database_url)]}
            match = {"gunicorn": f"127.0.0.1:{port}"}
            cpu_start = cpu_snapshot(groups, match)
            minute_start = datetime.now(UTC).strftime("%H:%M:%S")

            results: list[dict] = []
            errors: list[str] = []
            counter = {"next": 0}
            lock = threading.Lock()
            started = time.monotonic() + 0.2

            def sender() -> None:
                with httpx.Client(base_url=web, headers=headers, timeout=30) as http:
                    while True:
                        with lock:
                            n = counter["next"]
                            counter["next"] += 1
                        if n >= total:
                            return
                        due = started + n / args.rate
                        delay = due - time.monotonic()
                        if delay > 0:
                            time.sleep(delay)
                        sent = time.monotonic()
                        try:
                            response = http.post("/api/v1/ingest", content=bodies[n])
                        except httpx.HTTPError as exc:
                            errors.append(f"{n}: {exc!r}")
                            continue
                        done_mono, done_wall = time.monotonic(), time.time()
                        if response.status_code != 202 or response.json()["accepted"] != args.events:
                            errors.append(f"{n}: {response.status_code} {response.text[:200]}")
                            continue
                        poller.accepted(f"tool_{n}", done_mono, done_wall)
                        results.append({"n": n, "late": sent - due, "http": done_mono - sent, "wall": done_wall,
                                        "batch": response.json()["batch_id"]})

            threads = [threading.Thread(target=sender) for _ in range(args.senders)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            sending = time.monotonic() - started
            load_during = os.getloadavg()
            cpu_sent = cpu_snapshot(groups, match)
            poller.wait_all(args.drain)
            drained = time.monotonic() - started
            cpu_end = cpu_snapshot(groups, match)
            poller.stopping.set()
            poller.join()
            with psycopg.connect(database_url, autocommit=True) as db:
                batches = {row[0]: row[1:] for row in db.execute(
                    "SELECT id, received_at, started_at, finished_at, status FROM telemetry_ingestbatch")}
                dirty_left = db.execute("SELECT count(*) FROM telemetry_dirtyhour").fetchone()[0]
                rows = db.execute("SELECT count(*), (SELECT coalesce(sum(calls), 0) FROM telemetry_toolhourly)"
                                  " FROM telemetry_toolcall").fetchone()
                # Partitions included (telemetry_toolcall is partitioned by day since bd604f7).
                table_sizes = [db.execute(
                    "SELECT pg_size_pretty(coalesce(sum(pg_total_relation_size(relid)), pg_total_relation_size(%s)))"
                    " FROM pg_partition_tree(%s)", [table, table]).fetchone()[0]
                    for table in ("telemetry_toolcall", "telemetry_toolhourly")]
            tasks = task_times(logs / "worker.log")
        broker = redis.Redis.from_url(BROKER)
        for name in broker.scan_iter(f"*{queue}*"):  # the queue and kombu's bindings of it
            broker.delete(name)

    latencies = {f"tool_{r['n']}": poller.visible.get(f"tool_{r['n']}") for r in results}
    seen = [v[0] for v in latencies.values() if v]
    missing = [name for name, v in latencies.items() if not v]
    timed = {f"tool_{r['n']}": poller.percentiles.get(f"tool_{r['n']}") for r in results}
    timed_seen = [v[0] for v in timed.values() if v]
    timed_missing = [name for name, v in timed.items() if not v]
    over = [v for v in seen if v > TARGET_SECONDS]
    queue_wait, processing, rollup_lag, percentile_lag = [], [], [], []
    for r in results:
        received, started_at, finished, _ = batches[r["batch"]]
        visible = latencies[f"tool_{r['n']}"]
        if started_at and finished:
            queue_wait.append((started_at - received).total_seconds())
            processing.append((finished - started_at).total_seconds())
            if visible:
                rollup_lag.append(visible[1] - finished.timestamp())
            if timed[f"tool_{r['n']}"]:
                percentile_lag.append(timed[f"tool_{r['n']}"][1] - finished.timestamp())
    statuses = defaultdict(int)
    for batch in batches.values():
        statuses[batch[3]] += 1

    print(f"command: .venv/bin/python bench/rollup_latency.py --seconds {args.seconds:g} --rate {args.rate:g} "
          f"--events {args.events} --concurrency {args.concurrency}"
          + (f" --preload-minutes {args.preload_minutes:g}" if args.preload_minutes else ""))
    print(f"code: {version}; stack: gunicorn 2 sync workers, celery worker --concurrency {args.concurrency} "
          f"(prefork), celery beat; broker {BROKER} queue {queue}; cache {CACHE}")
    print("load average 1/5/15 min: before {}, end of sending {} (2 cores)".format(
        *(" ".join(f"{v:.2f}" for v in load) for load in (load_before, load_during))))
    print(f"sending started at {minute_start} UTC; tool calls already in the hour: {preloaded:,}")
    print(f"warm-up ({len(warm_bodies)} requests, not counted): "
          + ", ".join(f"{v[0]:.2f} s" for v in warm.values()))
    events_sent = len(results) * args.events
    print(f"sent {len(results)}/{total} requests x {args.events} events in {sending:.1f} s = "
          f"{events_sent / sending:,.0f} events/s accepted; errors {len(errors)} {errors[:3]}")
    print(f"schedule: late p95={percentile([r['late'] for r in results], 0.95) * 1000:.0f} ms; "
          f"HTTP {summary([r['http'] for r in results])}")
    print(f"202 -> visible in ToolHourly: {summary(seen)}  (poll every {POLL_SECONDS * 1000:.0f} ms, "
          f"{poller.rounds} rounds)")
    print(f"over {TARGET_SECONDS:.0f} s: {len(over)} of {len(results)}; never visible within {args.drain:.0f} s "
          f"after sending: {len(missing)}")
    print(f"  queue wait (received -> started): {summary(queue_wait)}")
    print(f"  processing (started -> finished): {summary(processing)}")
    print(f"  rollup lag (finished -> visible): {summary(rollup_lag)}")
    print(f"202 -> percentiles visible (calls and duration_p95_ms): {summary(timed_seen)}; over "
          f"{TARGET_SECONDS:.0f} s: {sum(v > TARGET_SECONDS for v in timed_seen)}; never: {len(timed_missing)}")
    print(f"  percentile lag (finished -> p95 visible): {summary(percentile_lag)}")
    for name, values in sorted(tasks.items()):
        print(f"  task {name}: {len(values)} runs, {summary(values)}")
    for label, first, second, seconds in (("sending", cpu_start, cpu_sent, sending),
                                          ("sending + drain", cpu_start, cpu_end, drained)):
        used = cpu_delta(first, second)
        print(f"CPU during {label} ({seconds:.1f} s wall, 2 cores = {2 * seconds:.0f} CPU s): "
              + ", ".join(f"{name} {value:.1f} s" for name, value in used.items())
              + f"; everything else {used['machine'] - sum(v for k, v in used.items() if k != 'machine'):.1f} s")
    if poller.wait_samples:
        print(f"active backends of the scratch DB, sampled {poller.wait_samples} times (share of samples):")
        for what, n in sorted(poller.waits.items(), key=lambda kv: -kv[1])[:8]:
            print(f"  {n / poller.wait_samples:5.0%}  {what}")
    print(f"batches {dict(statuses)}; tool calls {rows[0]:,}, ToolHourly calls {rows[1]:,}; dirty hours left "
          f"{dirty_left}; sizes: telemetry_toolcall {table_sizes[0]}, telemetry_toolhourly {table_sizes[1]}")
    print("TARGET " + ("MET" if seen and not over and not missing else "MISSED"))
    print(f"logs: {logs}")


if __name__ == "__main__":
    main()
