"""Processing throughput: tool outputs processed per second by ONE Celery worker process.

A scratch PostgreSQL database whose project has a draft policy compacting bash* outputs to 400
tokens (head_tail). N batches are stored through the real API (gunicorn, POST /api/v1/ingest)
while the broker points at a Redis queue nobody consumes yet; each batch holds 10 sessions
(start + end events), 17 turns per session (the first turn of the batch sends full tool
definitions, the others schema-hash references, as the SDK does), and 500 tool_call events with
realistic 2 KB outputs, ~10% of them repeating an earlier output of the same tool in the same
session (duplicates) and ~25% from `bash` (compacted). Then one worker starts
(`celery worker --concurrency 1`: one pool process executing tasks) and drains the queue.

    elapsed   = last IngestBatch.finished_at - first IngestBatch.started_at
    events/s  = tool calls / elapsed          (target: >= 3,000)

Also per-batch processing time (finished_at - started_at) p50/p95, and a check that every batch is
done and the row counts (sessions, turns, tool calls, duplicates, artifacts, rollup calls) match.

    .venv/bin/python bench/processing_throughput.py [--batches 40] [--calls 500] [--pool prefork]
        [--py-spy /tmp/pyspy/bin/py-spy]   # sample the worker; prints where its time goes

It also prints the CPU seconds the worker and PostgreSQL used, and tool calls per worker CPU
second: the machine has 2 cores and other tests may be running, so compare that figure too.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import tempfile
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import redis
from _stack import (
    REPO,
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
from toolscope_agent.engine.schemas import schema_hash

BROKER = os.environ.get("BENCH_WORKER_BROKER", "redis://127.0.0.1:6379/6")
# The cache on Redis, as in production: the rollup task's flags are shared by the pool processes.
CACHE = os.environ.get("BENCH_WORKER_CACHE", "redis://127.0.0.1:6379/6")
SESSION_CALLS = 50
CALLS_PER_TURN = 3
DUPLICATE_SHARE = 0.10
CALL_TOOLS = ("read_file", "bash", "grep", "edit_file")
WORDS = ("def", "return", "import", "self", "value", "config", "request", "assert", "None", "for",
         "PASSED", "FAILED", "tests/test_api.py::test_list", "0.02s", "src/app/models.py:42", "=")

# The catalog the agent advertises: 12 tools, each turn advertises one of 4 subsets.
CATALOG = [
    {"name": name, "description": f"{name.replace('_', ' ').capitalize()} in the workspace.",
     "input_schema": {"type": "object", "properties": {
         "path": {"type": "string", "description": "Path relative to the repository root."},
         "pattern": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
         "required": ["path"]}}
    for name in ("read_file", "bash", "grep", "edit_file", "write_file", "list_dir", "git_status", "git_diff",
                 "git_commit", "run_tests", "web_fetch", "tool_search")
]
SET_SIZES = (6, 8, 10, 12)


def policy_setup(env: dict[str, str], slug: str = "bench") -> None:
    """The project's draft policy: bash* outputs compacted to 400 tokens, duplicates suppressed."""
    manage(env, "shell", "-c", (
        "from toolscope.telemetry.models import Project;"
        "from toolscope.policies.models import Policy, CompactionRule;"
        f"p=Project.objects.get(slug='{slug}');"
        "pol, _=Policy.objects.get_or_create(project=p, defaults={'suppress_duplicates': True});"
        "CompactionRule.objects.create(policy=pol, position=0, tools='bash*', max_tokens=400, strategy='head_tail')"
    ))


def output_pool(rng: random.Random, size: int = 400) -> list[str]:
    pool = []
    for _ in range(size):
        text, length = [], 0
        while length < 2100:
            line = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12)))
            text.append(line)
            length += len(line) + 1
        pool.append("\n".join(text))
    return pool


def output_2kb(pool: list[str], rng: random.Random, header: str) -> str:
    """A unique 2 KB output: a header line naming the call, then lines from the pool."""
    return (f"$ {header}\n" + rng.choice(pool))[:2048]


def _tools_ref(full: bool, size: int) -> list[dict]:
    tools = CATALOG[:size]
    if full:
        return [dict(tool) for tool in tools]
    return [{"name": t["name"], "schema_hash": schema_hash(t["name"], t["description"], t["input_schema"])}
            for t in tools]


def batch_events(tag: str, *, calls: int, rng: random.Random, pool: list[str], base: datetime) -> tuple[list, int]:
    """One batch: sessions, turns, tool calls. Returns (events, duplicates planted)."""
    events: list[dict] = []
    duplicates = 0
    sessions = max(1, calls // SESSION_CALLS)
    first_turn = True
    for s in range(sessions):
        sid = f"{tag}-s{s}"
        start = base + timedelta(seconds=s * 7)
        n_calls = SESSION_CALLS if s < sessions - 1 else calls - SESSION_CALLS * (sessions - 1)
        n_turns = (n_calls - 1) // CALLS_PER_TURN + 1
        events.append({"type": "session", "id": sid, "action": "start", "agent_name": "coder", "model": "gpt-4o",
                       "metadata": {"repo": "acme/api", "branch": f"fix-{s}"}, "timestamp": start.isoformat()})
        set_size = SET_SIZES[s % len(SET_SIZES)]
        for t in range(n_turns):
            turn = {"type": "turn", "id": f"{sid}:t{t}", "session_id": sid, "index": t, "model": "gpt-4o",
                    "tools": _tools_ref(first_turn, set_size),
                    "usage": {"input_tokens": 3000 + 900 * t, "output_tokens": 180, "cached_tokens": 2048},
                    "latency_ms": round(rng.uniform(400, 3000), 1),
                    "timestamp": (start + timedelta(seconds=20 * t)).isoformat()}
            first_turn = False
            if t == 0:
                turn["system_prompt_chars"] = 6400
                turn["task_message"] = "Fix the failing test in tests/test_api.py"
                turn["messages"] = [{"role": "user", "content": "Fix the failing test in tests/test_api.py"}]
            else:
                turn["messages"] = [{"role": "assistant", "content": "Let me look at the next file and run it."}]
            events.append(turn)
        originals: list[dict] = []
        for j in range(n_calls):
            t = j // CALLS_PER_TURN
            event = {
                "type": "tool_call", "id": f"{sid}:c{j}", "session_id": sid, "turn_index": t, "call_id": f"call_{j}",
                "tool_name": rng.choice(CALL_TOOLS),
                "arguments": {"path": f"src/module_{j % 37}.py", "offset": j % 200, "limit": 400,
                              "pattern": "def .*_handler\\("},
                "status": "ok" if rng.random() > 0.03 else "error", "duration_ms": round(rng.uniform(2, 900), 1),
                "timestamp": (start + timedelta(seconds=20 * t + 2 + j % CALLS_PER_TURN)).isoformat(),
            }
            if j > 5 and rng.random() < DUPLICATE_SHARE * 1.12:
                # Same tool, same output as an earlier call of this session: a duplicate.
                original = rng.choice(originals)
                event["tool_name"], event["output"] = original["tool_name"], original["output"]
                duplicates += 1
            else:
                event["output"] = output_2kb(pool, rng, f"{sid}:c{j}")
                originals.append(event)
            events.append(event)
        events.append({"type": "session", "id": f"{sid}:end", "session_id": sid, "action": "end",
                       "timestamp": (start + timedelta(seconds=20 * n_turns + 5)).isoformat()})
    return events, duplicates


def _pyspy_summary(raw: Path, top: int = 30) -> str:
    """Where the pool process's wall time went, from py-spy's collapsed stacks (--idle: waits on
    PostgreSQL count). Inclusive shares per function, then per line of toolscope's own code."""
    by_function: Counter[str] = Counter()
    by_line: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        # Only the pool process (the one that runs tasks): its stacks pass through the task.
        if not stack or not any("batch_process" in f or "rollups_refresh" in f or "trace_task" in f
                                for f in frames):
            continue
        n = int(count)
        total += n
        functions = {f.split(" (")[0] + " (" + f.split(" (")[-1].split(":")[0] + ")" for f in frames[1:]}
        for name in functions:
            by_function[name] += n
        for frame in set(frames[1:]):
            if "toolscope" in frame and "site-packages" not in frame:
                by_line[frame] += n
        own[frames[-1].split(" (")[0] + " (" + frames[-1].split(" (")[-1].split(":")[0] + ")"] += n
    if not total:
        return "py-spy: no samples of the task process"
    interesting = ("toolscope", "django/db/models/query.py", "psycopg/connection.py", "bpe", "tiktoken",
                   "engine", "json", "lz4", "fields.py")
    lines = [f"py-spy (--idle, 200 Hz): {total} samples inside tasks of the pool process; inclusive shares"]
    lines += [f"  {n / total:6.1%}  {name}" for name, n in by_function.most_common()
              if any(word in name for word in interesting)][:top]
    lines.append("-- by line of toolscope code (inclusive)")
    lines += [f"  {n / total:6.1%}  {name}" for name, n in by_line.most_common(top)]
    lines.append("-- self")
    lines += [f"  {n / total:6.1%}  {name}" for name, n in own.most_common(15)]
    return "\n".join(lines)


def _rollups(db: psycopg.Connection) -> list[Any]:
    """Every ToolHourly and ProjectHourly row, ids aside, in a stable order."""
    return db.execute("""
        SELECT to_jsonb(t) - 'id' FROM telemetry_toolhourly t
        UNION ALL SELECT to_jsonb(p) - 'id' FROM telemetry_projecthourly p
        ORDER BY 1
    """).fetchall()


def code_version() -> str:
    """The commit measured, and whether application code differs from it (others may be editing)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout.strip()
    dirty = git("status", "--porcelain", "--", "toolscope", "workers", "api", "sdk")
    return f"{git('rev-parse', '--short', 'HEAD')}{' + uncommitted changes' if dirty else ''}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--calls", type=int, default=500, help="tool_call events per batch")
    parser.add_argument("--pool", default="prefork", help="celery pool (prefork = one child process)")
    parser.add_argument("--concurrency", type=int, default=1, help="worker pool processes (the target is for 1)")
    parser.add_argument("--py-spy", default="", help="path to a py-spy binary: sample the worker while it runs")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--retention", type=int, default=0,
                        help="raw data days the project keeps (0: the default); on PostgreSQL each day is a "
                             "partition per table, so this sets how many partitions the worker's queries meet")
    args = parser.parse_args()

    rng = random.Random(11)
    pool = output_pool(rng)
    queue = f"bench_processing_{uuid.uuid4().hex[:8]}"
    base = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    logs = Path(tempfile.mkdtemp(prefix="toolscope-bench-"))
    broker = redis.Redis.from_url(BROKER)
    load_before = os.getloadavg()
    version = code_version()

    with scratch_database() as database_url:
        env = stack_env(database_url)
        env.update(CELERY_BROKER_URL=BROKER, INGEST_QUEUE=queue, BATCH_SWEEP_PENDING_SECONDS="3600", CACHE_URL=CACHE)
        manage(env, "migrate", "-v0")
        key = create_key(env)
        policy_setup(env)
        if args.retention:
            manage(env, "shell", "-c", (
                "from toolscope.telemetry.models import Project;"
                "from toolscope.telemetry.services.retention import partitions_ensure;"
                f"Project.objects.filter(slug='bench').update(retention_days={args.retention});"
                f"partitions_ensure(retention_days={args.retention})"))

        # 1. Store the batches through the API; nobody consumes the queue yet.
        planted_duplicates = 0
        events_total = Counter()
        t_store = time.monotonic()
        with gunicorn(env, workers=2) as web, httpx.Client(
            base_url=web, headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"}, timeout=60
        ) as http:
            for b in range(args.batches):
                events, dups = batch_events(f"b{b}", calls=args.calls, rng=rng, pool=pool,
                                            base=base + timedelta(minutes=b))
                planted_duplicates += dups
                events_total.update(e["type"] for e in events)
                response = http.post("/api/v1/ingest", content=json.dumps({"events": events}))
                body = response.json()
                if response.status_code != 202 or body["accepted"] != len(events):
                    raise SystemExit(f"batch {b}: {response.status_code} {str(body)[:500]}")
        stored_seconds = time.monotonic() - t_store
        queued = broker.llen(queue)
        if queued != args.batches:
            raise SystemExit(f"expected {args.batches} messages in {queue}, found {queued}")

        # 2. One worker drains the queue.
        postmaster = postmaster_pid(database_url)
        spy = None
        with psycopg.connect(database_url, autocommit=True) as db:
            launched = datetime.now(UTC)
            with celery_worker(env, queue=queue, log=logs / "worker.log", concurrency=args.concurrency, pool=args.pool,
                               wait_ready=False) as worker:
                if args.py_spy:
                    spy_out = logs / "pyspy.txt"
                    spy = subprocess.Popen([args.py_spy, "record", "--pid", str(worker.pid), "--subprocesses",
                                            "--rate", "200", "--idle", "--format", "raw", "--output", str(spy_out),
                                            "--nonblocking"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                groups, match = {"worker": [worker.pid], "postgres (all DBs)": [postmaster]}, {}
                cpu_start, wall_start = cpu_snapshot(groups, match), time.monotonic()
                deadline = time.monotonic() + args.timeout
                while time.monotonic() < deadline:
                    open_batches = db.execute(
                        "SELECT count(*) FROM telemetry_ingestbatch WHERE status NOT IN ('done', 'failed')"
                    ).fetchone()[0]
                    if open_batches == 0:
                        break
                    time.sleep(0.2)
                cpu_used, cpu_wall = cpu_delta(cpu_start, cpu_snapshot(groups, match)), time.monotonic() - wall_start
                # Let the follow-up rollup tasks drain too (they queue behind the batches).
                while time.monotonic() < deadline and (broker.llen(queue) or db.execute(
                        "SELECT count(*) FROM telemetry_dirtyhour").fetchone()[0]):
                    time.sleep(0.2)
                drained = datetime.now(UTC)
                time.sleep(0.5)  # the last rollup task commits before the worker is stopped
                if spy is not None:
                    spy.send_signal(2)  # SIGINT: py-spy writes its output and exits
                    spy.wait(timeout=60)
            rows = db.execute(
                "SELECT status, started_at, finished_at, attempts, error FROM telemetry_ingestbatch ORDER BY id"
            ).fetchall()
            counts = db.execute("""
                SELECT (SELECT count(*) FROM telemetry_session), (SELECT count(*) FROM telemetry_session
                                                                  WHERE ended_at IS NOT NULL),
                       (SELECT count(*) FROM telemetry_turn), (SELECT count(*) FROM telemetry_turn
                                                               WHERE estimated_input_tokens IS NOT NULL),
                       (SELECT count(*) FROM telemetry_toolcall),
                       (SELECT count(*) FROM telemetry_toolcall WHERE turn_id IS NULL),
                       (SELECT count(*) FROM telemetry_toolcall WHERE duplicate_of_id IS NOT NULL),
                       (SELECT count(*) FROM telemetry_artifact),
                       (SELECT count(*) FROM telemetry_toolcall WHERE tool_name LIKE 'bash%%'
                          AND duplicate_of_id IS NULL AND output_tokens > 400),
                       (SELECT coalesce(sum(calls), 0) FROM telemetry_toolhourly),
                       (SELECT coalesce(sum(duplicate_tokens), 0) FROM telemetry_toolcall),
                       (SELECT coalesce(sum(a.tokens_before - a.tokens_after), 0) FROM telemetry_artifact a),
                       (SELECT avg(output_tokens) FROM telemetry_toolcall)
            """).fetchone()
            # The rollups processing kept (deltas, percentiles refreshed) against a rebuild from raw rows.
            kept = _rollups(db)
            manage(env, "rollup", "--all")
            rebuilt = _rollups(db)
        for name in broker.scan_iter(f"*{queue}*"):  # the queue and kombu's bindings of it
            broker.delete(name)

    statuses = Counter(r[0] for r in rows)
    started = min(r[1] for r in rows if r[1])
    finished = max(r[2] for r in rows if r[2])
    elapsed = (finished - started).total_seconds()
    per_batch = [(r[2] - r[1]).total_seconds() for r in rows if r[1] and r[2]]
    tool_calls = events_total["tool_call"]
    (sessions, ended, turns, budgeted, calls, unlinked, dups, artifacts, compactable, rolled, dup_tokens, saved,
     avg_tokens) = counts
    print(f"command: .venv/bin/python bench/processing_throughput.py --batches {args.batches} --calls {args.calls}"
          f" --pool {args.pool} --concurrency {args.concurrency}{' --py-spy ' + args.py_spy if args.py_spy else ''}")
    print(f"code: {version}")
    print(f"worker: celery worker --concurrency {args.concurrency} --pool {args.pool} -Q {queue} "
          f"(broker {BROKER}, cache {CACHE})")
    print(f"stored {args.batches} batches of {sum(events_total.values()) // args.batches} events "
          f"({dict(events_total)}) through the API in {stored_seconds:.1f} s")
    print("load average 1/5/15 min: before {}, after {} (2 cores)".format(
        *(" ".join(f"{v:.2f}" for v in load) for load in (load_before, os.getloadavg()))))
    print(f"batches: {dict(statuses)}  attempts>1: {sum(1 for r in rows if r[3] > 1)}  "
          f"errors: {[r[4][:200] for r in rows if r[4]][:3]}")
    print(f"worker launch -> first batch started: {(started - launched).total_seconds():.1f} s; "
          f"last batch -> queue drained (rollups): {(drained - finished).total_seconds():.1f} s")
    print(f"elapsed first started -> last finished: {elapsed:.2f} s  tool calls: {tool_calls:,}  "
          f"events/s: {tool_calls / elapsed:,.0f}  (all events: {sum(events_total.values()) / elapsed:,.0f}/s)")
    print(f"per batch ms: p50={percentile(per_batch, 0.5) * 1000:.0f} p95={percentile(per_batch, 0.95) * 1000:.0f} "
          f"max={max(per_batch) * 1000:.0f} min={min(per_batch) * 1000:.0f}")
    print(f"CPU from worker launch to last batch done ({cpu_wall:.1f} s wall, 2 cores): "
          + ", ".join(f"{name} {value:.1f} s" for name, value in cpu_used.items())
          + f"; everything else {cpu_used['machine'] - cpu_used['worker'] - cpu_used['postgres (all DBs)']:.1f} s")
    print(f"tool calls per CPU second of the worker: {tool_calls / cpu_used['worker']:,.0f} (the rate an idle "
          f"machine would allow if the worker stays CPU-bound; includes its start-up)")
    checks = {
        "sessions": (sessions, events_total["session"] // 2), "sessions ended": (ended, events_total["session"] // 2),
        "turns": (turns, events_total["turn"]), "turns budgeted": (budgeted, events_total["turn"]),
        "tool calls": (calls, tool_calls), "tool calls without turn": (unlinked, 0),
        "duplicates": (dups, planted_duplicates), "artifacts": (artifacts, compactable),
        "ToolHourly calls": (rolled, tool_calls),
        "rollup rows differing from a rebuild": (sum(a != b for a, b in zip(kept, rebuilt, strict=False))
                                                 + abs(len(kept) - len(rebuilt)), 0),
    }
    bad = {name: pair for name, pair in checks.items() if pair[0] != pair[1]}
    print("rows (found/expected): " + ", ".join(f"{name}={got:,}/{want:,}" for name, (got, want) in checks.items()))
    print(f"avg output tokens {avg_tokens:.0f}; duplicate tokens {dup_tokens:,}; compaction saved {saved:,} tokens")
    print("CHECK " + ("OK" if not bad and statuses.get("done") == args.batches else f"FAILED {bad}"))
    if spy is not None:
        print(_pyspy_summary(logs / "pyspy.txt"))
    print(f"logs: {logs}")


if __name__ == "__main__":
    main()
