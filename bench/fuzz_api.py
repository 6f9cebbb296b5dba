"""API fuzz (issue 11): schemathesis over /api/v1/schema against granian and a real Celery worker.

A scratch PostgreSQL database, a private redis-server, granian and one Celery worker; a project
with a catalog, a published policy and an artifact (tests/e2e/fuzzing.py). Every operation gets
the schema's examples, the coverage phase and up to `--max-examples` fuzzed cases, positive and
negative; then the worker settles every batch the run stored. Prints the requests by
status, 5xx, schema violations (each failed check once per case) and the batches by status with
quarantined events. Exits 1 on any 5xx, violation, failed batch or quarantined event.

    .venv/bin/python bench/fuzz_api.py [--max-examples 1500] [--seed 1] [--web-workers 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from _stack import REPO, manage, scratch_database, stack_env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-examples", type=int, default=1500, help="fuzzed cases per operation")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--web-workers", type=int, default=2, help="granian worker processes")
    args = parser.parse_args()
    with scratch_database() as database_url:
        env = stack_env(database_url)
        manage(env, "migrate", "--noinput")
        os.environ.update(DATABASE_URL=database_url, TOOLSCOPE_ENV="test", DJANGO_SETTINGS_MODULE="toolscope.settings")
        sys.path.insert(0, str(REPO))
        import django

        django.setup()
        from django.db import connections

        from tests.e2e.fuzzing import LiveStack, batches_outcome, fuzz_project_create, fuzz_run, fuzz_schema

        project = fuzz_project_create()
        with tempfile.TemporaryDirectory() as logs, LiveStack(database_url, Path(logs), args.web_workers) as stack:
            started = time.monotonic()
            tally = fuzz_run(fuzz_schema(stack.base_url, project, max_examples=args.max_examples, seed=args.seed))
            elapsed = time.monotonic() - started
            outcome = batches_outcome(project.project_id)
            logs_tail = stack.describe()
        connections.close_all()
    print(f"requests: {tally.requests} in {elapsed:.0f} s (max_examples={args.max_examples}, seed={args.seed})")
    print("by status: " + ", ".join(f"{status}: {n}" for status, n in sorted(tally.statuses.items())))
    print("by operation: " + ", ".join(f"{op}: {n}" for op, n in sorted(tally.by_operation.items())))
    print(f"5xx: {tally.server_errors}")
    print(f"schema violations: {tally.violations} {dict(tally.failed_checks)}")
    print(f"batches: {outcome}")
    if tally.failures or tally.errors:
        print(tally.report())
    bad = tally.server_errors or tally.failed_checks or outcome["failed"] or outcome["quarantined_events"]
    if bad and tally.server_errors:
        print(logs_tail)
    return 1 if bad or tally.errors else 0


if __name__ == "__main__":
    sys.exit(main())
