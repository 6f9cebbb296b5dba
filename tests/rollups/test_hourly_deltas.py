"""Rollups kept by processing's deltas equal a rebuild from the raw rows, whatever the batches.

Random batches over three hours: sessions whose start moves to an earlier hour, turns advertising
tools, calls arriving late and out of order (a late call with an earlier timestamp becomes the
first occurrence and turns a stored call into its duplicate: a decrease), repeated events, errors,
durations and compacted outputs, and slices that move: a session named (or renamed) by a later
session event, a model named by one, calls whose turn (and so whose model) arrives after them.
After the batches, the rollups as processing left them (duration
sketches and percentiles included) must equal what `rollups_rebuild` computes from scratch."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from tests.factories import make_key
from toolscope.policies.models import CompactionRule, Policy
from toolscope.telemetry.models import DirtyHour, IngestBatch, ProjectHourly, ToolDaily, ToolHourly
from toolscope.telemetry.services.ingest import ingest_events
from toolscope.telemetry.services.processing import batch_process
from toolscope.telemetry.services.rollups import rollups_rebuild, rollups_refresh
from toolscope.telemetry.sketches import RELATIVE_ACCURACY, bin_key

H0 = datetime(2026, 11, 22, 10, tzinfo=UTC)
HOURS = [H0 + timedelta(hours=n) for n in range(3)]
LOG = "".join(f"tests/test_api.py::test_case_{n} PASSED [{n}%]\n" for n in range(60))
OUTPUTS = ["def add(a, b):\n    return a + b\n", "ok\n", LOG, LOG + "1 failed\n", "", "x = 1\n"]
TOOLS = [
    {"name": name, "description": f"The {name} tool", "input_schema": {
        "type": "object", "properties": {"arg": {"type": "string"}}, "required": ["arg"]}}
    for name in ("read_file", "bash", "grep")
]
MODELS = ["gpt-4o", "claude-sonnet-4-5"]


def moment(rng: random.Random) -> str:
    return (rng.choice(HOURS) + timedelta(seconds=rng.randrange(3600))).isoformat()


def random_batches(seed: int, count: int) -> list[list[dict]]:
    rng = random.Random(seed)
    sent: list[dict] = []
    batches = []
    for b in range(count):
        events: list[dict] = []
        for n in range(rng.randrange(3, 12)):
            session = f"s{rng.randrange(4)}"
            kind = rng.choices(["session", "turn", "tool_call", "again"], weights=[1, 3, 6, 1])[0]
            if kind == "again" and sent:
                events.append(rng.choice(sent))  # an event sent before: skipped, changes nothing
                continue
            if kind == "session":
                event = {"type": "session", "id": session, "agent_name": rng.choice(["coder", "reviewer"]),
                         "timestamp": moment(rng)}
                if rng.random() < 0.5:
                    event["model"] = rng.choice(MODELS)
            elif kind == "turn":
                index = rng.randrange(5)
                event = {"type": "turn", "id": f"{session}:t{index}", "session_id": session, "index": index,
                         "timestamp": moment(rng), "model": MODELS[(index + int(session[1:])) % len(MODELS)],
                         "tools": rng.sample(TOOLS, rng.randrange(len(TOOLS) + 1)),
                         "system_prompt": "You are a coding agent.",
                         "messages": [{"role": "user", "content": f"step {index}"}],
                         "usage": {"input_tokens": rng.randrange(50, 5000), "output_tokens": rng.randrange(100)}}
            else:
                event = {"type": "tool_call", "id": f"{session}:c{b}-{n}", "session_id": session,
                         "turn_index": rng.randrange(5), "tool_name": rng.choice(TOOLS)["name"],
                         "arguments": {"arg": "x"}, "output": rng.choice(OUTPUTS), "timestamp": moment(rng),
                         "status": rng.choice(["ok", "ok", "ok", "error"])}
                if rng.random() < 0.8:
                    event["duration_ms"] = round(rng.uniform(1, 500), 3)
                if rng.random() < 0.25:  # no status: the project's error patterns classify the output
                    del event["status"]
                    event["output"] = rng.choice(["Error: no such file", "Error executing tool x: bad", "fine"])
            events.append(event)
            sent.append(event)
        batches.append(events)
    return batches


def rollups() -> tuple[list[dict], list[dict], list[dict]]:
    tools = list(ToolHourly.objects.order_by("hour", "tool_name", "agent_name", "model").values().iterator())
    hours = list(ProjectHourly.objects.order_by("hour", "agent_name", "model").values().iterator())
    days = list(ToolDaily.objects.order_by("day", "tool_name").values().iterator())
    for row in tools + hours + days:
        del row["id"]
    return tools, hours, days


def rebuilt(project) -> tuple[list[dict], list[dict]]:
    rollups_rebuild(project_id=project.pk, hours=HOURS)
    return rollups()


@pytest.fixture
def policy_project(project):
    project.context_window = 4000
    project.save()
    policy = Policy.objects.create(project=project, suppress_duplicates=True)
    CompactionRule.objects.create(policy=policy, tools="bash*", max_tokens=40, strategy="head_tail")
    return project


def process(project, events: list[dict]) -> None:
    outcome = ingest_events(api_key=make_key(project).api_key, raw_events=events)
    assert outcome.counts["rejected"] == 0, outcome.results
    batch_process(batch_id=outcome.batch_id)  # already done where Celery runs tasks eagerly (SQLite)
    assert IngestBatch.objects.get(pk=outcome.batch_id).status == "done"


@pytest.mark.parametrize("seed", range(8))
def test_rollups_kept_by_deltas_equal_a_rebuild(policy_project, seed):
    batches = random_batches(seed, 8)
    for events in batches:
        process(policy_project, events)
    assert not DirtyHour.objects.exists()  # nothing left for the rollup task
    kept = rollups()
    assert kept[0] and kept[1]
    assert len({(row["agent_name"], row["model"]) for row in kept[1]}) > 2  # the slices are exercised
    assert any(row["duration_bins"] for row in kept[0]) and any(row["duration_p95_ms"] for row in kept[0])
    assert kept[2] and all(row["duration_bins"] for row in kept[2])  # the days' sketches
    unflagged = any("status" not in e and e.get("output") == "Error: no such file" for b in batches for e in b)
    assert (sum(row["unflagged_errors"] for row in kept[0]) > 0) == unflagged  # "error text, not flagged"
    assert kept == rebuilt(policy_project)


def test_deltas_on_top_of_a_rebuild_stay_equal_to_one(policy_project):
    """A rebuild between batches (an operator's `rollup --rebuild`) and deltas interleave."""
    for events in random_batches(99, 10):
        process(policy_project, events)
        kept = rollups()
        assert kept == rebuilt(policy_project)


def test_decreases_happen_and_are_applied(policy_project):
    """A late call with an earlier timestamp takes over as the first occurrence: the stored call
    becomes its duplicate and its hour's figures move."""
    later = {"type": "tool_call", "id": "s1:c2", "session_id": "s1", "turn_index": 1, "tool_name": "read_file",
             "output": LOG, "timestamp": HOURS[1].isoformat()}
    earlier = {**later, "id": "s1:c1", "turn_index": 0, "timestamp": HOURS[0].isoformat()}
    process(policy_project, [later])
    assert ToolHourly.objects.get(hour=HOURS[1]).duplicates == 0
    process(policy_project, [earlier])
    second, first = ToolHourly.objects.get(hour=HOURS[1]), ToolHourly.objects.get(hour=HOURS[0])
    assert (first.duplicates, second.duplicates) == (0, 1)
    assert second.duplicate_tokens == second.output_tokens > 0
    assert rollups() == rebuilt(policy_project)


def test_a_session_whose_start_moves_leaves_no_empty_hour(policy_project):
    process(policy_project, [{"type": "session", "id": "s1", "timestamp": HOURS[2].isoformat()}])
    assert ProjectHourly.objects.get().sessions == 1
    process(policy_project, [{"type": "session", "id": "s1", "timestamp": HOURS[0].isoformat()}])
    assert list(ProjectHourly.objects.values_list("hour", "sessions")) == [(HOURS[0], 1)]
    assert rollups() == rebuilt(policy_project)


def test_reprocessing_batches_changes_no_rollup(policy_project):
    for events in random_batches(7, 5):
        process(policy_project, events)
    before = rollups()
    for batch in IngestBatch.objects.order_by("pk"):
        IngestBatch.objects.filter(pk=batch.pk).update(status="pending")
        assert batch_process(batch_id=batch.pk)
    assert rollups() == before


def test_processing_keeps_percentiles_itself_and_a_rebuild_mark_survives_it(policy_project):
    from toolscope.telemetry.services.rollups import dirty_hours_mark

    dirty_hours_mark(project_id=policy_project.pk, timestamps=[HOURS[0]])
    process(policy_project, [{"type": "tool_call", "id": f"s1:c{n}", "session_id": "s1", "turn_index": 0,
                              "tool_name": "bash", "output": "ok\n", "duration_ms": duration,
                              "timestamp": (HOURS[n % 2] + timedelta(minutes=n)).isoformat()}
                             for n, duration in enumerate([5.0, 7.0, 5.0, 0.0])])
    assert list(DirtyHour.objects.values_list("hour", flat=True)) == [HOURS[0]]  # processing marks nothing
    first, second = ToolHourly.objects.get(hour=HOURS[0]), ToolHourly.objects.get(hour=HOURS[1])
    assert first.duration_p50_ms == pytest.approx(5.0, rel=RELATIVE_ACCURACY)
    # Of two values, both fractions read rank floor(q * (2 - 1)) = 0: the lower one (sketches.py).
    assert (second.duration_p50_ms, second.duration_p95_ms) == (0, 0)
    assert sum(first.duration_bins.values()) == 2 and second.duration_bins["z"] == 1
    assert rollups_refresh() == 1
    assert not DirtyHour.objects.exists()
    assert rollups() == rebuilt(policy_project)


def test_hours_stored_before_sketches_are_marked_for_a_rebuild_by_their_migration(policy_project):
    """Migration 0015: an hour with percentiles and no sketch yet is rebuilt by the rollup task."""
    import importlib

    from django.apps import apps

    process(policy_project, [{"type": "tool_call", "id": "s1:c1", "session_id": "s1", "turn_index": 0,
                              "tool_name": "bash", "output": "ok\n", "duration_ms": 12.5,
                              "timestamp": HOURS[1].isoformat()}])
    ToolHourly.objects.update(duration_bins={})  # as the hour was before the migration
    migration = importlib.import_module("toolscope.telemetry.migrations.0015_duration_sketches")
    migration.mark_timed_hours(apps, None)
    assert list(DirtyHour.objects.values_list("project_id", "hour")) == [(policy_project.pk, HOURS[1])]
    assert rollups_refresh() == 1
    assert ToolHourly.objects.get().duration_bins == {bin_key(12.5): 1}
