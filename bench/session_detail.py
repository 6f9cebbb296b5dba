"""Long sessions (issue 24, item 5): one session's detail (GET /api/v1/sessions/{id} and the
dashboard's session page) for a 40,000-call session, and a whole 10,000-call transcript sent in
one request.

Session detail: a scratch PostgreSQL database, migrated by the checkout measured (`--tree`, default
this one: pass a `git worktree` of an older commit to measure before), a session of `--calls`
calls (two per turn, ~300-byte outputs, a duplicate every tenth) inserted in bulk with the
figures processing gives (tests/long_sessions.py: bulk_session), then each answer rendered
`--repeat` times in-process by Django's test client (the server's share: no network): its time,
size, queries and the Python memory it allocated at its peak (tracemalloc, one more run). For a
paged checkout also the whole session read page by page, as the SDK's session_detail does.

Transcript (`--transcript N`, this checkout only): gunicorn with one sync worker on the scratch
database; one POST /api/v1/transcripts of N calls (tests/long_sessions.py: long_transcript,
Anthropic's shape, `--output-repeat` times the recorded outputs), its time, answer and the web
worker's peak resident memory (sampled every 10 ms); then its batches processed in this process
in the order stored, each first attempt merging the pending batches it can as a worker does
(`--reverse`: last first and each alone, the worst order), and the session's calls counted.

Trace (`--trace N`, issue 28 item 7): a session of N calls as an agent's SDK sends them, with
usage, latency and outputs of 0.2 to 24 KB (tests/trace_session.py), through ingest_events and
batch_process; then every page of its dashboard page rendered `--repeat` times in-process as
above: the median time, the bytes and the queries of each page.

    .venv/bin/python bench/session_detail.py [--calls 40000] [--repeat 5] [--tree /tmp/before]
    .venv/bin/python bench/session_detail.py --calls 0 --transcript 10000 [--output-repeat 4]
    .venv/bin/python bench/session_detail.py --calls 0 --trace 1000 [--repeat 9] [--tree /tmp/before]
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import httpx
from _stack import REPO, gunicorn, scratch_database, stack_env


def _tests_module(name: str) -> Any:
    """tests/<name>.py of this checkout, whichever checkout Django runs from."""
    spec = importlib.util.spec_from_file_location(name, REPO / "tests" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _long_sessions() -> Any:
    return _tests_module("long_sessions")


def _django(env: dict[str, str], tree: Path) -> None:
    os.environ.update({key: env[key] for key in ("DATABASE_URL", "TOOLSCOPE_ENV", "CELERY_BROKER_URL", "DEBUG",
                                                 "LOG_LEVEL", "ALLOWED_HOSTS", "API_RATE_LIMIT_PER_MINUTE")})
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolscope.settings")
    sys.path.insert(0, str(tree))
    os.chdir(tree)
    import django

    django.setup()


def _get(client: Any, url: str, **headers: str) -> tuple[float, int, int, Any]:
    """(milliseconds, bytes, queries, response) of one GET."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        response = client.get(url, **headers)
        body = response.content
        elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise SystemExit(f"{url} answered {response.status_code}: {body[:300]!r}")
    return elapsed, len(body), len(queries), response


def _peak_mb(client: Any, url: str, **headers: str) -> float:
    tracemalloc.start()
    client.get(url, **headers)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 1e6


def session_detail(env: dict[str, str], tree: Path, calls: int, repeat: int) -> None:
    from django.db import connection
    from django.test import Client

    from toolscope.telemetry.models import Project
    from toolscope.telemetry.services.api_keys import api_key_create

    project = Project.objects.create(slug="bench", name="bench")
    started = time.perf_counter()
    _long_sessions().bulk_session(project, client_id="long", turns=calls // 2, calls_per_turn=2)
    print(f"built a session of {calls:,} calls and {calls // 2:,} turns in {time.perf_counter() - started:.1f} s")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    key = api_key_create(project=project, name="bench", scopes=["read"]).secret
    api = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    viewer = _viewer()
    answers = {"API GET /api/v1/sessions/long": (api, "/api/v1/sessions/long"),
               "page /p/bench/sessions/long/": (viewer, "/p/bench/sessions/long/")}
    print(f"\n{'answer':34} {'p50 ms':>9} {'max ms':>9} {'MB':>7} {'queries':>8} {'peak MB':>8} {'items':>7}")
    for label, (client, url) in answers.items():
        _get(client, url)  # warm-up: templates compiled, connection open
        runs = [_get(client, url) for _ in range(repeat)]
        _, size, queries, response = runs[-1]
        items = _items(response)
        print(f"{label:34} {statistics.median(r[0] for r in runs):9.1f} {max(r[0] for r in runs):9.1f} "
              f"{size / 1e6:7.2f} {queries:8d} {_peak_mb(client, url):8.1f} {items:>7}")
    first = json.loads(_get(api, "/api/v1/sessions/long")[3].content)
    if "next_cursor" in first:
        _walk(api, "/api/v1/sessions/long", 2_000)
        _walk(api, "/api/v1/sessions/long", 500)


def _viewer() -> Any:
    from django.contrib.auth import get_user_model
    from django.test import Client

    user = get_user_model().objects.filter(username="bench").first()
    viewer = Client()
    viewer.force_login(user or get_user_model().objects.create_superuser("bench", "bench@example.com",
                                                                          "bench-password"))
    return viewer


# The pager's link to the next page of a session (both before and after issue 28, item 7).
NEXT_PAGE = re.compile(r'href="\?[^"#]*?after=([0-9_]+)')


def trace_pages(calls: int, repeat: int) -> None:
    """Every page of a traced session of `calls` calls: median and max ms, bytes, queries."""
    from django.db import connection

    from toolscope.telemetry.models import Project

    project = Project.objects.create(slug="bench-trace", name="bench trace")
    started = time.perf_counter()
    session = _tests_module("trace_session").trace_session(project, calls=calls, session_id="trace")
    print(f"\ningested and processed a traced session of {session.tool_call_count:,} calls and "
          f"{session.turn_count:,} turns in {time.perf_counter() - started:.1f} s")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    viewer, url, after, page = _viewer(), "/p/bench-trace/sessions/trace/", None, 0
    print(f"{'page':>4} {'p50 ms':>9} {'max ms':>9} {'bytes':>10} {'queries':>8}")
    sizes, medians = [], []
    while True:
        query = f"{url}?after={after}" if after else url
        _get(viewer, query)  # warm-up
        runs = [_get(viewer, query) for _ in range(repeat)]
        size, queries, html = runs[-1][1], runs[-1][2], runs[-1][3].content.decode()
        sizes.append(size)
        medians.append(statistics.median(r[0] for r in runs))
        print(f"{page:>4} {medians[-1]:9.1f} {max(r[0] for r in runs):9.1f} {size:>10,} {queries:>8}")
        found = NEXT_PAGE.search(html)
        if found is None:
            break
        after, page = found.group(1), page + 1
    print(f"{page + 1} pages; largest {max(sizes):,} bytes; slowest median {max(medians):.1f} ms")


def _items(response: Any) -> str:
    if response.get("Content-Type", "").startswith("application/json"):
        body = json.loads(response.content)
        return f"{len(body['turns']) + len(body['calls']):,}"
    html = response.content.decode()
    shown = html.count('<div class="turn" id="turn-') + html.count('" id="call-')
    return f"{shown:,}"


def _walk(api: Any, url: str, limit: int) -> None:
    """The whole session read page by page, as the SDK's session_detail reads it."""
    started = time.perf_counter()
    pages, size, cursor, slowest = 0, 0, None, 0.0
    while True:
        query = f"?limit={limit}" + (f"&cursor={cursor}" if cursor else "")
        elapsed, length, _, response = _get(api, url + query)
        pages, size, slowest = pages + 1, size + length, max(slowest, elapsed)
        cursor = json.loads(response.content)["next_cursor"]
        if cursor is None:
            break
    print(f"whole session, pages of {limit:,}: {pages} pages, {size / 1e6:.1f} MB, "
          f"{time.perf_counter() - started:.1f} s, slowest page {slowest:.0f} ms")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _workers(parent: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(parent)], capture_output=True, text=True).stdout
    return [int(pid) for pid in out.split()]


def transcript(env: dict[str, str], calls: int, output_repeat: int, reverse: bool) -> None:
    from toolscope.telemetry.models import IngestBatch, Project, ToolCall
    from toolscope.telemetry.services import processing
    from toolscope.telemetry.services.api_keys import api_key_create
    from toolscope.telemetry.services.processing import batch_process

    project = Project.objects.create(slug="bench-transcripts", name="bench transcripts")
    key = api_key_create(project=project, name="bench", scopes=["ingest"]).secret
    body = json.dumps(_long_sessions().long_transcript("anthropic", calls, output_repeat=output_repeat)).encode()
    packed = gzip.compress(body)
    print(f"\ntranscript of {calls:,} calls: {len(body) / 1e6:.1f} MB of JSON, {len(packed) / 1e6:.1f} MB gzipped")
    with gunicorn(env, workers=1) as base:
        found = subprocess.run(["pgrep", "-f", f"gunicorn toolscope.wsgi --bind {base[7:]}"],
                               capture_output=True, text=True).stdout.split()
        (worker,) = [child for pid in found for child in _workers(int(pid))]
        idle, peak, stop = _rss_mb(worker), [0.0], threading.Event()

        def sample() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], _rss_mb(worker))
                time.sleep(0.01)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json", "Content-Encoding": "gzip"}
        started = time.perf_counter()
        response = httpx.post(f"{base}/api/v1/transcripts", content=packed, headers=headers, timeout=300)
        elapsed = time.perf_counter() - started
        stop.set()
        sampler.join()
    answer = response.json()
    if response.status_code != 202:
        raise SystemExit(f"{response.status_code}: {answer}")
    print(f"POST /api/v1/transcripts: {response.status_code} in {elapsed:.2f} s, answer "
          f"{len(response.content) / 1e6:.2f} MB, {answer['accepted']:,} events in {len(answer['batch_ids'])} "
          f"batches; web worker RSS {idle:.0f} MB idle, {peak[0]:.0f} MB peak")
    sizes = list(IngestBatch.objects.filter(pk__in=answer["batch_ids"]).values_list("event_count", flat=True))
    if reverse:
        processing.MERGE_MAX_EVENTS = 0
    started, slowest = time.perf_counter(), 0.0
    for batch_id in answer["batch_ids"][::-1] if reverse else answer["batch_ids"]:
        began = time.perf_counter()
        batch_process(batch_id=batch_id)
        slowest = max(slowest, time.perf_counter() - began)
    stored = ToolCall.objects.filter(session__project=project).count()
    print(f"processed {'last first, each alone' if reverse else 'in order'}: {time.perf_counter() - started:.1f} s "
          f"for {len(sizes)} batches of at most {max(sizes):,} events (slowest task {slowest:.1f} s); "
          f"{stored:,} calls stored")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=40_000, help="Calls of the session read (0: none).")
    parser.add_argument("--repeat", type=int, default=5, help="Reads per answer (after one warm-up).")
    parser.add_argument("--tree", type=Path, default=REPO, help="The checkout to measure (a git worktree).")
    parser.add_argument("--transcript", type=int, default=0, help="Calls of a transcript to send (0: none).")
    parser.add_argument("--output-repeat", type=int, default=1, help="Each transcript output this many times.")
    parser.add_argument("--reverse", action="store_true", help="Process the transcript's batches last first, alone.")
    parser.add_argument("--trace", type=int, default=0, help="Calls of a traced session whose pages to read.")
    args = parser.parse_args()
    tree = args.tree.resolve()
    if args.transcript and tree != REPO:
        raise SystemExit("--transcript measures this checkout only")
    with scratch_database() as database_url:
        env = stack_env(database_url, ALLOWED_HOSTS="testserver,127.0.0.1,localhost")
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=tree, env=env, check=True)
        _django(env, tree)
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True,
                                text=True).stdout.strip()
        print(f"checkout {tree} at {commit}")
        if args.calls:
            session_detail(env, tree, args.calls, args.repeat)
        if args.transcript:
            transcript(env, args.transcript, args.output_repeat, args.reverse)
        if args.trace:
            trace_pages(args.trace, args.repeat)
        from django.db import connections

        connections.close_all()


if __name__ == "__main__":
    main()
