"""Fairness of background runs (issue 24, item 6): a project runs at most SIMULATIONS_PER_PROJECT
simulations and recommendations at once, each holding one of its project's slots (a PostgreSQL
advisory lock); a run finding none free goes back to the real broker's queue, pending, and says
how many of its project's runs are ahead; a slot runs its project's oldest pending run first.

tests/e2e/test_simulation_fairness.py proves it with a worker process: another project's run
finishes while one project's runs hold the simulator."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import timedelta

import pytest
import redis
from django.utils import timezone

from tests.admin.builders import make_policy, make_tool
from tests.api.conftest import KeyClient
from tests.factories import make_key, make_session, make_tool_call, make_turn
from tests.workers.database import other_connection
from toolscope.policies.models import Recommendation, Simulation, SimulationStatus
from toolscope.policies.services import background
from toolscope.policies.services.background import background_queue_position
from toolscope.policies.services.recommendations import recommendation_run, recommendation_start
from toolscope.policies.services.simulation_runs import (
    SessionSelection,
    simulation_document,
    simulation_run,
    simulation_start,
)


@pytest.fixture
def queue(settings):
    """A queue of this test's own on the real broker; its messages are read back, then dropped."""
    settings.SIMULATION_QUEUE = f"fairness-{uuid.uuid4().hex[:10]}"
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    yield client, settings.SIMULATION_QUEUE
    client.delete(settings.SIMULATION_QUEUE)
    client.close()


def sent(queue) -> list[tuple[str, list, bool]]:
    """(task, args, delayed) of each message on the queue."""
    client, name = queue
    messages = []
    for raw in client.lrange(name, 0, -1):
        message = json.loads(raw)
        args = json.loads(base64.b64decode(message["body"]))[0]
        messages.append((message["headers"]["task"], args, message["headers"].get("eta") is not None))
    return sorted(messages, key=lambda m: m[1])


@pytest.fixture
def recorded(project):
    return record_sessions(project)


def record_sessions(project):
    """Three sessions of one call each and a draft policy: something to replay (also
    tests/e2e/test_simulation_fairness.py's)."""
    make_tool(project, "read_file", schema_tokens=100)
    make_policy(project)
    for n in range(3):
        session = make_session(project, started_at=timezone.now() - timedelta(hours=3 - n))
        make_tool_call(make_turn(session, 0, advertised=["read_file"], task_message="fix it"), "read_file")
    return project


def start(project, limit: int) -> Simulation:
    """A pending simulation of the draft (its message is not sent: the test transaction never
    commits)."""
    document, source = simulation_document(project=project, draft=True)
    end = timezone.now()
    selection = SessionSelection(start=end - timedelta(days=1), end=end, limit=limit)
    return simulation_start(project=project, document=document, source=source, selection=selection)[0]


def slot_key(project_id: int, slot: int = 0) -> int:
    return background._SLOT_LOCK_BASE + project_id * background.MAX_SLOTS + slot


@pytest.fixture
def other_worker():
    """Another worker's database session, holding slots as a running run does."""
    with other_connection(autocommit=True) as conn:
        yield conn


def test_a_run_whose_project_has_no_free_slot_goes_back_to_the_queue_pending(
        recorded, queue, other_worker, settings):
    settings.SIMULATIONS_PER_PROJECT = 2
    waiting = start(recorded, limit=1)
    for slot in range(2):  # two runs of the project are running elsewhere
        other_worker.execute("SELECT pg_advisory_lock(%s)", [slot_key(recorded.pk, slot)])
    assert simulation_run(simulation_id=waiting.pk) is None
    waiting.refresh_from_db()
    assert waiting.status == SimulationStatus.PENDING
    assert sent(queue) == [("workers.simulation_run", [waiting.pk], True)]  # later, not at once

    other_worker.execute("SELECT pg_advisory_unlock(%s)", [slot_key(recorded.pk, 1)])  # one ended
    assert simulation_run(simulation_id=waiting.pk).status == SimulationStatus.DONE
    # Its slot is free again: the lock is released when the run ends.
    assert other_worker.execute("SELECT pg_try_advisory_lock(%s)", [slot_key(recorded.pk, 1)]).fetchone()[0]


def test_slots_are_per_project(recorded, other_project, queue, other_worker):
    make_policy(other_project)
    other_worker.execute("SELECT pg_advisory_lock(%s)", [slot_key(recorded.pk)])
    mine, theirs = start(recorded, limit=1), start(other_project, limit=1)
    assert simulation_run(simulation_id=mine.pk) is None
    assert simulation_run(simulation_id=theirs.pk).status == SimulationStatus.DONE


def test_a_slot_runs_its_projects_oldest_run_first_and_sends_the_others_message_again(recorded, queue):
    older, newer = start(recorded, limit=1), start(recorded, limit=2)
    # The newer one's message came first: the older one runs, the newer one's message goes back.
    assert simulation_run(simulation_id=newer.pk) is None
    older.refresh_from_db()
    newer.refresh_from_db()
    assert (older.status, newer.status) == (SimulationStatus.DONE, SimulationStatus.PENDING)
    assert sent(queue) == [("workers.simulation_run", [newer.pk], False)]
    assert simulation_run(simulation_id=older.pk) is None  # its own message later: nothing to do
    assert simulation_run(simulation_id=newer.pk).status == SimulationStatus.DONE


def test_simulations_and_recommendations_share_the_slots_in_the_order_asked(recorded, queue):
    simulation = start(recorded, limit=1)
    recommendation, _ = recommendation_start(project=recorded, days=7, limit=100)
    assert recommendation_run(recommendation_id=recommendation.pk) is None  # the simulation was first
    simulation.refresh_from_db()
    assert simulation.status == SimulationStatus.DONE
    assert sent(queue) == [("workers.recommendation_run", [recommendation.pk], False)]
    assert recommendation_run(recommendation_id=recommendation.pk).status == SimulationStatus.DONE


def test_a_waiting_run_says_how_many_of_its_projects_runs_are_ahead(recorded, other_project, queue):
    make_policy(other_project)
    first, second = start(recorded, limit=1), start(recorded, limit=2)
    recommendation, _ = recommendation_start(project=recorded, days=7, limit=100)
    start(other_project, limit=1)  # another project's runs are not ahead
    Simulation.objects.filter(pk=first.pk).update(status=SimulationStatus.RUNNING, started_at=timezone.now())
    first.refresh_from_db()
    assert background_queue_position(first) is None  # running
    assert background_queue_position(second) == 1
    assert background_queue_position(recommendation) == 2

    reader = KeyClient(make_key(recorded, scopes=["policy:read"]).secret)
    answer = reader.get(f"/api/v1/simulations/{second.pk}").json()
    assert answer["status"] == "pending" and answer["queued_behind"] == 1
    # A run still `running` past its hard time limit lost its worker: not ahead of anyone, and
    # failed when the project's next run takes a slot.
    lost = timezone.now() - timedelta(seconds=background.BACKGROUND_LIMITS["time_limit"] + 1)
    Simulation.objects.filter(pk=first.pk).update(started_at=lost)
    assert reader.get(f"/api/v1/simulations/{second.pk}").json()["queued_behind"] == 0
    assert simulation_run(simulation_id=second.pk).status == SimulationStatus.DONE
    first.refresh_from_db()
    assert (first.status, first.error) == (SimulationStatus.FAILED, "WorkerLost")
    assert reader.get(f"/api/v1/simulations/{first.pk}").json()["queued_behind"] is None
    assert Recommendation.objects.get(pk=recommendation.pk).status == SimulationStatus.PENDING
