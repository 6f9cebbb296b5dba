"""Where one worker's time goes when it processes a batch, measured in-process (no broker).

The same batches as bench/processing_throughput.py (500 tool calls with 2 KB outputs, duplicates,
bash* compacted to 400 tokens) are stored in a scratch PostgreSQL database, then processed one by
one with `batch_process` in this process, each timed (wall and CPU). With --profile, cProfile's
top functions by cumulative time are printed as well. The figure to compare between changes is
the CPU milliseconds per batch: it moves less than wall time when other work shares the machine.

    .venv/bin/python bench/processing_profile.py [--batches 12] [--calls 500] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import random
import sys
import time
from datetime import UTC, datetime, timedelta

from _stack import REPO, percentile, scratch_database


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--queries", action="store_true", help="list one batch's SQL statements")
    parser.add_argument("--sql", action="append", default=[], help="SQL run on the scratch database first "
                        "(experiments: ALTER TABLE ... SET COMPRESSION lz4, ALTER DATABASE ... SET ...)")
    args = parser.parse_args()

    with scratch_database() as database_url:
        os.environ.update(TOOLSCOPE_ENV="test", DATABASE_URL=database_url, CELERY_BROKER_URL="memory://localhost/",
                          INGEST_QUEUE="bench_profile_unconsumed", DEBUG="false")
        sys.path.insert(0, str(REPO))
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolscope.settings")
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        from django.db import connection

        with connection.cursor() as cursor:
            for statement in args.sql:
                cursor.execute(statement.replace("{database}", connection.settings_dict["NAME"]))
        connection.close()  # database-level settings apply to new sessions
        batch_ids = _store(args)
        from toolscope.telemetry.services.processing import batch_process
        from toolscope.tokenizer import counter

        count = counter("o200k_base")  # a worker loads its tokenizer once; not part of a batch
        reference = _reference_speed(count)
        batch_process(batch_id=batch_ids.pop(0))  # warm-up: first-use costs
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as queries:
            batch_process(batch_id=batch_ids.pop(0))
        profiler = cProfile.Profile() if args.profile else None
        walls, cpus = [], []
        for batch_id in batch_ids:
            wall, cpu = time.perf_counter(), time.process_time()
            if profiler:
                profiler.enable()
            batch_process(batch_id=batch_id)
            if profiler:
                profiler.disable()
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
    print(f"command: .venv/bin/python bench/processing_profile.py --batches {args.batches} --calls {args.calls}"
          f"{' --profile' if args.profile else ''}")
    print(f"load average after: {os.getloadavg()[0]:.2f}; machine speed at the start: the tokenizer counted "
          f"{reference:.1f} MB/s (it varies by 2x on this machine: compare runs at similar speeds)")
    print(f"{len(walls)} batches of {args.calls} tool calls, per batch: wall p50 {percentile(walls, 0.5) * 1000:.0f} ms"
          f" (min {min(walls) * 1000:.0f}), CPU p50 {percentile(cpus, 0.5) * 1000:.0f} ms (min {min(cpus) * 1000:.0f})")
    print(f"tool calls per second of wall time: {args.calls * len(walls) / sum(walls):,.0f}; "
          f"per CPU second of this process: {args.calls * len(cpus) / sum(cpus):,.0f}")
    print(f"SQL statements per batch (COPY not counted): {len(queries)}")
    if args.queries:
        for query in queries:
            print(f"  {query['time']}s  {query['sql'][:150]}")
    if profiler:
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out).sort_stats("cumulative")
        stats.print_stats(30)
        # The service's own steps, each with what it calls.
        stats.print_callees(r"processing.py.*(events_apply|_turns_create|_tool_calls_new|_sessions_upsert)"
                            r"|accounting.py.*sessions_account")
        print(out.getvalue())


def _reference_speed(count) -> float:
    """MB/s of the tokenizer on a fixed text: how fast this machine is right now."""
    text = "".join(f"{i:06d} DEBUG worker heartbeat ok, queue depth {i % 17} path=src/app_{i % 7}.py\n"
                   for i in range(15_000))
    start = time.process_time()
    for _ in range(3):
        count(text)
    return 3 * len(text) / 1e6 / (time.process_time() - start)


def _store(args: argparse.Namespace) -> list[int]:
    from processing_throughput import batch_events, output_pool

    from toolscope.policies.models import CompactionRule, Policy
    from toolscope.telemetry.models import Project
    from toolscope.telemetry.services.api_keys import api_key_create
    from toolscope.telemetry.services.ingest import ingest_events

    project = Project.objects.create(slug="bench", name="bench")
    policy, _ = Policy.objects.get_or_create(project=project, defaults={"suppress_duplicates": True})
    CompactionRule.objects.create(policy=policy, position=0, tools="bash*", max_tokens=400, strategy="head_tail")
    api_key = api_key_create(project=project, name="bench", scopes=["ingest"]).api_key
    rng = random.Random(11)
    pool = output_pool(rng)
    base = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    # Through ingest's validation, as the API stores them.
    return [
        ingest_events(api_key=api_key, raw_events=batch_events(
            f"b{b}", calls=args.calls, rng=rng, pool=pool, base=base + timedelta(minutes=b))[0]).batch_id
        for b in range(args.batches)
    ]


if __name__ == "__main__":
    main()
