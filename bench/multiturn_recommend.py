"""toolscope's recommended policy on independent multi-turn recordings (issue 25's Goal), scored by
replaying every held-out request through the real REST API, as an agent would call it.

The recordings are BFCL's 800 multi-turn conversations (bench/multiturn_data.py: a 128-tool agent
over 8 API suites, every call executed on BFCL's own API classes, split by scenario into older and
newer sessions). In-process, on a scratch PostgreSQL database (bench/_stack.py), this script:

1. posts each conversation as an OpenAI Chat Completions transcript to `POST /api/v1/transcripts`,
   every message and tool first validated against the official `openai` package's types;
2. processes every batch with the worker's service and checks every session was stored whole;
3. asks `POST /api/v1/recommendations` for the older sessions' time range, runs it with the
   worker's service, reads its candidates with `GET /api/v1/recommendations/{id}` and prints the
   Pareto front;
4. applies the recommended candidate to the draft (`POST .../apply`, an `admin` key) and publishes
   the draft as the `production` label;
5. replays every request of every newer session through `POST /api/v1/policy/resolve`, and, for a
   call whose tool was not sent while `tool_search` was, `POST /api/v1/tools/search`: a call is a
   hit (its tool was sent), a recoverable miss (the search finds it, or a progressive policy's
   menu lists it: the agent asks for it with a `$name` hint) or a hard miss;
6. runs toolscope's own simulation of the published policy on the newer range
   (`POST /api/v1/simulations`) and prints its figures next to the replay's, and a simulation of
   the candidate's `selection` and `outputs` as the recommendation answers them (an uploaded
   document): any difference between the two is something applying or publishing lost (the
   script also lists what of the candidate's `selection` the published document does not say
   alike). A `refit` candidate's document was learnt again on every older session, while its
   figures are those of its version learnt on the fit sessions, scored on the held-out ones;
7. prints two references on the newer sessions (the exact tools each conversation calls, and every
   tool of the suites it touches), and the timings.

Run (bench/requirements.txt holds bfcl-eval, the data and its API classes):

    .venv/bin/pip install --no-deps -r bench/requirements.txt
    .venv/bin/python bench/multiturn_recommend.py [--limit N] [--seed 25]

`--candidate NAME` applies and publishes another candidate of the run; `--learned-history`
refreshes tool_search's learned history from the older sessions before the replay (the hourly
task's work; the replay's searches then use it).

Why each choice:

- **Transcripts, not events.** `/transcripts` is how a host that keeps its conversation ships it,
  and the OpenAI Chat shape is the most common; toolscope derives the turns, each turn's task
  message (the latest user message at or before it) and the calls itself, so what is scored is
  what toolscope understood of the conversation, not figures handed to it.
- **One call per assistant message, then a closing text message per user turn.** That is one model
  request per call (BFCL's ground truth is sequential: each call sees the previous output), plus
  the request that answers the user; a turn with no instruction ("" in BFCL's miss_func turns)
  sends no user message and works on the previous task, as the agent would.
- **Every request advertises all 128 tools.** The agent under test does not know which suites a
  user will need (bench/multiturn_data.py), so the baseline is sending everything.
- **Time ranges select a side.** Older sessions are spread over days -30..-11 before now and newer
  ones over -10..-1, in `split`'s order: the recommendation learns (and internally scores its
  candidates) on the older range only, and the replay and the simulation score the newer range,
  whose scenarios the recommendation never saw.
- **The replay is an agent, not the simulator.** Each request asks `/policy/resolve` with the
  request's task and the state the previous answer returned, updated as the SDK's agent updates
  it (`SessionState.observe`: the called tool, and a recovered search's whole answer); misses are found
  by the real search endpoint. The simulation is toolscope's own estimate of the same thing: the
  two should agree (issue 25 asks within 0.5 points), and the script reports the difference
  rather than asserting it.
- **No broker.** Celery uses the in-memory transport (nothing is delivered), so ingest,
  processing, the recommendation and the simulation are each run, and timed, by this script with
  the services the workers call.
- **No learned search history by default.** The hourly refresh of `tool_search`'s learned history
  is not run: over its 30 days it would learn from the newer sessions themselves, the test set.
  `--learned-history` learns it from the older sessions only.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SYSTEM = ("You are an assistant with tools for files, math, messages, social posts, support tickets, "
          "trading, travel and the car. Use the tools to carry out the user's requests.")
CLOSING = "Done."
MODEL = "gpt-4.1"
AGENT = "bfcl-agent"
SEARCH_TOOL_NAME = "tool_search"
OLDER_DAYS = (30, 11)  # days before now: the older sessions' first and last start
NEWER_DAYS = (10, 1)


# --- Transcripts -----------------------------------------------------------------------------------

def openai_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": tool["name"], "description": tool["description"],
                                              "parameters": tool["input_schema"]}} for tool in tools]


def messages_of(conversation: Any) -> list[dict[str, Any]]:
    """The conversation as Chat Completions messages (see the module docstring)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    number = 0
    for turn in conversation.turns:
        if turn.message:
            messages.append({"role": "user", "content": turn.message})
        for call in turn.calls:
            number += 1
            call_id = f"call_{number:03d}"
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function",
                 "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}]})
            messages.append({"role": "tool", "tool_call_id": call_id, "content": call.output})
        messages.append({"role": "assistant", "content": CLOSING})
    return messages


def claude_code_gaps() -> list[float]:
    """Seconds between consecutive requests of the three public Claude Code recordings
    (tests/fixtures/claude_code, main thread): a real agent's pace, a person's pauses included
    (455 gaps: median 8 s, 5% over 5 minutes, the longest 12.7 hours)."""
    gaps = []
    for path in sorted((REPO / "tests" / "fixtures" / "claude_code").glob("*.jsonl")):
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        times = sorted(datetime.fromisoformat(line["timestamp"].replace("Z", "+00:00")) for line in lines
                       if not line.get("isSidechain"))
        gaps += [(later - earlier).total_seconds() for earlier, later in itertools.pairwise(times)]
    return gaps


def timed(messages: list[dict[str, Any]], start: datetime, gaps: list[float], rng: random.Random,
          ) -> list[dict[str, Any]]:
    """`messages` with each assistant message's `timestamp` as a host that logs messages stores
    it: the first request at `start`, each next one a gap drawn from `gaps` later."""
    moment, first = start, True
    stamped = []
    for message in messages:
        if message["role"] == "assistant":
            moment = moment if first else moment + timedelta(seconds=rng.choice(gaps))
            first = False
            message = {**message, "timestamp": iso(moment)}
        stamped.append(message)
    return stamped


def spread(count: int, days: tuple[int, int], now: datetime) -> list[datetime]:
    """`count` start times from `days[0]` to `days[1]` days before `now`, oldest first."""
    first, last = now - timedelta(days=days[0]), now - timedelta(days=days[1])
    step = (last - first) / max(count - 1, 1)
    return [first + step * index for index in range(count)]


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


class Validator:
    """Every message and tool checked against the official openai package's request types, losing
    nothing in validation (no key the type lacks), as tests/transcripts/test_mcp_sessions.py does."""

    def __init__(self) -> None:
        from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionMessageParam
        from pydantic import TypeAdapter

        self.messages = TypeAdapter(list[ChatCompletionMessageParam])
        self.tools = TypeAdapter(list[ChatCompletionFunctionToolParam])

    def check(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> None:
        from tests.sdk_types import materialized  # the SDK's lazy iterables read, as the tests read them

        assert materialized(self.messages.validate_python(messages)) == messages
        if tools is not None:
            assert materialized(self.tools.validate_python(tools)) == tools


# --- The stack -------------------------------------------------------------------------------------

def requests_of(conversation: Any) -> Iterator[tuple[str, str | None]]:
    """(task, called tool or None) per model request, in order: one per call, one closing each turn."""
    task = ""
    for turn in conversation.turns:
        task = turn.message or task
        for call in turn.calls:
            yield task, call.name
        yield task, None


def transcript(conversation: Any, messages: list[dict[str, Any]], advertised: list[dict[str, Any]],
               start: datetime, model: str = MODEL) -> dict[str, Any]:
    """The body of `POST /api/v1/transcripts` for a conversation."""
    return {"session_id": f"bfcl-{conversation.id}", "timestamp": iso(start), "model": model, "agent_name": AGENT,
            "metadata": {"category": conversation.category, "scenario": conversation.scenario},
            "messages": messages, "tools": advertised}


def ingest(client: Any, older: list[Any], newer: list[Any], tools: list[dict[str, Any]], now: datetime,
           model: str = MODEL, gaps: list[float] | None = None) -> tuple[datetime, datetime, datetime, datetime]:
    """Post every conversation; the older and the newer sides' time ranges [start, end). With
    `gaps`, each assistant message carries its request's time (`timed`, seeded)."""
    rng = random.Random(26)
    validator = Validator()
    advertised = openai_tools(tools)
    validator.check([], advertised)
    starts = spread(len(older), OLDER_DAYS, now) + spread(len(newer), NEWER_DAYS, now)
    for conversation, start in zip([*older, *newer], starts, strict=True):
        messages = messages_of(conversation)
        validator.check(messages)  # as the provider's SDK sends them; the host's times added after
        if gaps:
            messages = timed(messages, start, gaps, rng)
        response = client.post_json("/api/v1/transcripts", transcript(conversation, messages, advertised, start, model))
        assert response.status_code == 202, response.json()
        assert response.json()["format"] == "openai_chat", response.json()
    cut = now - timedelta(days=(OLDER_DAYS[1] + NEWER_DAYS[0]) / 2)  # between the two sides
    return now - timedelta(days=OLDER_DAYS[0], minutes=1), cut, cut, now


def process_and_check(project: Any, conversations: list[Any]) -> dict[str, int]:
    from toolscope.telemetry.models import IngestBatch, QuarantinedEvent, Session, ToolCall, Turn
    from toolscope.telemetry.services.processing import batch_process

    for batch_id in IngestBatch.objects.filter(project=project).order_by("pk").values_list("pk", flat=True):
        batch_process(batch_id=batch_id)
    stored = {client_id: (turns, calls) for client_id, turns, calls in
              Session.objects.filter(project=project).values_list("client_id", "turn_count", "tool_call_count")}
    expected = {f"bfcl-{c.id}": (sum(len(t.calls) + 1 for t in c.turns), sum(len(t.calls) for t in c.turns))
                for c in conversations}
    wrong = {key: (stored.get(key), want) for key, want in expected.items() if stored.get(key) != want}
    assert not wrong, f"{len(wrong)} sessions not stored whole, e.g. {list(wrong.items())[:3]}"
    assert len(stored) == len(expected), (len(stored), len(expected))
    quarantined = QuarantinedEvent.objects.filter(project=project).count()
    assert quarantined == 0, f"{quarantined} quarantined events"
    return {"sessions": len(stored), "turns": Turn.objects.filter(project=project).count(),
            "calls": ToolCall.objects.filter(project=project).count(),
            "not ok": ToolCall.objects.filter(project=project).exclude(status="ok").count()}


def recommendation(client: Any, start: datetime, end: datetime, limit: int) -> dict[str, Any]:
    from toolscope.policies.models import Recommendation, SimulationStatus
    from toolscope.policies.services.recommendations import recommendation_run

    response = client.post_json("/api/v1/recommendations", {"start": iso(start), "end": iso(end), "limit": limit})
    assert response.status_code in (200, 202), response.json()
    run_id = response.json()["id"]
    if Recommendation.objects.get(pk=run_id).status == SimulationStatus.PENDING:
        recommendation_run(recommendation_id=run_id)  # what the worker runs for the queued task
    run = client.get(f"/api/v1/recommendations/{run_id}").json()
    assert run["status"] == "done", run
    return run


def simulation(client: Any, start: datetime, end: datetime, document: dict[str, Any] | None = None,
               ) -> dict[str, Any]:
    """The production policy (or `document`) simulated on [start, end) over REST."""
    from toolscope.policies.models import Simulation, SimulationStatus
    from toolscope.policies.services.simulation_runs import simulation_run

    which = {"label": "production"} if document is None else {"document": document}
    response = client.post_json("/api/v1/simulations", {**which, "start": iso(start), "end": iso(end)})
    assert response.status_code in (200, 202), response.json()
    run_id = response.json()["id"]
    if Simulation.objects.get(pk=run_id).status == SimulationStatus.PENDING:
        simulation_run(simulation_id=run_id)
    for _ in range(600):
        run = client.get(f"/api/v1/simulations/{run_id}").json()
        if run["status"] in ("done", "failed", "cancelled"):
            break
        time.sleep(0.5)
    assert run["status"] == "done", run
    return run


MENU_LINE = re.compile(r"^[-*]\s*([A-Za-z0-9_.-]+)", re.MULTILINE)  # a progressive menu's "- name: ..." lines


def replay(client: Any, newer: list[Any], top_k: int) -> dict[str, Any]:
    """Every request of every newer session through /policy/resolve (and /tools/search on a miss),
    as an agent applying the production policy does."""
    from toolscope_agent.engine.selection import SessionState

    figures: dict[str, Any] = {"requests": 0, "calls": 0, "hits": 0, "recoverable": 0, "hard": 0, "selected": 0,
                               "all": 0, "searches": 0, "sent_tools": 0, "resolve_seconds": 0.0,
                               "search_seconds": 0.0, "hard_tools": Counter(), "by_category": {}}
    for conversation in newer:
        state: dict[str, Any] | None = None
        category = figures["by_category"].setdefault(conversation.category, Counter())
        for task, called in requests_of(conversation):
            began = time.perf_counter()
            response = client.post_json("/api/v1/policy/resolve", {"message": task, "state": state,
                                                                  "format": "openai"})
            figures["resolve_seconds"] += time.perf_counter() - began
            assert response.status_code == 200, response.json()
            answer = response.json()
            names = {tool["function"]["name"] for tool in answer["tools"]}
            figures["requests"] += 1
            figures["selected"] += answer["tokens"]["selected"]
            figures["all"] += answer["tokens"]["all"]
            figures["sent_tools"] += len(names)
            observed: list[dict[str, Any]] = []
            hint = ""
            if called is not None:
                figures["calls"] += 1
                category["calls"] += 1
                if called in names:
                    figures["hits"] += 1
                elif answer.get("menu") and called in MENU_LINE.findall(answer["menu"]):
                    # Progressive mode: the tool is on the menu; the agent asks for it with a hint.
                    figures["recoverable"] += 1
                    category["recoverable"] += 1
                    hint = f"${called}"
                elif (SEARCH_TOOL_NAME in names and task.strip()
                      and called in (found := search(client, task, top_k, figures))):
                    figures["recoverable"] += 1
                    category["recoverable"] += 1
                    # The agent's state loads the search's whole answer (the SDK's selector does).
                    observed.append({"name": SEARCH_TOOL_NAME, "results": found})
                else:
                    figures["hard"] += 1
                    category["hard"] += 1
                    figures["hard_tools"][called] += 1
                observed.append({"name": called})
            session = SessionState.from_dict(answer["state"])
            session.observe(hint, observed)
            state = session.to_dict()
    return figures


def search(client: Any, query: str, top_k: int, figures: dict[str, Any]) -> list[str]:
    began = time.perf_counter()
    response = client.post_json("/api/v1/tools/search", {"query": query, "top_k": top_k})
    figures["search_seconds"] += time.perf_counter() - began
    figures["searches"] += 1
    assert response.status_code == 200, response.json()
    return [hit["name"] for hit in response.json()["results"]]


def references(project: Any, newer: list[Any], suite_of: dict[str, str]) -> dict[str, float]:
    """Schema tokens saved on the newer sessions by sending, on every request, exactly the tools the
    conversation calls, or every tool of the suites those belong to (Tool.schema_tokens)."""
    from toolscope.policies.models import Tool

    costs = dict(Tool.objects.filter(project=project).values_list("name", "schema_tokens"))
    everything = sum(costs.values())
    members: dict[str, set[str]] = {}
    for name, suite in suite_of.items():
        members.setdefault(suite, set()).add(name)
    sent = {"exact": 0, "suites": 0}
    total = 0
    for conversation in newer:
        called = {call.name for turn in conversation.turns for call in turn.calls}
        suites = {suite_of[name] for name in called}
        requests = sum(len(turn.calls) + 1 for turn in conversation.turns)
        total += requests * everything
        sent["exact"] += requests * sum(costs[name] for name in called)
        sent["suites"] += requests * sum(costs[name] for suite in suites for name in members[suite])
    return {"everything_per_request": everything, "all": total,
            **{key: 1 - value / total if total else 0.0 for key, value in sent.items()}}


# --- Report ----------------------------------------------------------------------------------------

def front_table(run: dict[str, Any]) -> None:
    result = run["result"]
    rows = {row["name"]: row for row in result["candidates"]}
    print(f"\nrecommendation {run['id']}: {result['sessions']} older sessions, learnt on {result['fit']}, "
          f"scored on {result['held_out']}; {len(rows)} candidates, {len(result['front'])} on the front\n")
    print("| candidate (Pareto front) | schema tokens saved | net saved | hard misses | recoverable misses |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name in result["front"]:
        row = rows[name]
        mark = " **(recommended)**" if name == result["recommended"] else ""
        print(f"| {name}{mark} | {row['saved_share']:.1%} | {row['net_saved_share']:.1%} | "
              f"{row['hard_miss_rate']:.2%} | {row['recoverable_miss_rate']:.2%} |")
    best = rows.get(result["recommended"])
    if best is not None and result.get("baselines"):
        print("\n| held-out (older range), input dollars | dollars | saved | schema tokens saved | hard misses "
              "| list changes |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        for row in [best, *result["baselines"]]:
            print(f"| {row['name']} | ${row['policy_dollars']:,.2f} (of ${row['recorded_dollars']:,.2f}) | "
                  f"{row['net_dollars_share']:.1%} | {row['saved_share']:.1%} | {row['hard_miss_rate']:.2%} | "
                  f"{row['cache_breaks']:,} |")


ALTERNATIVES = {
    "every tool": {"mode": "all"},
    "provider's deferred loading of the whole catalog": {
        "mode": "tool_search", "always_on": ["tool_search"],
        "tool_search": {"top_k": 8, "max_top_k": 20, "ranker": "bm25f-2", "provider_search": True}},
}


def dollars_table(compared: dict[str, dict[str, Any]]) -> None:
    """Each policy's simulation of the newer range in dollars (the model's published prices)."""
    print("\n| newer range, input dollars | dollars | saved | schema tokens saved | hard misses | list changes |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for label, result in compared.items():
        money = result.get("dollars") or {}
        hard = result["hard_misses"] / result["calls"] if result["calls"] else 0.0
        print(f"| {label} | ${money.get('policy', 0):,.2f} (of ${money.get('recorded', 0):,.2f}) | "
              f"{money.get('saved_share', 0):.1%} | {result['saved_share']:.1%} | {hard:.2%} | "
              f"{money.get('cache_breaks', 0):,} |")


def differences(candidate: dict[str, Any], published: dict[str, Any]) -> list[str]:
    """What of the candidate's `selection` the published document's does not say alike."""
    found = []

    def compare(what: str, want: Any, got: Any) -> None:
        if want != got:
            found.append(f"{what}: candidate {want!r}, published {got!r}")

    compare("mode", candidate.get("mode"), published.get("mode"))
    compare("always_on", sorted(candidate.get("always_on", [])), sorted(published.get("always_on", [])))
    compare("groups", {k: sorted(v) for k, v in candidate.get("groups", {}).items()},
            {k: sorted(v) for k, v in published.get("groups", {}).items()})
    compare("context_rules", [(r["name"], r.get("keywords") or [], r.get("regex") or None, sorted(r.get("groups", [])))
                              for r in candidate.get("context_rules", [])],
            [(r["name"], r.get("keywords") or [], r.get("regex") or None, sorted(r.get("groups", [])))
             for r in published.get("context_rules", [])])
    wanted, got = candidate.get("tool_search") or {}, published.get("tool_search") or {}
    for key in sorted(wanted):
        compare(f"tool_search.{key}", wanted[key], got.get(key))
    for key in sorted(set(candidate) - {"mode", "always_on", "groups", "context_rules", "tool_search"}):
        compare(key, candidate[key], published.get(key))
    return found


def points(a: float, b: float) -> str:
    return f"{(a - b) * 100:+.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="conversations per side (a quick run)")
    parser.add_argument("--seed", type=int, default=25, help="the scenario split's seed (multiturn_data.split)")
    parser.add_argument("--learned-history", action="store_true", help="refresh the project's learned search "
                        "history from the older sessions before the replay (as the hourly task would)")
    parser.add_argument("--model", default=MODEL, help="the model the transcripts name: it decides the prices "
                        "and the provider's cache rules the dollars follow (e.g. claude-sonnet-4-5)")
    parser.add_argument("--gaps", choices=["none", "claude-code"], default="none", help="request times: none "
                        "(the transcripts carry no times: requests back to back) or gaps drawn from the public "
                        "Claude Code recordings (tests/fixtures/claude_code), stamped on each assistant message")
    parser.add_argument("--lexical", action="store_true", help="the server without a semantic model "
                        "(TOOL_SEARCH_MODEL=off). By default it has the bundled all-MiniLM-L6-v2, as a server gets "
                        "it (issue 30): searching candidates fuse it, and the published policy's searches use it")
    parser.add_argument("--candidate", default=None, help="apply and publish this candidate (by name) instead of "
                        "the recommended one")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(REPO))
    from _stack import scratch_database
    from multiturn_data import CATEGORIES, catalog, load, split
    from search_data import bfcl_version

    began = time.perf_counter()
    tools, suite_of = catalog()
    older, newer = split(load(), seed=args.seed)
    older, newer = older[:args.limit], newer[:args.limit]
    load_seconds = time.perf_counter() - began
    print(f"data: bfcl-eval {bfcl_version()}, {', '.join(CATEGORIES)}: {len(older)} older and {len(newer)} newer "
          f"conversations (split seed {args.seed}, no scenario on both sides), {len(tools)} tools in "
          f"{len(set(suite_of.values()))} suites; loaded and executed in {load_seconds:.1f} s")

    with scratch_database() as database_url:
        # memory:// : tasks are queued where nothing consumes them; this script runs each service.
        os.environ.update(DATABASE_URL=database_url, TOOLSCOPE_ENV="development", LOG_LEVEL="WARNING",
                          DJANGO_SETTINGS_MODULE="toolscope.settings", CELERY_BROKER_URL="memory://localhost/",
                          API_RATE_LIMIT_PER_MINUTE="0", DEBUG="false")  # no debug cursor in the timings
        os.environ.pop("CELERY_RESULT_BACKEND", None)
        if args.lexical:
            os.environ["TOOL_SEARCH_MODEL"] = "off"
        import django

        django.setup()
        from django.core.management import call_command
        from django.test.utils import setup_test_environment

        setup_test_environment(debug=False)
        call_command("migrate", verbosity=0)
        run(args, tools, suite_of, older, newer)


def run(args: argparse.Namespace, tools: list[dict[str, Any]], suite_of: dict[str, str], older: list[Any],
        newer: list[Any]) -> None:
    from django.utils import timezone

    from tests.api.conftest import KeyClient
    from toolscope.policies.models import Policy
    from toolscope.policies.services.publish import policy_publish
    from toolscope.telemetry.services.api_keys import api_key_create
    from toolscope.telemetry.services.projects import project_create

    timings: dict[str, float] = {}
    created = project_create(slug="bfcl", name="BFCL multi-turn agent", owner="owner")
    project = created.project
    agent = KeyClient(api_key_create(project=project, name="agent", scopes=["ingest", "policy:read"]).secret)
    admin = KeyClient(api_key_create(project=project, name="admin", scopes=["policy:read", "admin"]).secret)

    began = time.perf_counter()
    older_start, older_end, newer_start, newer_end = ingest(agent, older, newer, tools, timezone.now(), args.model,
                                                             claude_code_gaps() if args.gaps == "claude-code" else None)
    timings["ingest (validate + POST /transcripts)"] = time.perf_counter() - began
    began = time.perf_counter()
    stored = process_and_check(project, [*older, *newer])
    timings["processing (batch_process)"] = time.perf_counter() - began
    counts = ", ".join(f"{value} {key}" for key, value in stored.items() if key != "sessions")
    print(f"stored {stored['sessions']} sessions ({counts}), every one whole")

    began = time.perf_counter()
    limit = min(5000, max(20, len(older)))
    recommended = recommendation(agent, older_start, older_end, limit)
    timings["recommendation (older range)"] = time.perf_counter() - began
    front_table(recommended)
    name = args.candidate or recommended["result"]["recommended"]
    assert name is not None, "no recommended candidate"
    response = admin.post_json(f"/api/v1/recommendations/{recommended['id']}/apply", {"candidate": name})
    assert response.status_code == 200, response.json()
    version = policy_publish(policy=Policy.objects.get(project=project), user=None,
                             comment=f"recommended: {name}", label="production")
    document = agent.get("/api/v1/policy", {"label": "production"}).json()
    selection = document["selection"]
    search_settings = selection.get("tool_search") or {}
    top_k = search_settings.get("top_k", 8)
    print(f"\npublished v{version.number} as production: {name} (mode {selection['mode']}, "
          f"{len(selection['always_on'])} always on, {len(selection['context_rules'])} context rules, "
          f"tool_search top_k {top_k}, ranker {search_settings.get('ranker')}, "
          f"learned {search_settings.get('learned')})")
    chosen = next(row for row in recommended["result"]["candidates"] if row["name"] == name)
    if chosen.get("refit"):
        print("  (its document was learnt again on every older session; its figures are the held-out ones)")
    for difference in differences(chosen["selection"], selection):
        print(f"  the published policy differs from the candidate: {difference}")

    if args.learned_history:
        from toolscope.policies.services.search_history import search_history_refresh

        history = search_history_refresh(project=project, until=older_end)
        print(f"learned search history: {len(history.tools)} tools, from {history.sessions} older sessions")
    began = time.perf_counter()
    replayed = replay(agent, newer, top_k)
    timings["replay (/policy/resolve + /tools/search)"] = time.perf_counter() - began
    began = time.perf_counter()
    simulated = simulation(agent, newer_start, newer_end)
    timings["simulation (newer range)"] = time.perf_counter() - began
    # The candidate's document as the recommendation answers it, uploaded: equal to the published
    # policy's simulation when applying and publishing kept everything.
    as_scored = {**document, "selection": {**selection, **chosen["selection"]},
                 "outputs": {**document["outputs"], **chosen["outputs"]}}
    uploaded = simulation(agent, newer_start, newer_end, as_scored)
    reference = references(project, newer, suite_of)
    report(replayed, simulated["result"], uploaded["result"], reference, recommended, name)
    # Issue 26's Goal on the newer range: the published recommendation against sending every tool
    # and the provider's own deferred loading of the whole catalog, in dollars.
    compared = {f"the published recommendation ({name})": simulated["result"]}
    for label, selection_only in ALTERNATIVES.items():
        compared[label] = simulation(agent, newer_start, newer_end, {**document, "selection": selection_only})["result"]
    dollars_table(compared)
    print("\ntimings")
    for what, seconds in timings.items():
        print(f"  {what}: {seconds:.1f} s")
    print(f"  replay per request: resolve {replayed['resolve_seconds'] / max(replayed['requests'], 1) * 1000:.1f} ms,"
          f" search {replayed['search_seconds'] / max(replayed['searches'], 1) * 1000:.1f} ms")


def report(replayed: dict[str, Any], simulated: dict[str, Any], uploaded: dict[str, Any], reference: dict[str, Any],
           recommended: dict[str, Any], name: str) -> None:
    calls = replayed["calls"]
    saved = 1 - replayed["selected"] / replayed["all"] if replayed["all"] else 0.0
    hard = replayed["hard"] / calls if calls else 0.0
    recoverable = replayed["recoverable"] / calls if calls else 0.0
    sim_hard = simulated["hard_misses"] / simulated["calls"] if simulated["calls"] else 0.0
    sim_recoverable = simulated["recoverable_misses"] / simulated["calls"] if simulated["calls"] else 0.0
    held = next(row for row in recommended["result"]["candidates"] if row["name"] == name)
    print(f"\nnewer sessions: {replayed['requests']} requests, {calls} calls; replay sent "
          f"{replayed['sent_tools'] / max(replayed['requests'], 1):.1f} tools per request, "
          f"searched {replayed['searches']} times")
    print("\n| newer range | requests | calls | schema tokens saved | hard misses | recoverable misses |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    print(f"| replay through /policy/resolve | {replayed['requests']} | {calls} | {saved:.2%} | {hard:.2%} "
          f"({replayed['hard']}) | {recoverable:.2%} ({replayed['recoverable']}) |")
    print(f"| toolscope's simulation | {simulated['turns']} | {simulated['calls']} | {simulated['saved_share']:.2%} | "
          f"{sim_hard:.2%} ({simulated['hard_misses']}) | {sim_recoverable:.2%} ({simulated['recoverable_misses']}) |")
    print(f"| difference (points) | | | {points(saved, simulated['saved_share'])} | {points(hard, sim_hard)} | "
          f"{points(recoverable, sim_recoverable)} |")
    up_hard = uploaded["hard_misses"] / uploaded["calls"] if uploaded["calls"] else 0.0
    up_recoverable = uploaded["recoverable_misses"] / uploaded["calls"] if uploaded["calls"] else 0.0
    print(f"| toolscope's simulation of the candidate's document (uploaded) | {uploaded['turns']} | "
          f"{uploaded['calls']} | {uploaded['saved_share']:.2%} | {up_hard:.2%} ({uploaded['hard_misses']}) | "
          f"{up_recoverable:.2%} ({uploaded['recoverable_misses']}) |")
    print(f"| (the recommendation's own held-out figures, older range) | | | {held['saved_share']:.2%} | "
          f"{held['hard_miss_rate']:.2%} | {held['recoverable_miss_rate']:.2%} |")
    print(f"\nschema tokens: replay sent {replayed['selected']:,} of {replayed['all']:,}; the simulation "
          f"{simulated['sent_tokens']:,} of {simulated['advertised_tokens']:,}; every tool costs "
          f"{reference['everything_per_request']:,} per request ({reference['all']:,} over the newer requests)")
    print("\nreferences on the newer sessions (schema tokens saved, every request):")
    print(f"  exactly the tools each conversation calls: {reference['exact']:.2%}")
    print(f"  every tool of the suites it touches:       {reference['suites']:.2%}")
    if replayed["by_category"]:
        print("\n| category | calls | hard misses | recoverable misses |")
        print("| --- | ---: | ---: | ---: |")
        for category, row in replayed["by_category"].items():
            print(f"| {category} | {row['calls']} | {row['hard'] / max(row['calls'], 1):.2%} | "
                  f"{row['recoverable'] / max(row['calls'], 1):.2%} |")
    if replayed["hard_tools"]:
        print("\nhard misses by tool:", ", ".join(f"{tool} {count}" for tool, count in
                                                  replayed["hard_tools"].most_common(12)))


if __name__ == "__main__":
    main()
