"""Cost of the catalog upsert of one event carrying many tool definitions (issue 24, item 6: one
OTLP turn with 3,000 definitions, 3 MB, spent over 120 s in `catalog_upsert` on a loaded machine).

A scratch PostgreSQL database (migrated) and one project; then `catalog_upsert` of one list of
--tools definitions (about --bytes each, JSON schemas with a few parameters), each case timed alone
(wall and CPU ms) with its number of SQL statements:

- new:        every definition seen for the first time
- unchanged:  the same list again (the common case: an agent advertises its catalog every turn)
- changed:    every description changed (a new version of each tool)
- new source: the same names from another source (each joins the first source's policy sets)

--code runs another checkout's toolscope (a `git worktree` of the commit before a change) on the
same inputs. --profile prints cProfile's top functions of the `changed` case.

    .venv/bin/python bench/catalog_upsert.py [--tools 3000] [--bytes 1000] [--repeat 3] [--code PATH]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

from _stack import REPO, scratch_database


def definitions(count: int, size: int, tag: str, source: str) -> list[dict]:
    padding = "Looks the record up and returns it. " * max(1, (size - 300) // 36)
    return [{
        "name": f"tool_{n:05d}", "source": source,
        "description": f"{tag} tool {n}. {padding}",
        "input_schema": {"type": "object", "required": ["id"], "properties": {
            "id": {"type": "string", "description": f"The record's id ({n})."},
            "fields": {"type": "array", "items": {"type": "string"}, "description": "Fields to return."},
            "limit": {"type": "integer", "minimum": 1, "maximum": 100}}},
    } for n in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=3000)
    parser.add_argument("--bytes", type=int, default=1000, help="approximate JSON bytes per definition")
    parser.add_argument("--repeat", type=int, default=3, help="projects, each run through every case")
    parser.add_argument("--code", type=Path, default=REPO, help="the checkout whose toolscope runs")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()

    with scratch_database() as database_url:
        os.environ.update(TOOLSCOPE_ENV="test", DATABASE_URL=database_url, CELERY_BROKER_URL="memory://localhost/",
                          DEBUG="false")
        sys.path.insert(0, str(args.code.resolve()))
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolscope.settings")
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        import toolscope
        from toolscope.policies.models import Policy
        from toolscope.policies.services.catalog import catalog_upsert
        from toolscope.telemetry.models import Project
        from toolscope.tokenizer import counter

        call_command("migrate", verbosity=0)
        counter("o200k_base")  # a worker loads its tokenizer once
        first = definitions(args.tools, args.bytes, "v1", "agent-a")
        import json

        print(f"code: {Path(toolscope.__file__).parent.parent}")
        print(f"{args.tools:,} definitions, {len(json.dumps(first)) / 1e6:.1f} MB; {args.repeat} runs\n")
        cases = {
            "new": first,
            "unchanged": first,
            "changed": definitions(args.tools, args.bytes, "v2", "agent-a"),
            "new source": definitions(args.tools, args.bytes, "v1", "agent-b"),
        }
        timings: dict[str, list[tuple[float, float, int]]] = {name: [] for name in cases}
        for run in range(args.repeat):
            project = Project.objects.create(slug=f"bench-{run}", name="bench")
            policy = Policy.objects.create(project=project)
            for name, tools in cases.items():
                if name == "new source":  # the first source's tools are in the draft's always-on set
                    policy.always_on.set(project.tools.all()[:100])
                profiler = cProfile.Profile() if args.profile and name == "changed" and run == 0 else None
                with CaptureQueriesContext(connection) as queries:
                    wall, cpu = time.perf_counter(), time.process_time()
                    if profiler:
                        profiler.enable()
                    catalog_upsert(project=project, definitions=[dict(tool) for tool in tools])
                    if profiler:
                        profiler.disable()
                    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                timings[name].append((wall * 1e3, cpu * 1e3, len(queries)))
                if profiler:
                    out = io.StringIO()
                    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(25)
                    print(out.getvalue())
        print(f"{'case':<12} {'wall ms (median)':>17} {'CPU ms (median)':>16} {'queries':>8}")
        for name, rows in timings.items():
            print(f"{name:<12} {statistics.median(r[0] for r in rows):>17.0f} "
                  f"{statistics.median(r[1] for r in rows):>16.0f} {max(r[2] for r in rows):>8}")
        connection.close()


if __name__ == "__main__":
    main()
