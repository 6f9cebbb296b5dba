"""How long a recommendation on 5,000 stored sessions takes in a worker (issue 25: "a
recommendation on 5,000 sessions in a worker takes < 2 min"), the sessions read from PostgreSQL
by the worker's own code.

bench/recommend_speed.py times the engine's work on sessions built in memory; it leaves out
reading them from the database. This script answers the question end to end, as the worker runs
it. In-process, on a scratch PostgreSQL database (bench/_stack.py), it:

1. builds BFCL's 800 multi-turn conversations (bench/multiturn_data.py: a 128-tool agent, every
   request advertising the 128 tools) as OpenAI Chat Completions transcripts with
   bench/multiturn_recommend.py's functions, and repeats them with distinct session ids (the
   n-th copy of a conversation is `bfcl-<id>#copy<n>`) until there are `--sessions` of them, in
   the data's split order with each conversation's copies side by side (bench/recommend_speed.py's
   order), their start times spread over the last 20 days, oldest first;
2. posts each one to `POST /api/v1/transcripts`, processes every batch with the worker's
   `batch_process` and checks every session was stored whole (multiturn_recommend's
   `process_and_check`), printing progress and timings;
3. asks `POST /api/v1/recommendations` for the 20 days with `limit` 5000, then times, with the
   run's own arguments:
   - reading the sessions alone: `simulation_session_rows` then `simulation_sessions_load`
     (toolscope/policies/services/simulation.py), called with the arguments
     `policy_recommendations` gives them;
   - the whole `policy_recommendations(...)` call, twice (the first may warm caches), with the
     worker's progress callback (one UPDATE of the run's row per candidate scored, as
     `recommendation_run` does); the time of its last progress call splits it into "reading,
     learning and scoring the candidates" and "the refit on every session, the front and the
     pick";
4. prints the sessions, fit, held-out and candidate counts, the recommended candidate, the
   machine's load average before and after, and the Python and PostgreSQL versions.

Run (bench/requirements.txt holds bfcl-eval, the data and its API classes):

    .venv/bin/python bench/recommend_worker_speed.py [--sessions 5000]

Notes: Celery uses the in-memory transport (nothing consumes the queued task); the script calls
the service the task calls. Django's DEBUG is off, as in a production worker, so no
query is kept in memory nor
wrapped. Ingest and processing of 5,000 sessions take minutes; they are not part
of the recommendation's time.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import sys
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DAYS = 20  # the sessions' start times span the last DAYS days
LIMIT = 5000  # the recommendation's session limit (the API's largest)
GOAL_SECONDS = 120


def copies(conversations: list[Any], count: int) -> list[Any]:
    """`count` conversations: each of `conversations` repeated side by side (the n-th copy's id
    suffixed `#copy<n>`), in their order."""
    seen: Counter[str] = Counter()
    out = []
    for index in range(count):
        conversation = conversations[index * len(conversations) // count]
        number = seen[conversation.id]
        seen[conversation.id] += 1
        out.append(conversation if number == 0
                   else dataclasses.replace(conversation, id=f"{conversation.id}#copy{number}"))
    return out


def load_average() -> str:
    return " / ".join(f"{value:.2f}" for value in os.getloadavg()) + f" (1, 5, 15 min; {os.cpu_count()} CPUs)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=5000, help="sessions stored and recommended on")
    parser.add_argument("--seed", type=int, default=25, help="the scenario split's seed (multiturn_data.split)")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(REPO))
    from _stack import scratch_database
    from multiturn_data import load, split
    from search_data import bfcl_version

    print(f"load average at start: {load_average()}", flush=True)
    began = time.perf_counter()
    from multiturn_data import catalog

    tools, _ = catalog()
    older, newer = split(load(), seed=args.seed)
    conversations = copies([*older, *newer], args.sessions)
    print(f"data: bfcl-eval {bfcl_version()}: {len(older) + len(newer)} conversations, {len(tools)} tools, repeated "
          f"into {len(conversations)} sessions; loaded and executed in {time.perf_counter() - began:.1f} s",
          flush=True)

    with scratch_database() as database_url:
        # memory:// : tasks are queued where nothing consumes them; this script runs each service.
        os.environ.update(DATABASE_URL=database_url, TOOLSCOPE_ENV="development", LOG_LEVEL="WARNING",
                          DJANGO_SETTINGS_MODULE="toolscope.settings", CELERY_BROKER_URL="memory://localhost/",
                          API_RATE_LIMIT_PER_MINUTE="0", DEBUG="false")
        os.environ.pop("CELERY_RESULT_BACKEND", None)
        import django

        django.setup()
        from django.core.management import call_command
        from django.test.utils import setup_test_environment

        setup_test_environment(debug=False)
        call_command("migrate", verbosity=0)
        run(conversations, tools)


def run(conversations: list[Any], tools: list[dict[str, Any]]) -> None:
    from django.conf import settings
    from django.db import connection
    from django.utils import timezone
    from multiturn_recommend import (
        Validator,
        iso,
        messages_of,
        openai_tools,
        process_and_check,
        spread,
        transcript,
    )

    from tests.api.conftest import KeyClient
    from toolscope.policies.models import Recommendation, SimulationStatus
    from toolscope.policies.services.recommendations import policy_recommendations
    from toolscope.policies.services.simulation import simulation_session_rows, simulation_sessions_load
    from toolscope.telemetry.models import IngestBatch
    from toolscope.telemetry.services.api_keys import api_key_create
    from toolscope.telemetry.services.processing import batch_process
    from toolscope.telemetry.services.projects import project_create

    assert not settings.DEBUG, "DEBUG keeps every query in memory; a worker runs without it"
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        postgres = cursor.fetchone()[0]
    print(f"Python {platform.python_version()}, PostgreSQL {postgres}, Django DEBUG {settings.DEBUG}", flush=True)

    project = project_create(slug="bfcl", name="BFCL multi-turn agent", owner="owner").project
    agent = KeyClient(api_key_create(project=project, name="agent", scopes=["ingest", "policy:read"]).secret)
    timings: dict[str, float] = {}

    # --- Ingest ------------------------------------------------------------------------------------
    now = timezone.now()
    start, end = now - timedelta(days=DAYS, minutes=1), now + timedelta(minutes=1)
    validator = Validator()
    advertised = openai_tools(tools)
    validator.check([], advertised)
    validated: set[str] = set()
    total = len(conversations)
    step = max(total // 10, 1)
    began = time.perf_counter()
    for number, (conversation, moment) in enumerate(zip(conversations, spread(total, (DAYS, 0), now), strict=True), 1):
        messages = messages_of(conversation)
        original = conversation.id.split("#", 1)[0]
        if original not in validated:  # a copy's messages are its original's
            validator.check(messages)
            validated.add(original)
        response = agent.post_json("/api/v1/transcripts", transcript(conversation, messages, advertised, moment))
        assert response.status_code == 202, response.json()
        if number % step == 0 or number == total:
            elapsed = time.perf_counter() - began
            print(f"  ingest: {number}/{total} transcripts posted, {elapsed:.1f} s ({number / elapsed:.0f}/s)",
                  flush=True)
    timings["ingest (POST /transcripts)"] = time.perf_counter() - began

    # --- Processing --------------------------------------------------------------------------------
    batches = list(IngestBatch.objects.filter(project=project).order_by("pk").values_list("pk", flat=True))
    step = max(len(batches) // 10, 1)
    began = time.perf_counter()
    for number, batch_id in enumerate(batches, 1):
        batch_process(batch_id=batch_id)
        if number % step == 0 or number == len(batches):
            elapsed = time.perf_counter() - began
            print(f"  processing: {number}/{len(batches)} batches, {elapsed:.1f} s ({number / elapsed:.0f}/s)",
                  flush=True)
    timings["processing (batch_process)"] = time.perf_counter() - began
    began = time.perf_counter()
    stored = process_and_check(project, conversations)  # every batch is done: it checks what was stored
    timings["check (every session stored whole)"] = time.perf_counter() - began
    counts = ", ".join(f"{value:,} {key}" for key, value in stored.items() if key != "sessions")
    print(f"stored {stored['sessions']:,} sessions ({counts}), every one whole", flush=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_size_pretty(pg_database_size(current_database()))")
        print(f"database size: {cursor.fetchone()[0]}", flush=True)
    for what, seconds in timings.items():
        print(f"  {what}: {seconds:.1f} s")

    # --- The recommendation, as the worker runs it -----------------------------------------------
    response = agent.post_json("/api/v1/recommendations", {"start": iso(start), "end": iso(end), "limit": LIMIT})
    assert response.status_code in (200, 202), response.json()
    run = Recommendation.objects.get(pk=response.json()["id"])
    assert run.status == SimulationStatus.PENDING, run.status  # queued, not run by the request
    print(f"\nrecommendation {run.pk}: {run.start:%Y-%m-%d %H:%M}..{run.end:%Y-%m-%d %H:%M}, limit {run.limit}")
    print(f"load average before timing: {load_average()}", flush=True)

    began = time.perf_counter()
    rows = simulation_session_rows(project=run.project, start=run.start, end=run.end, agent_name=run.agent_name or None,
                                   model=run.model or None, limit=run.limit, newest=True)
    rows_seconds = time.perf_counter() - began
    began = time.perf_counter()
    sessions = simulation_sessions_load(rows=[(pk, key) for pk, key, _ in rows])
    load_seconds = time.perf_counter() - began
    turns = sum(len(session.turns) for session in sessions)
    calls = sum(len(turn.calls) for session in sessions for turn in session.turns)
    print(f"reading the sessions: simulation_session_rows {rows_seconds:.2f} s ({len(rows):,} rows), "
          f"simulation_sessions_load {load_seconds:.2f} s ({len(sessions):,} sessions, {turns:,} turns, "
          f"{calls:,} calls); together {rows_seconds + load_seconds:.2f} s", flush=True)
    del sessions

    results = []
    for attempt in (1, 2):
        marks: list[float] = []

        def progress(done: int, total: int, marks: list[float] = marks) -> None:
            # what the worker's callback does (services/recommendations.py, _compute), timed
            Recommendation.objects.filter(pk=run.pk).update(candidates_done=done, candidates_total=total)
            marks.append(time.perf_counter())

        began = time.perf_counter()
        answer = policy_recommendations(project=run.project, days=run.days, limit=run.limit, start=run.start,
                                        end=run.end, agent_name=run.agent_name, model=run.model, progress=progress)
        seconds = time.perf_counter() - began
        scored = marks[-1] - began if marks else seconds
        results.append(seconds)
        verdict = "under" if seconds < GOAL_SECONDS else "OVER"
        print(f"\npolicy_recommendations, run {attempt}: {seconds:.1f} s ({verdict} the {GOAL_SECONDS} s goal)")
        print(f"  reading + learning + scoring the {len(marks)} candidates: {scored:.1f} s "
              f"(the first scored at {marks[0] - began:.1f} s)" if marks else "  no candidate scored")
        print(f"  refit on every session + front + pick: {seconds - scored:.1f} s")
        print(f"  sessions {answer['sessions']:,}, fit {answer['fit']:,}, held_out {answer['held_out']:,} "
              f"(replayed {answer.get('scored', answer['held_out']):,}), "
              f"candidates {len(answer['candidates'])}, front {len(answer['front'])}, "
              f"recommended {answer['recommended']!r}", flush=True)
        best = next((row for row in answer["candidates"] if row["name"] == answer["recommended"]), None)
        if best is not None:
            print(f"  recommended's held-out figures: schema tokens saved {best['saved_share']:.1%}, hard misses "
                  f"{best['hard_miss_rate']:.2%}, recoverable misses {best['recoverable_miss_rate']:.2%}")

    print(f"\nload average after: {load_average()}")
    print(f"summary: {len(rows):,} sessions read in {rows_seconds + load_seconds:.1f} s; policy_recommendations "
          + ", ".join(f"{seconds:.1f} s" for seconds in results) + f" (goal < {GOAL_SECONDS} s)")


if __name__ == "__main__":
    main()
